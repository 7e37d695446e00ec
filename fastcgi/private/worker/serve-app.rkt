#lang racket/base
;; A server of the app as `serve` configures it, in a worker (worker.rkt) or a single
;; process (single.rkt): the app loaded with its limits and servlet settings, the status
;; and ping paths, the access and slow logs, a servlet's relay between workers and its
;; sessions' count; and how it runs until stopped or retired (serve-until-stopped).
(require "../util/lazy.rkt"
         "app.rkt"
         "../util/clock.rkt"
         "config.rkt"
         (only-in "control.rkt" relay-name read-secret)
         "manager-link.rkt"
         "../util/limits.rkt"
         "../os/log-file.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "memory-guard.rkt"
         (only-in "preflight.rkt" filesystem-reason)
         "request-watch.rkt"
         "../engine/server.rkt"
         "../os/signals.rkt"
         "running-app.rkt"
         "status-paths.rkt"
         "../engine/timer.rkt"
         "../transport/transport.rkt"
         "../engine/wire.rkt")
;; Loaded for a servlet only (they load web-server).
(define-lazy "../servlet/relay.rkt" make-routing-handler)
(define-lazy "../servlet/servlet.rkt" loaded-servlet-sessions)
(define-lazy "../servlet/sessions.rkt" routed-manager-sweep!)
(provide serve-app
         serve-until-stopped
         load-configured-app)

