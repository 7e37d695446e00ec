#lang racket/base
;; The pool's status as the manager (manager.rkt) sees it: the board (a hash, rendered by
;; pool-status.rkt), published for the workers that answer the status path (they ask for
;; it over the control socket: manager-reports.rkt) and, with --pid-file, written to the
;; status file that `raco fastcgi ctl` reads, with the pid file written again if a cleanup
;; of its folder removed it.
(require "../util/jsexpr.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         (only-in "../worker/control.rkt" control-name)
         (only-in "../os/log-file.rkt" log-lines-dropped)
         "../util/log.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" status)
         (only-in "manager-canary.rkt" canary-board)
         "../status/metrics.rkt"
         "pm.rkt"
         "../status/scoreboard.rkt"
         "../transport/transport.rkt")
(provide publish!
         write-pid-file!
         exact-floor)

;; publish! : manager flonum -> void
;; The board the workers are given when they ask, and with --pid-file its file: new when
;; it changed, or each second.
(define (publish! m now)
  (define board (make-board m now))
  (define last-board (manager-last-board m))
  (when (or (not (equal? (hash-remove board 'uptime) (and last-board (hash-remove last-board 'uptime))))
            (> (- now (manager-last-board-ms m)) 1000))
    (when (manager-scoreboard m) (write-files! m board))
    (set-manager-last-board! m board)
    (set-manager-last-board-ms! m now)))

