#lang racket/base
;; The manager (master) process of `raco fastcgi serve`: it owns the listening socket and
;; hands it to every worker process as fd 0 (the FastCGI convention; the kernel balances
;; accept among them), keeps the pool at the size the process manager asks for, replaces
;; workers that die (backing off when they crash in a loop), recycles them (max-requests,
;; max-memory; past max-memory-hard, at once), reloads a new generation on SIGHUP,
;; reopens logs on SIGUSR1, stops gracefully on SIGTERM/SIGINT, and publishes the pool's
;; status (the board that workers ask for to answer the status path, and the file `ctl`
;; reads). It never parses FastCGI and never loads the application: a bad app cannot take
;; it down. What it shares with its workers at run time travels over its control socket,
;; never through a file (control.rkt): a cleanup of temporary folders under a running
;; pool breaks nothing.
;;
;; Everything happens in one loop (the main thread, here): the messages of the control
;; connections, exits, signals and a 0.25 s tick arrive as events, so the pool state needs
;; no locks, and the loop never waits on one child (a fork is asked, and its answer is an
;; event like any other). The pieces, each taking the pool's state (manager-state.rkt) as
;; its first argument; each field of that state has one writer, the module of the owner
;; submodule that provides its setter (manager-state.rkt says which):
;;   lifecycle.rkt         the states of workers, loaders and the base: the only writer,
;;                         by named moves checked against its tables
;;   manager-workers.rkt   spawn (a fork asked of a loader, or a process), drain, retire,
;;                         cut, recycle one worker; start loaders and the base; maintain
;;                         the pool (pm.rkt's policy)
;;   manager-forks.rkt     the forks' answers, late ones, and their deadlines
;;   manager-reports.rkt   the control connections, in the lines of worker/lines.rkt: a
;;                         worker's ready, stat, recycle, failed; a loader's loaded, unsafe,
;;                         forked; the messages of processes not yet known (strangers)
;;   manager-exits.rkt     a worker's exit: replaced, crash backoff, or giving up
;;   manager-loader.rkt    a loader's or the base's exit, and their deadlines
;;   manager-reload.rkt    SIGHUP: a new generation, one reload at a time
;;   manager-canary.rkt    a canary reload's trial: roll forward, or back
;;   manager-stacks.rkt    ctl stacks, ?stacks: every worker's running requests' stacks
;;   manager-watch.rkt     the tick: deadlines, the watchdog, memory, orphans
;;   manager-status.rkt    the board, the status file and the pid file
;;   manager-notify.rkt    systemd's notify protocol
;;   manager-gc.rkt        the manager's own memory
(require ffi/unsafe/port
         racket/list
         (only-in "../os/ffi.rkt" [c-getpid getpid])
         "../os/child-process.rkt"
         "../util/entropy.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         "../worker/control.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "manager-exits.rkt"
         "manager-gc.rkt"
         "manager-loader.rkt"
         "manager-notify.rkt"
         "manager-reload.rkt"
         "manager-reports.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" manager)
         "manager-status.rkt"
         "manager-watch.rkt"
         "manager-workers.rkt"
         "pm.rkt"
         "../worker/preflight.rkt"
         "../os/inherit.rkt"
         "../os/signals.rkt"
         "../transport/transport.rkt")
(provide run-manager)

(define tick-seconds 0.25)

