#lang racket/base
;; A worker process of the manager. It accepts on the listening socket it inherited as
;; fd 0 (moved to a close-on-exec descriptor, /dev/null in its place), runs the
;; application, writes the access and slow logs (request-watch.rkt), answers the status
;; and ping paths (status-paths.rkt), and reports to the manager over its private control
;; socket (not stdout, which the application may print to; manager-link.rkt), in the
;; lines of lines.rkt's worker channel: hello, then ready (after limit, with
;; --max-requests) or failed (then it exits 3); stat and metrics when they change; beat
;; every second once ready (a worker that falls silent is replaced: manager-watch.rkt);
;; recycle once, when it wants to be replaced. It answers the manager's retire (hand the
;; kept connections over, serve the sessions, exit) and stacks (its running requests'
;; stacks: stacks.rkt).
;; Signals: SIGTERM or SIGINT: stop accepting, finish in-flight requests (graceful timeout),
;; exit 0. SIGHUP: reopen the log files (the manager forwards its SIGUSR1 this way).
;; It also stops when the manager goes away (its socket closes, or the parent-death signal).
;; Started through worker-main.rkt with its configuration, a serve-config (config.rkt).
(require (only-in "../os/ffi.rkt" [c-getpid getpid] close-on-exec-all!)
         (only-in "../util/jsexpr.rkt" jsexpr->string)
         "config.rkt"
         "../os/handover.rkt"
         (only-in "control.rkt" control-name ask-board ask-stacks)
         "manager-link.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "../status/metrics.rkt"
         "../os/recycle-limit.rkt"
         "../os/inherit.rkt"
         "../os/signals.rkt"
         "running-app.rkt"
         "serve-app.rkt"
         (only-in "stacks.rkt" running-stacks)
         "../engine/server.rkt"
         "../transport/transport.rkt")
(provide run-worker)


;; run-worker : serve-config -> none
(define (run-worker cfg)
  (define master-pid (serve-config-master-pid cfg))
  (define control (control-name (serve-config-pool-prefix cfg)))
  (break-enabled #f)
  (unblock-signals! (list SIGUSR1))
  ;; a handler's program gets 0-2 and nothing else, on every Racket (inherit.rkt)
  (keep-no-descriptors!)
  (die-with-parent! master-pid SIGTERM)
  (start-stderr-logging! (serve-config-log-level cfg) #:tag (format "[~a]" (getpid)))
  ;; the control connection, and the keys that the manager hands each worker on it
  (define-values (ctl-in ctl-out secret relay-key) (connect-manager (serve-config-pool-prefix cfg) ""))
  (define report! (make-reporter ctl-out 'worker))
  (report! 'hello #:pid (getpid))
  ;; a worker that cannot start says why in one line (the manager logs it) and exits 3
  (define (fail! msg)
    (unless (report! 'failed #:why msg) (log-fastcgi-fatal "~a" msg))
    (flush-logging)
    (exit 3))
  (define a (with-handlers ([exn:fail? (λ (e) (fail! (log-escape (exn-message e))))])
              (serve-app cfg (listener-for #f) (make-metrics)
                         #:secret secret #:relay-key relay-key
                         #:report report!
                         #:board (λ (srv) (ask-board control 2))
                         ;; every worker's, through the manager (manager-stacks.rkt)
                         #:stacks (λ (srv) (ask-stacks control 3))
                         #:on-load-failure fail!)))
  ;; kept connections that retiring siblings hand over (handover.rkt)
  (start-handover-receiver! (handover-address (serve-config-pool-prefix cfg) (serve-config-worker-id cfg))
                            (running-server-adopt (app-running a)))
  ;; the runtime's own descriptors too: a handler's subprocess holds none of ours
  (close-on-exec-all!)
  (define limit (draw-request-limit (serve-config-max-requests cfg) (serve-config-max-requests-jitter cfg)))
  (when limit (report! 'limit #:max-requests limit))
  (report! 'ready)
  (thread (λ () (report-loop a limit report!)))
  (thread (λ () (heartbeat report!)))
  ;; the manager is gone when its end of the control socket closes
  ;; and it asks a worker it replaces to retire, naming the workers that go on serving
  ;; (its kept connections are handed over to them)
  (define manager-gone (make-semaphore 0))
  (define retire (make-semaphore 0))
  (define hand-to (box '()))
  (thread (λ ()
            (let loop ()
              (define m (next-manager-line ctl-in))
              (unless (eof-object? m)
                (case (and m (car m))
                  [(retire)
                   (set-box! hand-to
                             (for/list ([id (in-list (hash-ref (cdr m) 'successors))])
                               (handover-address (serve-config-pool-prefix cfg) id)))
                   (semaphore-post retire)]
                  ;; what its running requests do now (stacks.rkt), taken without stopping them
                  [(stacks)
                   (report! 'stacks #:query (hash-ref (cdr m) 'query)
                            #:json (jsexpr->string (running-stacks (app-server a))))]
                  [else (void)])
                (loop)))
            (semaphore-post manager-gone)))
  (serve-until-stopped a (serve-config-graceful-timeout cfg) manager-gone
                       #:retire retire #:hand-to hand-to
                       #:session-drain (serve-config-session-drain cfg)))