;; write-files! : manager hash -> void
;; The status file, and the pid file again if it was removed (a cleanup of the folder
;; that holds them): `ctl` goes on working. A failure is logged once until they work.
(define (write-files! m board)
  (define pid-file (manager-pid-file m))
  (with-handlers ([exn:fail? (λ (e)
                               (when (manager-files-ok? m)
                                 (log-fastcgi-error "cannot write the status file ~a: ~a"
                                                    (log-escape (manager-scoreboard m))
                                                    (log-escape (exn-message e))))
                               (set-manager-files-ok?! m #f))])
    (unless (file-exists? pid-file)
      (write-pid-file! pid-file (manager-pid m))
      (log-fastcgi-warning "the pid file ~a was removed: written again" (log-escape pid-file)))
    ;; the control socket's name, for `ctl stacks` (not on the status page: the board)
    (write-scoreboard! (manager-scoreboard m)
                       (hash-set board 'control (control-name (manager-prefix m))))
    (set-manager-files-ok?! m #t)))

;; write-pid-file! : path-string natural -> void
(define (write-pid-file! file pid)
  (call-with-output-file file #:exists 'truncate (λ (out) (fprintf out "~a\n" pid))))

;; make-board : manager flonum -> hash
;; The pool's request metrics are those of its workers and of the workers gone before.
(define (make-board m now)
  (define ws (sort (live-workers m) < #:key worker-id))
  (define totals (manager-totals m))
  (define (sum f) (for/sum ([w (in-list ws)]) (f w)))
  (define (count ok?) (for/sum ([w (in-list ws)]) (if (ok? w) 1 0)))
  (define (total k [f #f]) (+ (hash-ref totals k 0) (if f (sum f) 0)))
  (define start-ms (manager-start-ms m))
  (with-metrics
   (hasheq 'pool (path->string (file-name-from-path* (manager-cfg m serve-config-app)))
          'pm (symbol->string (pm-plan-kind (manager-plan m)))
          'listen (manager-address m)
          'master_pid (manager-pid m)
          'start_time (exact-floor (/ (wall-ms-at start-ms) 1000))
          'uptime (exact-floor (/ (- now start-ms) 1000))
          'generation (manager-gen m)
          'preload (preload-state m)
          'loader_pid (let ([ld (serving-loader m)]) (if ld (loader-pid ld) (json-null)))
          'image_memory (let ([ld (serving-loader m)]) (or (and ld (loader-rss ld)) (json-null)))
          'loader_restarts (total 'loader_restarts)
          'base_pid (let ([b (manager-base m)])
                      (if (and b (eq? (loader-state b) 'ready) (not (loader-exited? b))) (loader-pid b) (json-null)))
          'accepted_connections (total 'accepted_connections worker-connections)
          'requests (total 'requests worker-requests)
          'listen_queue (or (listener-queue-length (manager-listener m)) (json-null))
          'active_workers (count (λ (w) (positive? (worker-active w))))
          'idle_workers (count (λ (w) (and (eq? (worker-state w) 'ready) (zero? (worker-active w)))))
          'total_workers (length ws)
          'draining_workers (count (λ (w) (eq? (worker-state w) 'draining)))
          'late_workers (count worker-late)
          'unresponsive_kills (total 'unresponsive_kills)
          'sessions (sum worker-sessions)
          'max_active_workers (manager-max-active m)
          'max_workers_reached (total 'max_workers_reached)
          'slow_requests (total 'slow_requests worker-slow)
          'shed_requests (total 'shed_requests worker-shed)
          'log_dropped (+ (log-lines-dropped) (total 'log_dropped worker-log-dropped))
          'restarts (total 'restarts)
          'recycled (total 'recycled)
          'orphans_reaped (total 'orphans_reaped)
          'untracked_stopped (total 'untracked_stopped)
          'reloads (total 'reloads)
          'reload_failures (total 'reload_failures)
          'reload_asks (manager-reload-asks m)
          'reload_settled (manager-reload-settled m)
          'last_reload_error (or (manager-last-reload-error m) (json-null))
          'canary (canary-board m)
          'canary_rollbacks (total 'canary_rollbacks)
          'canary_forwards (total 'canary_forwards)
          'start_failures (manager-failures m)
          'last_start_error (or (manager-last-start-error m) (json-null))
          'workers (for/list ([w (in-list ws)]) (worker-board w now)))
   (filter values (cons (hash-ref totals 'metrics #f) (map worker-metrics ws)))))

;; serving-loader : manager -> (or/c loader #f) ; the serving generation's, while it loads or forks
(define (serving-loader m)
  (define ld (generation-loader m (manager-gen m)))
  (and ld (memq (loader-state ld) '(loading ready)) (not (loader-exited? ld)) ld))

;; preload-state : manager -> string
;; How the serving generation's workers start: "off" (--no-preload, each loads the app),
;; "loading", "forked" (from its loader), "unsafe" (loading the app left what a fork
;; cannot share: each loads the app), "fallback" (its loader failed).
(define (preload-state m)
  (define ld (generation-loader m (manager-gen m)))
  (cond
    [(not (manager-preload? m)) "off"]
    [(not ld) "fallback"]
    [else (case (loader-state ld)
            [(waiting forking loading) "loading"]
            [(ready) "forked"]
            [(unsafe) "unsafe"]
            [else "fallback"])]))

;; worker-board : worker flonum -> hash ; one worker's line of the board
(define (worker-board w now)
  (with-metrics
   (hasheq 'pid (worker-pid w)
          'id (worker-id w)
          'state (symbol->string
                  (cond
                    [(worker-late w) 'late]
                    [(eq? (worker-state w) 'ready) (if (positive? (worker-active w)) 'busy 'idle)]
                    [else (worker-state w)]))
          'generation (worker-gen w)
          'requests (worker-requests w)
          'active (worker-active w)
          'connections (worker-connections w)
          'sessions (worker-sessions w)
          'shed (worker-shed w)
          'queue_delay (worker-queue-delay w)
          'memory (or (worker-rss w) (json-null))
          'private_memory (or (worker-private w) (json-null))
          'shared_memory (or (worker-shared w) (json-null))
          'forked (worker-forked? w)
          'max_requests (or (worker-max-requests w) (json-null))
          'oldest_request (let ([o (worker-oldest-ms w)])
                            (if o (/ (round (/ (- now o) 100.)) 10.) (json-null)))
          'start_time (/ (round (wall-ms-at (worker-started-ms w))) 1000.)
          'uptime (exact-floor (/ (- now (worker-started-ms w)) 1000)))
   (if (worker-metrics w) (list (worker-metrics w)) '())))

;; exact-floor : real -> integer
(define (exact-floor x) (inexact->exact (floor x)))
;; file-name-from-path* : path-string -> path
(define (file-name-from-path* p) (let-values ([(base name dir?) (split-path p)]) name))
