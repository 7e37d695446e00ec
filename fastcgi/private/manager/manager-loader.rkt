#lang racket/base
;; The loaders' exits and deadlines, seen by the manager (manager.rkt). A generation's
;; loader (loader.rkt) that exits after it said the app does not load fails the start (the
;; manager gives up) or the reload (the old generation goes on serving), as a worker that
;; cannot start does. One that dies once it loaded is replaced by a new one for its
;; generation, at once; when max-deaths loaders of a generation in a row die within
;; crash-window-ms of their start, the generation's workers are started as processes of
;; their own from then on. The workers serve on either way.
(require "../os/child-process.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         "../util/log.rkt"
         "manager-exits.rkt"
         "manager-reload.rkt"
         "manager-reports.rkt"
         "lifecycle.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" loader)
         "manager-workers.rkt"
         "manager-forks.rkt"
         "../os/signals.rkt")
(define max-deaths 3)

(provide loader-exited!
         watch-loaders!
         stop-loaders!
         running-loaders)

;; running-loaders : manager -> (listof loader) ; those whose exit is still to be seen
(define (running-loaders m)
  (define base (manager-base m))
  (append (if (and base (not (loader-exited? base))) (list base) '())
          (for/list ([ld (in-sequences (in-hash-values (manager-loaders m))
                                       (in-list (manager-stopped-loaders m)))]
                     #:when (loader-sp ld)
                     #:unless (loader-exited? ld))
            ld)))

;; loader-exited! : manager loader -> void ; a generation's loader, or the base
(define (loader-exited! m ld)
  (set-loader-exited?! ld #t)
  (stopped-loader-exited! m ld)
  (await-reports! m (λ () (or (not (loader-control ld)) (loader-reports-done? ld))))
  ;; what it was asked to fork and did not answer for starts as a process of its own
  (forks-of-exited! m ld)
  (when (loader-control ld) (with-handlers ([exn:fail? void]) (close-output-port (loader-control ld))))
  (if (eq? ld (manager-base m))
      (base-exited! m ld)
      (generation-loader-exited! m ld)))

;; base-exited! : manager loader -> void
;; A base that served a while is replaced; one that could not start or died young is not
;; (the loaders then start as processes of their own).
(define (base-exited! m base)
  (define status (describe-exit-status (child-status (loader-sp base))))
  (cond
    [(or (manager-stopping? m) (eq? (loader-state base) 'unsafe)) (void)]
    [(and (eq? (loader-state base) 'ready) (> (- (now-ms) (loader-started-ms base)) crash-window-ms))
     (log-fastcgi-warning "the base ~a exited (~a): a new one starts" (loader-pid base) status)
     (start-base! m (manager-base-kind m))]
    [else
     (log-fastcgi-error "the base ~a exited (~a) soon after it started: each generation's loader loads the app as a process of its own"
                        (loader-pid base) status)
     (loader-move-if! base 'die)])
  (start-waiting-loaders! m))

;; generation-loader-exited! : manager loader -> void
(define (generation-loader-exited! m ld)
  (define g (loader-gen ld))
  (define status (describe-exit-status (child-status (loader-sp ld))))
  (define state (loader-state ld))
  (define now (now-ms))
  (cond
    [(or (manager-stopping? m) (not (eq? (generation-loader m g) ld)) (eq? state 'unsafe)) (void)]
    [(or (loader-failure ld) (eq? state 'loading))
     (loader-move-if! ld 'die)
     (load-failed! m ld (or (loader-failure ld)
                            (format "loader ~a exited before the app loaded (~a)" (loader-pid ld) status)))]
    [(not (wanted-generation? m g)) (stop-loader! m g)]
    [else
     (define deaths (if (< (- now (loader-started-ms ld)) crash-window-ms) (add1 (loader-deaths ld)) 0))
     (cond
       [(< deaths max-deaths)
        (log-fastcgi-warning "loader ~a of generation ~a exited (~a): a new one loads it" (loader-pid ld) g status)
        (total-add! m 'loader_restarts 1)
        (define new (start-loader! m g))
        (set-loader-deaths! new deaths)
        (pass-wanted! ld new)]
       [else
        (log-fastcgi-error "loader ~a of generation ~a exited (~a) soon after it started (~a in a row): its workers start as processes of their own"
                           (loader-pid ld) g status deaths)
        (loader-move! ld 'fall-back)
        (release-wanted! m ld)])]))

;; load-failed! : manager loader string -> void
;; The app does not load in generation g: the start fails (no worker was ever ready), or
;; the reload does; in the serving generation (its loader was replaced after the code
;; changed on disk) the workers are spawned, each loading the app, as without preloading.
(define (load-failed! m ld why)
  (define g (loader-gen ld))
  (cond
    [(eqv? g (manager-reload-gen m))
     (log-fastcgi-error "reload failed: ~a; generation ~a goes on serving" why (manager-gen m))
     (for ([x (in-list (serving m g))]) (drain! m x "reload failed"))
     (stop-loader! m g)
     (reload-settled! m why)]
    [(not (manager-ever-ready? m)) (give-up! m why)]
    [(= g (manager-gen m))
     (log-fastcgi-error "loader of generation ~a: ~a; its workers start as processes of their own" g why)
     (loader-move! ld 'fall-back)
     (release-wanted! m ld)]
    [else (stop-loader! m g)]))

;; watch-loaders! : manager flonum -> void ; a loader still loading past --start-timeout is killed
(define (watch-loaders! m now)
  (define start-timeout (manager-cfg m serve-config-start-timeout))
  (for ([ld (in-list (running-loaders m))]
        #:when (and (eq? (loader-state ld) 'loading) (not (loader-failure ld))
                    (> (- now (loader-started-ms ld)) (* 1000 start-timeout))))
    (log-fastcgi-error "loader ~a not loaded after ~a s: killing it" (loader-pid ld) start-timeout)
    (loader-failed! ld (format "not loaded after ~a s (--start-timeout)" start-timeout))
    (send-signal! (loader-pid ld) SIGKILL)))

;; stop-loaders! : manager -> void ; at a stop: no more forks, and the listening socket
;; they hold closes with them
(define (stop-loaders! m)
  (define base (manager-base m))
  (when (and base (not (loader-exited? base))) (send-signal! (loader-pid base) SIGTERM))
  (for ([g (in-list (hash-keys (manager-loaders m)))]) (stop-loader! m g)))

