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
;; Everything happens in one loop (the main thread): worker reports, worker exits, signals
;; and a 0.25 s tick arrive as events, so the pool state needs no locks.
(require ffi/unsafe/port
         json
         racket/file
         racket/list
         racket/os
         racket/random
         racket/runtime-path
         racket/string
         compiler/find-exe
         "clock.rkt"
         (only-in "log-file.rkt" log-lines-dropped)
         "log.rkt"
         "logging.rkt"
         "control.rkt"
         "pm.rkt"
         "pool-status.rkt"
         "preflight.rkt"
         "server.rkt"
         "signals.rkt"
         "transport.rkt")
(provide run-manager)

(define-runtime-path worker-module "worker-main.rkt")

(define tick-seconds 0.25)
(define hard-grace 1)             ; seconds between SIGTERM and SIGKILL past --max-memory-hard
(define crash-window-ms 10000.)   ; a worker that dies younger than this counts as a crash
;; The watchdog (watch-beats!). A ready worker reports every second (its heartbeat); one
;; that falls silent shows late past late-ms, and past the request timeout (else
;; default-watchdog seconds) plus watchdog-grace seconds it is killed and replaced.
(define late-ms 3000.)
(define watchdog-grace 10)
(define default-watchdog 60)

;; One worker process. state: 'starting 'ready 'draining. retiring?: it was asked to
;; retire (serve its servlet sessions, then stop) rather than to stop. control: the output
;; port of its control connection, once it said hello. failure: why it could not start,
;; as it said in a "failed" line. reports-done?: its control connection has ended.
;; heard-ms: when its last line came. late: #f, #t (silent past late-ms), or 'killed.
;; log-dropped: log lines it dropped (its log was not being read).
(struct worker (id sp pid gen started-ms
                [state #:mutable] [ready-ms #:mutable]
                [requests #:mutable] [active #:mutable] [connections #:mutable] [slow #:mutable]
                [shed #:mutable] [queue-delay #:mutable] [sessions #:mutable]
                [rss #:mutable] [drain-deadline #:mutable] [recycle #:mutable]
                [last-busy-ms #:mutable] [retiring? #:mutable] [control #:mutable]
                [failure #:mutable] [reports-done? #:mutable] [log-dropped #:mutable]
                [heard-ms #:mutable] [late #:mutable])
  #:transparent)

;; run-manager : hash -> none
;; cfg keys: app listen backlog socket-mode socket-owner socket-group pm workers min-spare
;; max-spare max-workers idle-timeout max-requests max-memory graceful-timeout
;; start-timeout pid-file log-level, and the worker keys passed through (limits,
;; allowed-clients, access-log, slow-log, slow-threshold, status-path, ping-path).
(define (run-manager cfg)
  (define (cfg-ref k [default #f]) (hash-ref cfg k default))
  (break-enabled #f)
  ;; before any subprocess: see signals.rkt
  (define usr1-evt (block-signals! (list SIGUSR1)))
  (define pid (getpid))
  (start-stderr-logging! (cfg-ref 'log-level 'info) #:tag (format "[~a]" pid))
  ;; the files first: a start that cannot work leaves no socket behind
  (check-serve-paths! cfg)
  ;; stateless servlets' URLs must verify in every worker, and after a reload: the secret
  ;; of --secret-file (read again at each reload), else one for the manager's life. The
  ;; workers have it from their control connection (control.rkt), as the relay key.
  (define secret-file (cfg-ref 'secret-file))
  (define secret (if secret-file (read-secret* secret-file) (crypto-random-bytes 32)))
  (define relay-key (crypto-random-bytes 16))
  (define listener
    (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
      (resolve-listener (cfg-ref 'listen) #:backlog (cfg-ref 'backlog 1024)
                        #:socket-mode (cfg-ref 'socket-mode #o660)
                        #:socket-owner (cfg-ref 'socket-owner) #:socket-group (cfg-ref 'socket-group))))
  (define address (listener-address listener))
  (define listen-port (unsafe-file-descriptor->port (listener-fd listener) 'listener '(read)))
  ;; no file: nothing a cleanup of temporary folders can remove (control.rkt)
  (define prefix (make-pool-prefix pid))
  (define control (open-private-listener (control-name prefix)))
  (define pid-file (cfg-ref 'pid-file))
  ;; for `raco fastcgi ctl` (the workers ask the manager)
  (define scoreboard (and pid-file (string-append pid-file ".status.json")))
  (when pid-file
    (with-handlers ([exn:fail:filesystem?
                     (λ (e)
                       (listener-close! listener)
                       (listener-close! control)
                       (raise-user-error 'raco-fastcgi "--pid-file ~a: cannot write it: ~a"
                                         pid-file (filesystem-reason e)))])
      (call-with-output-file pid-file #:exists 'truncate (λ (out) (fprintf out "~a\n" pid)))))
  (define plan (make-pm-plan cfg))
  (define graceful (cfg-ref 'graceful-timeout 30))
  (define start-timeout (cfg-ref 'start-timeout 60))
  (define watchdog-ms
    (* 1000 (+ watchdog-grace (cond [(assoc "request-timeout" (cfg-ref 'limits '())) => cdr]
                                    [else default-watchdog]))))
  (define max-memory (cfg-ref 'max-memory))
  ;; past it a worker is stopped at once (cut!): --max-memory-hard, else 2 x --max-memory
  (define max-memory-hard (or (cfg-ref 'max-memory-hard) (and max-memory (* 2 max-memory))))
  (define racket-exe (find-exe))
  (define session-drain (cfg-ref 'session-drain 600))
  (define worker-cfg
    (hash-set* (for/hash ([k (in-list '(app log-level limits allowed-clients access-log slow-log slow-threshold
                                        status-path ping-path max-requests graceful-timeout
                                        servlet-memory continuation-timeout session-drain))]
                          #:when (hash-has-key? cfg k))
                 (values k (hash-ref cfg k)))
               'secret-lasting? (and secret-file #t)
               'pool-prefix prefix))

  ;; ---- pool state (touched by the main loop only)
  (define workers (make-hasheqv))            ; pid -> worker
  (define gen 1)
  (define reload-gen #f)                     ; the generation being started by a reload
  (define next-id 0)
  (define failures 0)                        ; crashes in a row
  (define last-failure-ms 0.)                ; when the last of them happened
  (define last-start-error #f)               ; why the last of them died
  (define ever-ready? #f)                    ; a worker has been ready: the app can start
  (define next-spawn-ms 0.)                  ; backoff: no spawn before this
  ;; Reloads are counted as asked (SIGHUPs); one asked while another is under way runs
  ;; after it (several such collapse into one). reload-covers: the asks made before the
  ;; reload under way started; reload-settled: those made before the last finished one
  ;; started (`ctl reload` waits until it passes its own ask).
  (define reload-pending? #f)
  (define reload-asks 0)
  (define reload-covers 0)
  (define reload-settled 0)
  (define last-reload-error #f)              ; why the last reload failed; #f when it worked
  (define stopping? #f)
  (define stop-deadline #f)
  (define totals (make-hasheq))              ; counters of workers that are gone, and events
  (define max-active 0)
  (define start-ms (now-ms))
  (define messages (make-channel))
  (define last-board #f)
  (define last-board-ms 0.)
  (define last-memory-ms -inf.0)                ; the first tick reads memory
  (define (total-add! k n) (hash-set! totals k (+ n (hash-ref totals k 0))))

  ;; spawn! : natural -> worker
  (define (spawn! g)
    (set! next-id (add1 next-id))
    (define wcfg (hash-set* worker-cfg 'control (control-name prefix)
                            'master-pid pid 'worker-id next-id))
    (define-values (sp out in err)
      (subprocess (passable (current-output-port)) listen-port (passable (current-error-port))
                  racket-exe "-N" "fastcgi-worker" "-t" (path->string worker-module)
                  "--" (format "~s" wcfg)))
    (define now (now-ms))
    (define w (worker next-id sp (subprocess-pid sp) g now 'starting #f 0 0 0 0 0 0 0 #f #f #f now #f #f #f #f 0 now #f))
    (hash-set! workers (worker-pid w) w)
    (log-fastcgi-debug "started worker ~a (generation ~a)" (worker-pid w) g)
    w)

  ;; drain! : worker string -> void ; SIGTERM: it finishes what it holds and exits
  ;; (a retiring worker too: it stops serving its sessions)
  (define (drain! w why)
    (unless (and (eq? (worker-state w) 'draining) (not (worker-retiring? w)))
      (log-fastcgi-info "stopping worker ~a (~a)" (worker-pid w) why)
      (set-worker-state! w 'draining)
      (set-worker-retiring?! w #f)
      (set-worker-drain-deadline! w (+ (now-ms) (* 1000 (+ graceful 2))))
      (send-signal! (worker-pid w) SIGTERM)))

  ;; cut! : worker string -> void
  ;; A worker past the hard memory ceiling is not waited for, since what makes it grow
  ;; would go on while it drains: SIGTERM now, so that what can finish within hard-grace
  ;; seconds does, then SIGKILL (tick!); its replacement starts at once (maintain!).
  (define cut (make-weak-hasheq))             ; the workers cut!, once each
  (define (cut! w why)
    (unless (hash-ref cut w #f)
      (hash-set! cut w #t)
      (log-fastcgi-warning "stopping worker ~a at once (SIGKILL in ~a s): ~a" (worker-pid w) hard-grace why)
      (define draining? (eq? (worker-state w) 'draining))
      (unless (or (worker-recycle w) draining?)
        (set-worker-recycle! w why)
        (total-add! 'recycled 1))
      (set-worker-drain-deadline! w (min (+ (now-ms) (* 1000 hard-grace))
                                         (if draining? (worker-drain-deadline w) +inf.0)))
      (set-worker-state! w 'draining)
      (set-worker-retiring?! w #f)
      (send-signal! (worker-pid w) SIGTERM)
      (maintain!)))

  ;; retire! : worker string -> void
  ;; A worker that is replaced: it stops taking connections, finishes what it holds and
  ;; serves its servlet sessions (continuation URLs other workers pass on to it) until
  ;; they end or session-drain seconds pass. Without a control connection, drain!.
  (define (retire! w why)
    (cond
      [(eq? (worker-state w) 'draining) (void)]
      [(and (worker-control w)
            (with-handlers ([exn:fail? (λ (e) #f)])
              (write-string (format "retire~a\n" (successor-ids w)) (worker-control w))
              (flush-output (worker-control w))
              #t))
       (log-fastcgi-info "retiring worker ~a (~a)" (worker-pid w) why)
       (set-worker-state! w 'draining)
       (set-worker-retiring?! w #t)
       (set-worker-drain-deadline! w (+ (now-ms)
                                        (* 1000 (+ session-drain (* 2 graceful) 5))))]
      [else (drain! w why)]))

  ;; successor-ids : worker -> string
  ;; " ID ..." of the ready workers of the newest generation but w: a retiring worker hands
  ;; its kept connections over to them (handover.rkt) instead of closing them under the front
  (define (successor-ids w)
    ;; (one waiting to be recycled only when there is no other)
    (define ready* (filter (λ (x) (and (eq? (worker-state x) 'ready) (not (eq? x w))))
                           (live-workers)))
    (define fresh (filter (λ (x) (not (worker-recycle x))) ready*))
    (define ready (if (null? fresh) ready* fresh))
    (define newest (for/fold ([g 0]) ([x (in-list ready)]) (max g (worker-gen x))))
    (apply string-append
           (for/list ([x (in-list (shuffle ready))] #:when (= (worker-gen x) newest))
             (format " ~a" (worker-id x)))))

  (define (live-workers) (hash-values workers))
  (define (serving g)                        ; starting or ready, in generation g
    (filter (λ (w) (and (= (worker-gen w) g) (not (eq? (worker-state w) 'draining))))
            (live-workers)))

  ;; maintain! : -> void ; ask the process manager what to start and stop, and do it
  (define (maintain!)
    (unless stopping?
      (define now (now-ms))
      (define current (serving gen))
      (define fresh (filter (λ (w) (not (worker-recycle w))) current))
      (define decision (pm-decide plan (map worker-view fresh) now))
      (when (pm-decision-max-reached? decision) (total-add! 'max_workers_reached 1))
      (for ([p (in-list (pm-decision-stop decision))])
        (define w (hash-ref workers p #f))
        (when w (retire! w (pm-decision-why decision))))
      (define n (pm-decision-start decision))
      (when (and (positive? n) (not reload-gen))
        (cond
          [(< now next-spawn-ms) (void)]
          [else (for ([_ (in-range n)]) (spawn! gen))]))))

  ;; worker-view : worker -> pm-worker
  (define (worker-view w)
    (pm-worker (worker-pid w) (worker-state w) (worker-active w) (worker-last-busy-ms w)))

  ;; ready! : worker -> void
  (define (ready! w)
    (set-worker-state! w 'ready)
    (set-worker-ready-ms! w (now-ms))
    (set! ever-ready? #t)
    (log-fastcgi-info "worker ~a ready (generation ~a)" (worker-pid w) (worker-gen w))
    (cond
      [(and reload-gen (= (worker-gen w) reload-gen))
       (when (andmap (λ (x) (eq? (worker-state x) 'ready)) (serving reload-gen))
         (for ([old (in-list (live-workers))] #:when (< (worker-gen old) reload-gen))
           (retire! old "reload: replaced by the new generation"))
         (set! gen reload-gen)
         (log-fastcgi-info "reload done: generation ~a serves" gen)
         (reload-settled! #f))]
      [else
       ;; a fresh worker of the generation takes the place of one waiting to be recycled
       (define waiting (sort (filter (λ (x) (and (worker-recycle x) (= (worker-gen x) (worker-gen w))
                                                 (not (eq? (worker-state x) 'draining))))
                                     (live-workers))
                             < #:key worker-started-ms))
       (when (pair? waiting) (retire! (first waiting) (worker-recycle (first waiting))))]))

  ;; recycle! : worker string -> void
  (define (recycle! w why)
    (unless (or (worker-recycle w) (eq? (worker-state w) 'draining))
      (log-fastcgi-info "recycling worker ~a: ~a" (worker-pid w) why)
      (set-worker-recycle! w why)
      (total-add! 'recycled 1)
      (maintain!)))

  ;; exited! : worker -> void
  (define (exited! w)
    (await-reports-end! w)
    ;; its control connection's descriptor (read-reports closed only the input side)
    (when (worker-control w) (with-handlers ([exn:fail? void]) (close-output-port (worker-control w))))
    (hash-remove! workers (worker-pid w))
    (total-add! 'requests (worker-requests w))
    (total-add! 'accepted_connections (worker-connections w))
    (total-add! 'slow_requests (worker-slow w))
    (total-add! 'shed_requests (worker-shed w))
    (total-add! 'log_dropped (worker-log-dropped w))
    (define status (subprocess-status (worker-sp w)))
    (define now (now-ms))
    (define why (or (worker-failure w) (describe-status status)))
    (cond
      [(eq? (worker-state w) 'draining)
       (log-fastcgi-info "worker ~a exited (~a)" (worker-pid w) (describe-status status))]
      [(and (not ever-ready?) (not stopping?) (not (eqv? (worker-gen w) reload-gen)))
       (give-up! (or (worker-failure w)
                     (format "worker ~a exited before it was ready (~a)" (worker-pid w) why)))]
      [else
       (log-fastcgi-warning "worker ~a exited unexpectedly (~a) after ~a s~a"
                            (worker-pid w) (describe-status status)
                            (/ (round (/ (- now (worker-started-ms w)) 100)) 10.0)
                            (if (worker-failure w) (string-append ": " (worker-failure w)) ""))
       (total-add! 'restarts 1)
       (cond
         [(or (not (worker-ready-ms w)) (< (- now (worker-started-ms w)) crash-window-ms))
          (set! failures (add1 failures))
          (set! last-failure-ms now)
          (set! last-start-error why)
          (when (> failures 1)
            (define delay (min 30. (* 0.1 (expt 2 (- failures 2)))))
            (set! next-spawn-ms (+ now (* 1000 delay)))
            (log-fastcgi-error "workers crash at start or soon after (~a in a row): next start in ~a s"
                               failures delay))]
         [else (start-failures-over!)])
       (when (and reload-gen (= (worker-gen w) reload-gen))
         (define reason (format "a worker of generation ~a died before it was ready: ~a" reload-gen why))
         (log-fastcgi-error "reload failed: ~a; generation ~a goes on serving" reason gen)
         (for ([x (in-list (serving reload-gen))]) (drain! x "reload failed"))
         (reload-settled! reason))])
    (maintain!))

  ;; start-failures-over! : -> void ; workers start and last again
  (define (start-failures-over!)
    (set! failures 0)
    (set! last-start-error #f))

  ;; await-reports-end! : worker -> void
  ;; The last lines of a worker that exited (why it could not start) may still be on their
  ;; way when its exit is seen: they are read first, for at most a second.
  (define (await-reports-end! w)
    (define deadline (+ (now-ms) 1000))
    (let loop ()
      (unless (or (not (worker-control w)) (worker-reports-done? w)
                  (> (now-ms) deadline))
        (define m (sync/timeout 0.05 messages))
        (when m (message! m))
        (loop))))

  ;; give-up! : string -> none
  ;; No worker has ever been ready and one could not start: the app cannot start here (it
  ;; does not load, a log file cannot be opened). Restarting in a loop would hide that
  ;; behind a socket that accepts and never answers: the manager says why and exits 1.
  (define (give-up! why)
    (log-fastcgi-fatal "cannot start: ~a" why)
    (for ([x (in-list (live-workers))]) (send-signal! (worker-pid x) SIGKILL))
    (for ([x (in-list (live-workers))]) (sync/timeout 2 (worker-sp x)))
    (clean-up!)
    (exit 1))

  ;; clean-up! : -> void ; the socket, the pid file and the status file go
  (define (clean-up!)
    (listener-close! listener)
    (when (and pid-file (equal? (file->string* pid-file) (format "~a\n" pid)))
      (delete-file* pid-file))
    (when scoreboard (delete-file* scoreboard))
    (listener-close! control)
    (flush-logging))

  ;; reload! : -> void ; SIGHUP. Asked while one is under way, it runs after that one.
  (define (reload!)
    (unless stopping?
      (set! reload-asks (add1 reload-asks))
      (cond
        [reload-gen
         (unless reload-pending?
           (log-fastcgi-info "reload asked while one is under way: it runs after it"))
         (set! reload-pending? #t)]
        [else (start-reload!)])))

  ;; start-reload! : -> void
  (define (start-reload!)
    (set! reload-pending? #f)
    (set! reload-covers reload-asks)
    (define n (pm-reload-count plan (length (serving gen))))
    (log-fastcgi-info "reload: starting generation ~a (~a workers)" (add1 gen) n)
    (cond
      [(zero? n) (set! gen (add1 gen)) (reload-settled! #f)]
      [else
       (set! reload-gen (add1 gen))
       (start-failures-over!)
       (set! next-spawn-ms 0.)
       (for ([_ (in-range n)]) (spawn! reload-gen))]))

  ;; reload-settled! : (or/c string #f) -> void
  ;; The reload under way is done (#f) or failed (why); one asked meanwhile starts now.
  (define (reload-settled! failure)
    (set! reload-gen #f)
    (set! reload-settled reload-covers)
    (set! last-reload-error failure)
    (total-add! (if failure 'reload_failures 'reloads) 1)
    (when (and reload-pending? (not stopping?)) (start-reload!)))

  ;; stop! : boolean -> void ; fast?: a second SIGINT: no more waiting
  (define (stop! fast?)
    (cond
      [(and stopping? fast?)
       (log-fastcgi-warning "second interrupt: killing the workers")
       (for ([w (in-list (live-workers))]) (send-signal! (worker-pid w) SIGKILL))]
      [stopping? (void)]
      [else
       (set! stopping? #t)
       (log-fastcgi-info "stopping: workers finish in-flight requests (up to ~a s)" graceful)
       (listener-close! listener)           ; no new connections; the socket file goes
       (for ([w (in-list (live-workers))]) (drain! w "stop"))]))

  ;; watch-beats! : flonum -> void
  ;; A ready worker that falls silent is frozen, stopped (SIGSTOP), or its whole VM is
  ;; held by a foreign call: late on the status, then killed (SIGKILL: it can take no
  ;; other signal) and replaced at once. The connections it holds fail with it; those
  ;; still in the listen queue go to the other workers and its replacement.
  (define (watch-beats! now)
    (for ([w (in-list (live-workers))]
          #:when (and (worker-ready-ms w) (not (worker-reports-done? w))
                      (not (eq? (worker-late w) 'killed))))
      (define silent (- now (worker-heard-ms w)))
      (cond
        [(> silent watchdog-ms)
         (log-fastcgi-error "worker ~a sent nothing for ~a s (frozen, stopped, or blocked in a foreign call): killing it"
                            (worker-pid w) (exact-floor (/ silent 1000)))
         (set-worker-late! w 'killed)
         (total-add! 'unresponsive_kills 1)
         (set-worker-state! w 'draining)
         (set-worker-retiring?! w #f)
         (set-worker-drain-deadline! w (+ now 5000))
         (send-signal! (worker-pid w) SIGKILL)
         (maintain!)]
        [(> silent late-ms)
         (unless (worker-late w)
           (log-fastcgi-warning "worker ~a is late: nothing from it for ~a s" (worker-pid w)
                                (exact-floor (/ silent 1000)))
           (set-worker-late! w #t))]
        [else (set-worker-late! w #f)])))

  ;; tick! : -> void
  (define (tick!)
    (define now (now-ms))
    (for ([w (in-list (live-workers))])
      (cond
        [(and (eq? (worker-state w) 'draining) (> now (worker-drain-deadline w)))
         (log-fastcgi-warning "worker ~a did not stop in time: killing it" (worker-pid w))
         (send-signal! (worker-pid w) SIGKILL)
         (set-worker-drain-deadline! w (+ now 5000))]
        [(and (eq? (worker-state w) 'starting) (> (- now (worker-started-ms w)) (* 1000 start-timeout))
              (not (worker-failure w)))
         (log-fastcgi-error "worker ~a not ready after ~a s: killing it" (worker-pid w) start-timeout)
         (set-worker-failure! w (format "not ready after ~a s (--start-timeout)" start-timeout))
         (send-signal! (worker-pid w) SIGKILL)]))
    (watch-beats! now)
    ;; a worker started after the last crash has lasted: workers start again
    (when (and (positive? failures)
               (for/or ([w (in-list (live-workers))])
                 (and (> (worker-started-ms w) last-failure-ms) (worker-ready-ms w)
                      (> (- now (worker-started-ms w)) crash-window-ms))))
      (start-failures-over!))
    ;; with a memory limit, resident memory is read at every tick (a runaway grows fast),
    ;; else once a second, for the status
    (when (or max-memory-hard (> (- now last-memory-ms) 1000))
      (set! last-memory-ms now)
      (for ([w (in-list (live-workers))])
        (set-worker-rss! w (process-rss (worker-pid w)))
        (define rss (worker-rss w))
        (cond
          [(and max-memory-hard rss (> rss max-memory-hard) (memq (worker-state w) '(ready draining)))
           (cut! w (format "memory ~a MiB over the hard ceiling of ~a MiB (~a)"
                           (quotient rss 1048576) (quotient max-memory-hard 1048576)
                           (if (cfg-ref 'max-memory-hard) "--max-memory-hard" "2 x --max-memory")))]
          [(and max-memory rss (> rss max-memory) (eq? (worker-state w) 'ready))
           (recycle! w (format "memory ~a MiB over --max-memory ~a MiB"
                               (quotient rss 1048576) (quotient max-memory 1048576)))])))
    (define active-now (for/sum ([w (in-list (live-workers))]) (if (positive? (worker-active w)) 1 0)))
    (set! max-active (max max-active active-now))
    (maintain!)
    (publish! now))

  ;; publish! : flonum -> void
  ;; The board the workers are given when they ask (control.rkt), and with --pid-file its
  ;; file for `raco fastcgi ctl`: new when it changed, or each second.
  (define (publish! now)
    (define board (make-board now))
    (when (or (not (equal? (hash-remove board 'uptime) (and last-board (hash-remove last-board 'uptime))))
              (> (- now last-board-ms) 1000))
      (when scoreboard (write-files! board))
      (set! last-board board)
      (set! last-board-ms now)))

  ;; write-files! : hash -> void
  ;; The status file, and the pid file again if it was removed (a cleanup of the folder
  ;; that holds them): `ctl` goes on working. A failure is logged once until they work.
  (define files-ok? #t)
  (define (write-files! board)
    (with-handlers ([exn:fail? (λ (e)
                                 (when files-ok?
                                   (log-fastcgi-error "cannot write the status file ~a: ~a"
                                                      (log-escape scoreboard) (log-escape (exn-message e))))
                                 (set! files-ok? #f))])
      (unless (file-exists? pid-file)
        (call-with-output-file pid-file #:exists 'truncate (λ (out) (fprintf out "~a\n" pid)))
        (log-fastcgi-warning "the pid file ~a was removed: written again" (log-escape pid-file)))
      (write-scoreboard! scoreboard board)
      (set! files-ok? #t)))

  ;; make-board : flonum -> hash
  (define (make-board now)
    (define ws (sort (live-workers) < #:key worker-id))
    (define (sum f) (for/sum ([w (in-list ws)]) (f w)))
    (hasheq 'pool (path->string (file-name-from-path* (cfg-ref 'app)))
            'pm (symbol->string (pm-plan-kind plan))
            'listen address
            'master_pid pid
            'start_time (exact-floor (/ (wall-ms-at start-ms) 1000))
            'uptime (exact-floor (/ (- now start-ms) 1000))
            'generation gen
            'accepted_connections (+ (hash-ref totals 'accepted_connections 0) (sum worker-connections))
            'requests (+ (hash-ref totals 'requests 0) (sum worker-requests))
            'listen_queue (or (listener-queue-length listener) (json-null))
            'active_workers (for/sum ([w (in-list ws)]) (if (positive? (worker-active w)) 1 0))
            'idle_workers (for/sum ([w (in-list ws)])
                            (if (and (eq? (worker-state w) 'ready) (zero? (worker-active w))) 1 0))
            'total_workers (length ws)
            'draining_workers (for/sum ([w (in-list ws)]) (if (eq? (worker-state w) 'draining) 1 0))
            'late_workers (for/sum ([w (in-list ws)]) (if (worker-late w) 1 0))
            'unresponsive_kills (hash-ref totals 'unresponsive_kills 0)
            'sessions (sum worker-sessions)
            'max_active_workers max-active
            'max_workers_reached (hash-ref totals 'max_workers_reached 0)
            'slow_requests (+ (hash-ref totals 'slow_requests 0) (sum worker-slow))
            'shed_requests (+ (hash-ref totals 'shed_requests 0) (sum worker-shed))
            'log_dropped (+ (log-lines-dropped) (hash-ref totals 'log_dropped 0) (sum worker-log-dropped))
            'restarts (hash-ref totals 'restarts 0)
            'recycled (hash-ref totals 'recycled 0)
            'reloads (hash-ref totals 'reloads 0)
            'reload_failures (hash-ref totals 'reload_failures 0)
            'reload_asks reload-asks
            'reload_settled reload-settled
            'last_reload_error (or last-reload-error (json-null))
            'start_failures failures
            'last_start_error (or last-start-error (json-null))
            'workers
            (for/list ([w (in-list ws)])
              (hasheq 'pid (worker-pid w)
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
                      'start_time (/ (round (wall-ms-at (worker-started-ms w))) 1000.)
                      'uptime (exact-floor (/ (- now (worker-started-ms w)) 1000))))))

  ;; message! : (list natural (or/c output-port eof-object string)) -> void
  ;; From a worker's control connection: its port (after hello), a line, its end.
  (define (message! m)
    (define w (hash-ref workers (first m) #f))
    (define x (second m))
    (cond
      [(output-port? x) (when w (set-worker-control! w x))]
      [(eof-object? x) (when w (set-worker-reports-done?! w #t))]
      [else
       (when w (set-worker-heard-ms! w (now-ms)))
       (handle-message! (first m) x)]))

  ;; handle-message! : natural string -> void
  (define (handle-message! pid line)
    (define w (hash-ref workers pid #f))
    (define words (string-split line))
    (when (and w (pair? words))
      (case (first words)
        [("ready") (ready! w) (publish! (now-ms))]
        [("stat")
         ;; 6 numbers or more (a newer worker may send more than this manager knows)
         (define ns (for/list ([n (in-list (map string->number (rest words)))])
                      (and (exact-nonnegative-integer? n) n)))
         (when (and (>= (length ns) 6) (andmap values (take ns 6)))
           (when (or (positive? (second ns)) (> (first ns) (worker-requests w)))
             (set-worker-last-busy-ms! w (now-ms)))
           (set-worker-requests! w (first ns))
           (set-worker-active! w (second ns))
           (set-worker-connections! w (third ns))
           (set-worker-slow! w (fourth ns))
           (set-worker-shed! w (fifth ns))
           (set-worker-queue-delay! w (sixth ns))
           (when (and (>= (length ns) 7) (seventh ns)) (set-worker-sessions! w (seventh ns)))
           (when (and (>= (length ns) 8) (eighth ns)) (set-worker-log-dropped! w (eighth ns))))]
        [("recycle") (recycle! w (string-join (rest words)))]
        ;; escaped by the worker: one line of plain ASCII
        [("failed") (set-worker-failure! w (substring line (min (string-length line) 7)))]
        [else (void)])))

  ;; control connections (control.rkt): the keys first; then a worker says "hello PID"
  ;; and reports, or a worker answering the status path asks for the board
  (thread
   (λ ()
     (let loop ()
       (define-values (in out peer)
         (with-handlers ([exn:fail? (λ (e) (values #f #f #f))]) (listener-accept control)))
       (when in
         (thread (λ ()
                   (with-handlers ([exn:fail? void]) (write-keys! out secret relay-key))
                   (read-reports in out messages (λ () last-board))))
         (loop)))))

  ;; reread-secret! : -> void ; at a reload, the new generation gets the file's secret
  (define (reread-secret!)
    (when secret-file
      (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "~a; the workers keep the secret read before"
                                                           (log-escape (exn-message e))))])
        (set! secret (read-secret* secret-file)))))

  (log-fastcgi-info "listening on ~a (manager of ~a; ~a)" address (cfg-ref 'app) (pm-describe plan))
  (for ([_ (in-range (pm-initial-count plan))]) (spawn! gen))
  (let loop ([next-tick (+ (now-ms) (* 1000 tick-seconds))])
    (define pending-evt
      (if (and (pm-wants-pending? plan) (not stopping?) (not reload-gen)
               (for/and ([w (in-list (live-workers))])
                 (not (or (eq? (worker-state w) 'starting)
                          (and (eq? (worker-state w) 'ready) (zero? (worker-active w))))))
               (< (length (serving gen)) (pm-plan-max-workers plan)))
          (wrap-evt (unsafe-fd->evt (listener-fd listener) 'read) (λ (_) '(pending)))
          never-evt))
    (define ev
      (with-handlers ([exn:break:hang-up? (λ (e) '(reload))]
                      [exn:break:terminate? (λ (e) '(stop #f))]
                      [exn:break? (λ (e) '(stop #t))])
        (sync/enable-break
         (wrap-evt messages (λ (m) (cons 'message m)))
         (wrap-evt usr1-evt (λ (_) '(usr1)))
         pending-evt
         (apply choice-evt (for/list ([w (in-list (live-workers))])
                             (wrap-evt (worker-sp w) (λ (_) (list 'exit w)))))
         (wrap-evt (alarm-at-evt next-tick) (λ (_) '(tick))))))
    (case (first ev)
      [(message) (message! (rest ev))]
      [(exit) (exited! (second ev))]
      [(usr1)
       (log-fastcgi-info "SIGUSR1: workers reopen their log files")
       (for ([w (in-list (live-workers))]) (send-signal! (worker-pid w) SIGHUP))]
      [(reload) (reread-secret!) (reload!)]
      [(stop) (stop! (second ev))]
      [(pending)
       (log-fastcgi-debug "a connection waits and no worker is idle: starting one")
       (unless (< (now-ms) next-spawn-ms) (spawn! gen))]
      [(tick) (tick!)])
    ;; a changed pool is published at once (the status shows a replaced worker at once)
    (when (memq (first ev) '(exit reload stop pending)) (publish! (now-ms)))
    (cond
      [(and stopping? (zero? (hash-count workers)))
       (log-fastcgi-info "stopped")
       (clean-up!)
       (exit 0)]
      [(eq? (first ev) 'tick) (loop (+ (now-ms) (* 1000 tick-seconds)))]
      [else (loop next-tick)])))

;; read-reports : input-port output-port channel (-> (or/c hash #f)) -> void
;; After hello, the main loop gets (list pid out), the port to ask the worker to retire,
;; then (list pid line) for each line, then (list pid eof) when the connection ends.
;; Asked for the board instead, it answers and the connection ends.
(define (read-reports in out messages board)
  (define pid
    (with-handlers ([exn:fail? (λ (e) #f)])
      (define hello (read-line in))
      (when (equal? hello "board") (answer-board! out (board)))
      (define m (and (string? hello) (regexp-match #rx"^hello ([0-9]+)$" hello)))
      (and m (string->number (cadr m)))))
  (when pid
    (channel-put messages (list pid out))
    (with-handlers ([exn:fail? void])
      (let loop ()
        (define line (read-line in))
        (when (string? line)
          (channel-put messages (list pid line))
          (loop))))
    (channel-put messages (list pid eof)))
  (close-input-port in)
  (unless pid (with-handlers ([exn:fail? void]) (close-output-port out))))

;; read-secret* : path-string -> bytes ; read-secret, any failure as a user error
(define (read-secret* file)
  (with-handlers ([exn:fail:filesystem?
                   (λ (e) (raise-user-error 'raco-fastcgi "--secret-file ~a: cannot read it: ~a"
                                            file (filesystem-reason e)))])
    (read-secret file)))

;; passable : port -> (or/c port #f) ; subprocess takes file-stream ports only
(define (passable p) (and (file-stream-port? p) p))

;; describe-status : any -> string
(define (describe-status st)
  (cond
    [(not (exact-integer? st)) (format "~a" st)]
    [(> st 128) (format "killed by ~a" (signal-name (- st 128)))]
    [else (format "exit status ~a" st)]))

;; process-rss : natural -> (or/c natural #f) ; resident memory in bytes, from /proc
(define (process-rss pid)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define m (regexp-match #rx"VmRSS:[ \t]*([0-9]+) kB" (file->string (format "/proc/~a/status" pid))))
    (and m (* 1024 (string->number (cadr m))))))

;; file->string* : path -> (or/c string #f)
(define (file->string* p) (with-handlers ([exn:fail? (λ (e) #f)]) (file->string p)))
;; delete-file* : path -> void
(define (delete-file* p) (with-handlers ([exn:fail? void]) (delete-file p)))
;; exact-floor : real -> integer
(define (exact-floor x) (inexact->exact (floor x)))
;; file-name-from-path* : path-string -> path
(define (file-name-from-path* p) (let-values ([(base name dir?) (split-path p)]) name))
