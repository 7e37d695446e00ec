#lang racket/base
;; A worker's exit, seen by the manager (manager.rkt): its counters go to the pool's
;; totals; a worker that was not being stopped is replaced, with a growing delay when
;; workers crash at start or soon after; a reload's new worker that dies fails the reload;
;; and when no worker has ever been ready, the app cannot start here: the manager gives up.
(require "../os/child-process.rkt"
         "../util/clock.rkt"
         "../util/log.rkt"
         "manager-reload.rkt"
         (only-in "manager-canary.rkt" canary-exited!)
         "manager-reports.rkt"
         "manager-state.rkt"
         "manager-workers.rkt"
         "../status/metrics.rkt"
         "../os/signals.rkt")
(provide exited!
         give-up!)

;; exited! : manager worker -> void
(define (exited! m w)
  (await-reports! m (λ () (or (not (worker-control w)) (worker-reports-done? w))))
  ;; its control connection's descriptor (read-reports closed only the input side)
  (when (worker-control w) (with-handlers ([exn:fail? void]) (close-output-port (worker-control w))))
  (hash-remove! (manager-workers m) (worker-pid w))
  (total-add! m 'requests (worker-requests w))
  (total-add! m 'accepted_connections (worker-connections w))
  (total-add! m 'slow_requests (worker-slow w))
  (total-add! m 'shed_requests (worker-shed w))
  (total-add! m 'log_dropped (worker-log-dropped w))
  (when (worker-metrics w)
    (define gone (hash-ref (manager-totals m) 'metrics #f))
    (hash-set! (manager-totals m) 'metrics
               (if gone (metrics-merge gone (worker-metrics w)) (worker-metrics w))))
  (define status (child-status (worker-sp w)))
  (define now (now-ms))
  (define why (or (worker-failure w) (describe-exit-status status)))
  (cond
    [(eq? (worker-state w) 'draining)
     (log-fastcgi-info "worker ~a exited (~a)" (worker-pid w) (describe-exit-status status))]
    ;; a canary that dies during its trial rolls its reload back (manager-canary.rkt)
    [(canary-exited! m w)
     (log-fastcgi-warning "canary ~a exited (~a)" (worker-pid w) (describe-exit-status status))
     (total-add! m 'restarts 1)]
    [(and (not (manager-ever-ready? m)) (not (manager-stopping? m))
          (not (eqv? (worker-gen w) (manager-reload-gen m))))
     (give-up! m (or (worker-failure w)
                     (format "worker ~a exited before it was ready (~a)" (worker-pid w) why)))]
    [else
     (log-fastcgi-warning "worker ~a exited unexpectedly (~a) after ~a s~a"
                          (worker-pid w) (describe-exit-status status)
                          (/ (round (/ (- now (worker-started-ms w)) 100)) 10.0)
                          (if (worker-failure w) (string-append ": " (worker-failure w)) ""))
     (total-add! m 'restarts 1)
     (crashed! m w why now)
     (define reload-gen (manager-reload-gen m))
     (when (and reload-gen (= (worker-gen w) reload-gen))
       (define reason (format "a worker of generation ~a died before it was ready: ~a" reload-gen why))
       (log-fastcgi-error "reload failed: ~a; generation ~a goes on serving" reason (manager-gen m))
       (for ([x (in-list (serving m reload-gen))]) (drain! m x "reload failed"))
       (stop-loader! m reload-gen)
       (reload-settled! m reason))])
  (stop-idle-loaders! m)
  (maintain! m))

;; crashed! : manager worker string flonum -> void
;; A worker that died before it was ready or soon after is a crash: from the second in a
;; row on, the next start waits, twice as long each time. One that lasted starts over.
(define (crashed! m w why now)
  (cond
    [(or (not (worker-ready-ms w)) (< (- now (worker-started-ms w)) crash-window-ms))
     (define delay (crash-counted! m why now))
     (when delay
       (log-fastcgi-error "workers crash at start or soon after (~a in a row): next start in ~a s"
                          (manager-failures m) delay))]
    [else (start-failures-over! m)]))

;; give-up! : manager string -> none
;; No worker has ever been ready and one could not start: the app cannot start here (it
;; does not load, a log file cannot be opened). Restarting in a loop would hide that
;; behind a socket that accepts and never answers: the manager says why and exits 1.
(define (give-up! m why)
  (log-fastcgi-fatal "cannot start: ~a" why)
  (for ([x (in-list (live-workers m))]) (send-signal! (worker-pid x) SIGKILL))
  (for ([ld (in-hash-values (manager-loaders m))] #:when (loader-pid ld)) (send-signal! (loader-pid ld) SIGKILL))
  (when (manager-base m) (send-signal! (loader-pid (manager-base m)) SIGKILL))
  (for ([x (in-list (live-workers m))]) (sync/timeout 2 (worker-sp x)))
  (clean-up! m)
  (exit 1))

