#lang racket/base
;; `raco fastcgi serve --single-process` (and `raco fastcgi dev`'s app process): the
;; server of serve-app.rkt with no manager, on the listener it opens, with systemd's notify
;; protocol when NOTIFY_SOCKET is set. It takes SIGHUP (reopen the log files), SIGTERM and
;; SIGINT (stop gracefully) itself, whatever it inherited (inherit.rkt).
(require (only-in "../os/ffi.rkt" [c-getpid getpid] close-on-exec-all!)
         "../util/clock.rkt"
         "config.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "../status/metrics.rkt"
         "preflight.rkt"
         "../os/sd-notify.rkt"
         "../os/inherit.rkt"
         "../os/signals.rkt"
         "running-app.rkt"
         "serve-app.rkt"
         "status-paths.rkt"
         "../engine/server.rkt"
         "../transport/transport.rkt")
(provide run-single)

;; run-single : serve-config -> none
;; `serve --single-process`: the same server with no manager, on the listener it opens.
(define (run-single cfg)
  (break-enabled #f)
  ;; before any subprocess or OS thread: whatever it inherited (inherit.rkt)
  (define-values (signal-evt inherited) (own-process! (list SIGHUP SIGINT SIGTERM)))
  (start-stderr-logging! (serve-config-log-level cfg))
  (when inherited (log-fastcgi-info "started with ~a: handled all the same" inherited))
  ;; systemd's notify protocol, as the manager speaks it (manager-notify.rkt), when
  ;; NOTIFY_SOCKET is set: opened first, so that no program a handler runs inherits it
  (define sd (open-notifier))
  (check-serve-paths! cfg #:pid-file? #f)   ; a single process writes none
  (define l (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
              (listener-for (serve-config-listen cfg) (serve-config-listener-options cfg))))
  (define start-ms (now-ms))
  (define metrics (make-metrics))
  (define a (serve-app cfg l metrics
                       #:report void
                       #:board (λ (srv) (single-board srv cfg start-ms (metrics->jsexpr metrics)))
                       #:stacks (λ (srv) (single-stacks srv))
                       ;; the socket was bound first (its errors come before a long
                       ;; load): a start that cannot work leaves no socket behind
                       #:on-load-failure (λ (msg) (listener-close! l) (raise-user-error 'raco-fastcgi "~a" msg))))
  (close-on-exec-all!)
  (log-fastcgi-info "serving ~a on ~a (pid ~a, single process)" (serve-config-app cfg)
                    (running-server-address (app-running a)) (getpid))
  (when sd (notify-serving! sd (format "serving ~a, single process" (running-server-address (app-running a)))))
  (serve-until-stopped a (serve-config-graceful-timeout cfg) never-evt
                       #:signals signal-evt
                       #:on-stop (λ () (notify! sd "STOPPING=1" "STATUS=stopping"))))

;; notify-serving! : notifier string -> void
;; READY=1 with the status line; with systemd's watchdog, WATCHDOG=1 at half its interval
;; from a thread of its own, which a process frozen whole (a foreign call that blocks the
;; VM, SIGSTOP) stops, so that systemd restarts it.
(define (notify-serving! sd status)
  (notify! sd "READY=1" (string-append "STATUS=" status))
  (define every (notifier-watchdog-ms sd))
  (when every
    (thread (λ () (let loop () (notify! sd "WATCHDOG=1") (sleep (/ every 1000.)) (loop))))))