;; serve-app : serve-config listener metrics #:secret #:relay-key #:report #:board #:stacks
;;             #:on-load-failure -> app
;; Loads the app and serves it on the listener, with the request metrics, the access and
;; slow logs and the status and ping paths. A worker has the secret and the relay key from
;; the manager.
(define (serve-app cfg listener metrics #:secret [secret #f] #:relay-key [relay-key #f]
                   #:report report! #:board board #:stacks stacks #:on-load-failure fail)
  (define lim (serve-config-worker-limits cfg))
  (define-values (app-handler roles servlet) (load-configured-app cfg fail #:secret secret))
  (when (limits-request-memory lim) (start-memory-guard! (limits-request-memory lim)))
  (define (open-log flag path)
    (with-handlers ([exn:fail:filesystem?
                     (λ (e) (fail (format "~a ~a: cannot open it for writing: ~a" flag
                                          (log-escape path) (log-escape (filesystem-reason e)))))])
      (open-log-file path)))
  (define access (let ([f (serve-config-access-log cfg)]) (and f (open-log "--access-log" f))))
  (define slow-log (let ([f (serve-config-slow-log cfg)]) (and f (open-log "--slow-log" f))))
  (define slow-count (box 0))
  (define srv-box (box #f))
  (define handler
    (wrap-status-paths app-handler
                       #:status-path (serve-config-status-path cfg)
                       #:ping-path (serve-config-ping-path cfg)
                       #:board (λ () (board (unbox srv-box)))
                       #:stacks (λ () (stacks (unbox srv-box)))))
  (define rm (and servlet (loaded-servlet-sessions servlet)))
  (define worker-id (serve-config-worker-id cfg))
  (define peers? (and rm (serve-config-pool-prefix cfg) relay-key))
  (define (peer-name id) (relay-name (serve-config-pool-prefix cfg) relay-key id))
  ;; the private socket first: a URL this worker hands out may come back through another
  (define private
    (and peers?
         (start-server app-handler
                       (open-private-listener (peer-name worker-id))
                       #:roles roles #:limits lim)))
  (define rs (start-server (if peers?
                               (make-routing-handler handler worker-id peer-name)
                               handler)
                           listener #:roles roles #:limits lim
                           #:allowed-clients (let ([a (serve-config-allowed-clients cfg)])
                                               (and a (parse-allowed-clients a)))
                           #:observer (make-observer metrics access)))
  (set-box! srv-box (running-server-server rs))
  (define sessions (box 0))
  (define a (make-app #:running rs #:slow slow-count #:access access #:slow-log slow-log
                      #:private private #:sessions (and rm (cons rm sessions)) #:metrics metrics))
  ;; the count changes without requests (sessions expire, a retiring worker serves only
  ;; its private socket): a change is reported at once, not at the next request
  (when rm
    (thread (λ () (let loop ()
                    (sleep session-sweep-seconds)
                    (define n (routed-manager-sweep! rm))
                    (unless (eqv? n (unbox sessions))
                      (set-box! sessions n)
                      (report-stat! a report!))
                    (loop)))))
  ;; scans of the connections' requests, on the server's one timer (timer.rkt)
  (define tm (server-timer (app-server a)))
  (when slow-log
    (timer-every! tm 500 (slow-watcher (app-server a) slow-log (serve-config-slow-threshold cfg) slow-count)))
  (when (limits-request-timeout lim)
    (timer-every! tm 1000 (stuck-watcher (app-server a) report!)))
  a)

;; How often a servlet's live sessions are counted (the status, and a retiring worker).
(define session-sweep-seconds 2)

;; serve-until-stopped : app real evt #:retire evt #:session-drain real #:hand-to box
;;                       #:signals (or/c evt #f) #:on-stop (-> any) -> none
;; SIGHUP reopens the log files; SIGTERM, SIGINT or the stop event stop gracefully (on-stop
;; first), exit 0. The signals come as breaks, or from signals (own-process!'s event) when
;; the process took them.
;; retire (the manager replaces this worker): the same, but a worker with live servlet
;; sessions first stops taking new connections and serves its sessions on its private
;; socket until none is left or session-drain seconds have passed.
(define (serve-until-stopped a graceful stop-evt #:retire [retire never-evt] #:session-drain [drain 0]
                             #:hand-to [hand-to (box '())] #:signals [signals #f]
                             #:on-stop [on-stop void])
  (define signal-evt
    (if signals (wrap-evt signals (λ (sig) (if (= sig SIGHUP) 'reopen 'stop))) never-evt))
  (define (next-event evts)
    (with-handlers ([exn:break:hang-up? (λ (e) 'reopen)]
                    [exn:break? (λ (e) 'stop)])
      (apply sync/enable-break (wrap-evt stop-evt (λ (_) 'orphaned)) signal-evt evts)))
  (define (reopen!)
    (log-fastcgi-info "SIGHUP: reopening log files")
    (when (app-access a) (log-file-reopen! (app-access a)))
    (when (app-slow-log a) (log-file-reopen! (app-slow-log a))))
  (define (stop! what)
    (when (eq? what 'orphaned) (log-fastcgi-warning "the manager is gone: stopping"))
    (on-stop)
    (log-fastcgi-info "stopping: finishing in-flight requests (up to ~a s)" graceful)
    ((running-server-stop (app-running a)) #:timeout graceful
                                           #:hand-to (if (eq? what 'retire) (unbox hand-to) '()))
    (when (app-private a) ((running-server-stop (app-private a)) #:timeout graceful))
    (when (app-access a) (log-file-close! (app-access a)))
    (when (app-slow-log a) (log-file-close! (app-slow-log a)))
    (flush-logging)
    (exit 0))
  (define (live-sessions)
    (define s (app-sessions a))
    (if s (routed-manager-sweep! (car s)) 0))
  (let loop ()
    (define what (next-event (list (wrap-evt retire (λ (_) 'retire)))))
    (case what
      [(reopen) (reopen!) (loop)]
      [(retire)
       (define n (if (and (app-private a) (positive? drain)) (live-sessions) 0))
       (cond
         [(zero? n) (stop! 'retire)]
         [else
          (log-fastcgi-info "retiring: no new connections; serving ~a live session(s) for up to ~a s"
                            n drain)
          ((running-server-stop (app-running a)) #:timeout graceful #:hand-to (unbox hand-to))
          (define deadline (+ (current-inexact-monotonic-milliseconds) (* 1000 drain)))
          (let wait ()
            (define what (next-event (list (wrap-evt (alarm-at-evt (+ (now-ms) 1000)) (λ (_) 'tick)))))
            (case what
              [(reopen) (reopen!) (wait)]
              [(tick)
               ;; (the sweep thread reports the count to the manager)
               (define left (live-sessions))
               (cond
                 [(zero? left) (log-fastcgi-info "retiring: every session has ended") (stop! 'retire)]
                 [(> (current-inexact-monotonic-milliseconds) deadline)
                  (log-fastcgi-info "retiring: ~a session(s) still live after ~a s: stopping" left drain)
                  (stop! 'retire)]
                 [else (wait)])]
              [else (stop! what)]))])]
      [else (stop! what)])))

;; load-configured-app : serve-config (string -> none) #:secret (or/c bytes #f)
;;                       -> (values (fastcgi-request -> any) (listof symbol) (or/c loaded-servlet #f))
;; The app loaded as the configuration says (`serve` and `serve --check`), with its limits;
;; fail gets the reason it does not load, as one escaped line.
(define (load-configured-app cfg fail #:secret [secret #f])
  (define app (serve-config-app cfg))
  (with-handlers ([(λ (e) #t)
                   (λ (e) (fail (format "cannot load ~a: ~a" (log-escape app)
                                        (log-escape (if (exn? e) (without-prefix (exn-message e)) e)))))])
    (load-app app (serve-config-limits cfg) (cfg->servlet-settings cfg secret)
              #:warn (λ (m) (log-fastcgi-warning "~a" (log-escape m))))))

;; cfg->servlet-settings : serve-config (or/c bytes #f) -> servlet-settings
;; The secret never travels in the configuration (which is on the worker's command line):
;; a worker has it from the manager's control connection (secret), a single process
;; reads it from the file its command line named.
(define (cfg->servlet-settings cfg secret)
  (define secret-file (serve-config-secret-file cfg))
  (make-servlet-settings #:worker-id (serve-config-worker-id cfg)
                         #:memory (serve-config-servlet-memory cfg)
                         #:timeout (serve-config-continuation-timeout cfg)
                         #:secret (or secret (and secret-file (read-secret secret-file)))
                         #:secret-lasting? (and secret-file #t)))
