#lang racket/base
;; The manager's hands on single workers (manager.rkt): spawn one, stop one (drain!,
;; retire!, at once: cut!), mark one to be recycled, and maintain! the pool at the size
;; the process manager (pm.rkt) asks for.
(require racket/list
         racket/runtime-path
         compiler/find-exe
         "clock.rkt"
         "config.rkt"
         "log.rkt"
         "manager-state.rkt"
         "pm.rkt"
         "signals.rkt")
(provide spawn!
         drain!
         cut!
         retire!
         recycle!
         maintain!)

(define-runtime-path worker-module "worker-main.rkt")

(define hard-grace 1)             ; seconds between SIGTERM and SIGKILL past --max-memory-hard

;; spawn! : manager natural -> worker ; a worker of generation g, given the listening
;; socket as fd 0 and its configuration on its command line (config.rkt)
(define (spawn! m g)
  (define id (add1 (manager-next-id m)))
  (set-manager-next-id! m id)
  (define wcfg (serve-config-for-worker (manager-config m) #:pool-prefix (manager-prefix m)
                                        #:master-pid (manager-pid m) #:worker-id id))
  (define-values (sp out in err)
    (subprocess (passable (current-output-port)) (manager-listen-port m) (passable (current-error-port))
                (find-exe) "-N" "fastcgi-worker" "-t" (path->string worker-module)
                "--" (let ([o (open-output-string)]) (write-serve-config wcfg o) (get-output-string o))))
  (define w (make-worker #:id id #:process sp #:generation g #:now (now-ms)))
  (hash-set! (manager-workers m) (worker-pid w) w)
  (log-fastcgi-debug "started worker ~a (generation ~a)" (worker-pid w) g)
  w)

;; drain! : manager worker string -> void ; SIGTERM: it finishes what it holds and exits
;; (a retiring worker too: it stops serving its sessions)
(define (drain! m w why)
  (unless (and (eq? (worker-state w) 'draining) (not (worker-retiring? w)))
    (log-fastcgi-info "stopping worker ~a (~a)" (worker-pid w) why)
    (set-worker-state! w 'draining)
    (set-worker-retiring?! w #f)
    (set-worker-drain-deadline! w (+ (now-ms) (* 1000 (+ (manager-cfg m serve-config-graceful-timeout) 2))))
    (send-signal! (worker-pid w) SIGTERM)))

;; cut! : manager worker string -> void
;; A worker past the hard memory ceiling is not waited for, since what makes it grow
;; would go on while it drains: SIGTERM now, so that what can finish within hard-grace
;; seconds does, then SIGKILL (manager-watch.rkt); its replacement starts at once.
(define (cut! m w why)
  (unless (hash-ref (manager-cut m) w #f)
    (hash-set! (manager-cut m) w #t)
    (log-fastcgi-warning "stopping worker ~a at once (SIGKILL in ~a s): ~a" (worker-pid w) hard-grace why)
    (define draining? (eq? (worker-state w) 'draining))
    (unless (or (worker-recycle w) draining?)
      (set-worker-recycle! w why)
      (total-add! m 'recycled 1))
    (set-worker-drain-deadline! w (min (+ (now-ms) (* 1000 hard-grace))
                                       (if draining? (worker-drain-deadline w) +inf.0)))
    (set-worker-state! w 'draining)
    (set-worker-retiring?! w #f)
    (send-signal! (worker-pid w) SIGTERM)
    (maintain! m)))

;; retire! : manager worker string -> void
;; A worker that is replaced: it stops taking connections, finishes what it holds and
;; serves its servlet sessions (continuation URLs other workers pass on to it) until
;; they end or session-drain seconds pass. Without a control connection, drain!.
(define (retire! m w why)
  (cond
    [(eq? (worker-state w) 'draining) (void)]
    [(and (worker-control w)
          (with-handlers ([exn:fail? (λ (e) #f)])
            (write-string (format "retire~a\n" (successor-ids m w)) (worker-control w))
            (flush-output (worker-control w))
            #t))
     (log-fastcgi-info "retiring worker ~a (~a)" (worker-pid w) why)
     (set-worker-state! w 'draining)
     (set-worker-retiring?! w #t)
     (set-worker-drain-deadline! w (+ (now-ms)
                                      (* 1000 (+ (manager-cfg m serve-config-session-drain)
                                                 (* 2 (manager-cfg m serve-config-graceful-timeout))
                                                 5))))]
    [else (drain! m w why)]))

;; successor-ids : manager worker -> string
;; " ID ..." of the ready workers of the newest generation but w: a retiring worker hands
;; its kept connections over to them (handover.rkt) instead of closing them under the front
(define (successor-ids m w)
  ;; (one waiting to be recycled only when there is no other)
  (define ready* (filter (λ (x) (and (eq? (worker-state x) 'ready) (not (eq? x w))))
                         (live-workers m)))
  (define fresh (filter (λ (x) (not (worker-recycle x))) ready*))
  (define ready (if (null? fresh) ready* fresh))
  (define newest (for/fold ([g 0]) ([x (in-list ready)]) (max g (worker-gen x))))
  (apply string-append
         (for/list ([x (in-list (shuffle ready))] #:when (= (worker-gen x) newest))
           (format " ~a" (worker-id x)))))

;; recycle! : manager worker string -> void ; it is replaced once its successor is ready
(define (recycle! m w why)
  (unless (or (worker-recycle w) (eq? (worker-state w) 'draining))
    (log-fastcgi-info "recycling worker ~a: ~a" (worker-pid w) why)
    (set-worker-recycle! w why)
    (total-add! m 'recycled 1)
    (maintain! m)))

;; maintain! : manager -> void ; ask the process manager what to start and stop, and do it
(define (maintain! m)
  (unless (manager-stopping? m)
    (define now (now-ms))
    (define current (serving m (manager-gen m)))
    (define fresh (filter (λ (w) (not (worker-recycle w))) current))
    (define decision (pm-decide (manager-plan m) (map worker-view fresh) now))
    (when (pm-decision-max-reached? decision) (total-add! m 'max_workers_reached 1))
    (for ([p (in-list (pm-decision-stop decision))])
      (define w (hash-ref (manager-workers m) p #f))
      (when w (retire! m w (pm-decision-why decision))))
    (define n (pm-decision-start decision))
    (when (and (positive? n) (not (manager-reload-gen m)))
      (cond
        [(< now (manager-next-spawn-ms m)) (void)]
        [else (for ([_ (in-range n)]) (spawn! m (manager-gen m)))]))))

;; worker-view : worker -> pm-worker
(define (worker-view w)
  (pm-worker (worker-pid w) (worker-state w) (worker-active w) (worker-last-busy-ms w)))

;; passable : port -> (or/c port #f) ; subprocess takes file-stream ports only
(define (passable p) (and (file-stream-port? p) p))
