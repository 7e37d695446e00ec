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
(require "../util/lazy.rkt"
         (only-in "../os/ffi.rkt" [c-getpid getpid])
         "app.rkt"
         "../util/clock.rkt"
         "config.rkt"
         "../os/handover.rkt"
         (only-in "../os/ffi.rkt" close-on-exec-all!)
         (only-in "control.rkt" control-name relay-name ask-board ask-stacks read-secret)
         "manager-link.rkt"
         "../util/limits.rkt"
         "../os/log-file.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "memory-guard.rkt"
         "../status/metrics.rkt"
         "preflight.rkt"
         "../os/recycle-limit.rkt"
         "../engine/request.rkt"
         "request-watch.rkt"
         "../os/sd-notify.rkt"
         "../engine/server.rkt"
         "../os/inherit.rkt"
         "../os/signals.rkt"
         "running-app.rkt"
         "status-paths.rkt"
         (only-in "stacks.rkt" running-stacks)
         (only-in "../util/jsexpr.rkt" jsexpr->string)
         "../engine/timer.rkt"
         "../transport/transport.rkt"
         "../engine/wire.rkt")
;; Loaded for a servlet only (they load web-server).
(define-lazy "../servlet/relay.rkt" make-routing-handler)
(define-lazy "../servlet/servlet.rkt" loaded-servlet-sessions)
(define-lazy "../servlet/sessions.rkt" routed-manager-sweep!)
(provide run-worker
         run-single
         load-configured-app)

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