;; run-manager : serve-config -> none
(define (run-manager cfg)
  (break-enabled #f)
  ;; before any subprocess: see signals.rkt; whatever it inherited (inherit.rkt)
  (define-values (signal-evt inherited) (own-process! (list SIGHUP SIGINT SIGTERM SIGUSR1)))
  (manager-memory-setup!)
  (define m (start! cfg))
  (when inherited (log-fastcgi-info "started with ~a: the manager handles them all the same" inherited))
  (when (manager-preload? m)
    (log-fastcgi-debug "preloading: each generation's app is loaded once, its workers forked"))
  ;; before the first worker: they must not inherit NOTIFY_SOCKET
  (open-manager-notify! m)
  (start-control-thread! m)
  (define plan (manager-plan m))
  (log-fastcgi-info "listening on ~a (manager of ~a; ~a)" (manager-address m) (serve-config-app cfg)
                    (pm-describe plan))
  (for ([_ (in-range (pm-initial-count plan))]) (spawn! m (manager-gen m)))
  (define gc (make-manager-gc))
  (let loop ([next-tick (+ (now-ms) (* 1000 tick-seconds))])
    (define ev (next-event m signal-evt next-tick))
    (handle-event! m ev)
    (manager-gc! gc (first-generation-serves? m))
    ;; a changed pool is published at once (the status shows a replaced worker at once)
    (when (memq (first ev) '(exit loader-exit reload stop pending)) (publish! m (now-ms)))
    (notify-tick! m (now-ms) (* 1000 tick-seconds))
    (cond
      [(and (manager-stopping? m) (zero? (hash-count (manager-workers m))))
       (log-fastcgi-info "stopped")
       (clean-up! m)
       (close-manager-notify! m)
       (exit 0)]
      [(eq? (first ev) 'tick) (loop (+ (now-ms) (* 1000 tick-seconds)))]
      [else (loop next-tick)])))

;; start! : serve-config -> manager
;; Logging, the checks, the secret, the listening socket, the control socket and the pid
;; file: the pool's state, with no worker yet.
(define (start! cfg)
  (define pid (getpid))
  (start-stderr-logging! (serve-config-log-level cfg) #:tag (format "[~a]" pid))
  ;; the files first: a start that cannot work leaves no socket behind
  (check-serve-paths! cfg)
  ;; stateless servlets' URLs must verify in every worker, and after a reload: the secret
  ;; of --secret-file (read again at each reload), else one for the manager's life. The
  ;; workers have it from their control connection (control.rkt), as the relay key.
  (define secret-file (serve-config-secret-file cfg))
  (define secret (if secret-file (read-secret* secret-file) (random-bytes 32)))
  (define relay-key (random-bytes 16))
  (define listener
    (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
      (listener-for (serve-config-listen cfg) (serve-config-listener-options cfg))))
  ;; no file: nothing a cleanup of temporary folders can remove (control.rkt)
  (define prefix (make-pool-prefix pid))
  (define control (open-private-listener (control-name prefix)))
  ;; for `raco fastcgi ctl` (the workers ask the manager)
  (define pid-file (serve-config-pid-file cfg))
  (when pid-file
    (with-handlers ([exn:fail:filesystem?
                     (λ (e)
                       (listener-close! listener)
                       (listener-close! control)
                       (raise-user-error 'raco-fastcgi "--pid-file ~a: cannot write it: ~a"
                                         pid-file (filesystem-reason e)))])
      (write-pid-file! pid-file pid)))
  ;; preloading: forked workers become the manager's children (child-process.rkt)
  (define preload? (and (serve-config-preload cfg)
                        (or (become-subreaper!)
                            (begin (log-fastcgi-warning "cannot become the subreaper of the workers: each worker loads the app itself")
                                   #f))))
  (make-manager #:config cfg #:pid pid #:plan (make-pm-plan cfg) #:listener listener
                #:control control #:prefix prefix #:pid-file pid-file
                #:secret secret #:relay-key relay-key #:start-ms (now-ms) #:preload? preload?))

;; next-event : manager evt flonum -> list
;; What comes first: (message ...) from a control connection, (exit worker),
;; (loader-exit loader), (usr1) for SIGUSR1,
;; (reload) for SIGHUP, (stop fast?) for SIGTERM (#f) or SIGINT (#t), (pending) when the
;; process manager watches the listening socket and a connection waits, (tick) at next-tick.
(define (next-event m signal-evt next-tick)
  (define plan (manager-plan m))
  (define pending-evt
    (if (and (pm-wants-pending? plan) (not (manager-stopping? m)) (not (manager-reload-gen m))
             (zero? (pending-forks m (manager-gen m)))
             (for/and ([w (in-list (live-workers m))])
               (not (or (eq? (worker-state w) 'starting)
                        (and (eq? (worker-state w) 'ready) (zero? (worker-active w))))))
             (< (length (serving m (manager-gen m))) (pm-plan-max-workers plan)))
        (wrap-evt (unsafe-fd->evt (listener-fd (manager-listener m)) 'read) (λ (_) '(pending)))
        never-evt))
  (sync
   (wrap-evt (manager-messages m) (λ (msg) (cons 'message msg)))
   (wrap-evt signal-evt signal-event)
   pending-evt
   (apply choice-evt (for/list ([w (in-list (live-workers m))])
                       (wrap-evt (worker-sp w) (λ (_) (list 'exit w)))))
   (apply choice-evt (for/list ([ld (in-list (running-loaders m))])
                       (wrap-evt (loader-sp ld) (λ (_) (list 'loader-exit ld)))))
   (wrap-evt (alarm-at-evt next-tick) (λ (_) '(tick)))))

;; signal-event : natural -> list ; a signal the manager took (own-process!) as an event
(define (signal-event sig)
  (cond [(= sig SIGHUP) '(reload)]
        [(= sig SIGTERM) '(stop #f)]
        [(= sig SIGINT) '(stop #t)]
        [else '(usr1)]))

;; handle-event! : manager list -> void
(define (handle-event! m ev)
  (case (first ev)
    [(message) (message! m (rest ev))]
    [(exit) (exited! m (second ev))]
    [(loader-exit) (loader-exited! m (second ev))]
    [(usr1)
     (log-fastcgi-info "SIGUSR1: workers reopen their log files")
     (for ([w (in-list (live-workers m))]) (send-signal! (worker-pid w) SIGHUP))]
    [(reload) (reload! m)]
    [(stop) (stop! m (second ev))]
    [(pending)
     (log-fastcgi-debug "a connection waits and no worker is idle: starting one")
     (unless (< (now-ms) (manager-next-spawn-ms m)) (spawn! m (manager-gen m)))]
    [(tick) (tick! m)]))

;; stop! : manager boolean -> void ; fast?: a second SIGINT: no more waiting
(define (stop! m fast?)
  (cond
    [(and (manager-stopping? m) fast?)
     (log-fastcgi-warning "second interrupt: killing the workers")
     (for ([w (in-list (live-workers m))]) (send-signal! (worker-pid w) SIGKILL))]
    [(manager-stopping? m) (void)]
    [else
     (set-manager-stopping?! m #t)
     (log-fastcgi-info "stopping: workers finish in-flight requests (up to ~a s)"
                       (serve-config-graceful-timeout (manager-config m)))
     (notify-stopping! m)
     (listener-close! (manager-listener m))           ; no new connections; the socket file goes
     (stop-loaders! m)                                ; (they hold the socket too)
     (for ([w (in-list (live-workers m))]) (drain! m w "stop"))]))
