#lang racket/base
;; The lifecycle of the pool's processes, and the only module that writes their states:
;; the rest of the manager asks for a move by its event's name. A process is in the
;; manager's tables from the instant it is started or its fork is answered until its exit
;; is seen (manager-exits.rkt, manager-loader.rkt); its state says what it does meanwhile.
;;
;; Besides the states, this module writes what goes with a move: a draining worker's
;; retiring? and drain deadline, and why a worker or a loader failed.
;;
;; A worker (manager-state.rkt's worker; retiring? tells a retiring one from one stopping):
;;   starting --ready--> ready        its ready line
;;   starting --retire--> draining    replaced: it hands its connections over and serves
;;   ready    --retire--> draining    its sessions, then exits (retiring? #t)
;;   starting --drain--> draining     stopped: SIGTERM (a stop, a failed reload, a late or
;;   ready    --drain--> draining     stuck worker; retiring? #f)
;;   draining --drain--> draining     a retiring one stopped after all (or cut at once)
;;
;; A generation's loader, or the pool's base (loader.rkt):
;;   waiting  --fork--> forking       asked of the base (the fork's answer is awaited)
;;   waiting  --start--> loading      started as a process of its own
;;   forking  --start--> loading      the base answered (or it failed: a process of its own)
;;   loading  --loaded--> ready       it forks on request
;;   loading  --unsafe--> unsafe      loading left what a fork cannot share, or this
;;                                    Racket cannot fork as expected: it exits, and the
;;                                    generation's workers load the app themselves
;;   loading  --die--> gone           it exited, failed, or stopped answering
;;   ready    --die--> gone
;;   gone     --fall-back--> off      its generation's workers start as processes of their
;;   ready    --fall-back--> off      own from then on (loaders died young, or the app
;;                                    failed to load in the serving generation)
;;
;; The tables are checked pair by pair in tests/lifecycle-test.rkt. A move that does not
;; apply is a bug of the caller: it raises. What a process says or does (its lines, its
;; exit) can come in any state: those moves are asked with loader-move-if!, which makes
;; the move where it applies and tells whether it did.
(require (only-in "../os/child-process.rkt" child-pid)
         "../util/transitions.rkt"
         (submod "manager-state.rkt" lifecycle)
         "manager-state.rkt")
(provide worker-transitions
         loader-transitions
         next-worker-state
         next-loader-state
         worker-move!
         worker-killed!
         worker-failed!
         loader-failed!
         loader-move!
         loader-move-if!
         loader-started!)

(define-transitions worker-transitions next-worker-state
  [ready (starting ready)]
  [retire (starting draining) (ready draining)]
  [drain (starting draining) (ready draining) (draining draining)])

(define-transitions loader-transitions next-loader-state
  [fork (waiting forking)]
  [start (waiting loading) (forking loading)]
  [loaded (loading ready)]
  [unsafe (loading unsafe)]
  [die (loading gone) (ready gone)]
  [fall-back (gone off) (ready off)])

;; worker-move! : worker symbol [#:deadline real] -> void
;; To draining (retire, drain), with the deadline past which it is killed: a retiring
;; worker serves its sessions meanwhile, a drained one only finishes what it holds.
(define (worker-move! w event #:deadline [deadline #f])
  (define next (next-worker-state event (worker-state w)))
  (unless next
    (error 'lifecycle "worker ~a: no ~a in state ~a" (worker-pid w) event (worker-state w)))
  (when (eq? next 'draining)
    (unless deadline (error 'lifecycle "worker ~a: ~a without a deadline" (worker-pid w) event))
    (set-worker-retiring?! w (eq? event 'retire))
    (set-worker-drain-deadline! w deadline))
  (set-worker-state! w next))

;; worker-killed! : worker flonum -> void
;; A draining worker past its deadline was sent SIGKILL: its exit is awaited 5 s more.
(define (worker-killed! w now)
  (set-worker-drain-deadline! w (+ now 5000)))

;; worker-failed! : worker string -> void ; why it could not start (the status shows it)
(define (worker-failed! w why)
  (set-worker-failure! w why))

;; loader-failed! : loader string -> void ; why the app does not load in it
(define (loader-failed! ld why)
  (set-loader-failure! ld why))

;; loader-move! : loader symbol -> void
(define (loader-move! ld event)
  (define next (next-loader-state event (loader-state ld)))
  (unless next
    (error 'lifecycle "loader ~a (generation ~a): no ~a in state ~a"
           (or (loader-pid ld) "-") (loader-gen ld) event (loader-state ld)))
  (set-loader-state! ld next))
;; loader-move-if! : loader symbol -> boolean ; the move, where it applies
(define (loader-move-if! ld event)
  (define next (next-loader-state event (loader-state ld)))
  (when next (set-loader-state! ld next))
  (and next #t))

;; loader-started! : loader child-process flonum -> void
;; A waiting (or forking) loader's process, now loading.
(define (loader-started! ld sp now)
  (loader-move! ld 'start)
  (set-loader-sp! ld sp)
  (set-loader-pid! ld (child-pid sp))
  (set-loader-started-ms! ld now))
