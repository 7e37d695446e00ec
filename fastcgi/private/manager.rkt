#lang racket/base
;; The manager (master) process of `raco fastcgi serve`: it owns the listening socket and
;; hands it to every worker process as fd 0 (the FastCGI convention; the kernel balances
;; accept among them), keeps the pool at the size the process manager asks for, replaces
;; workers that die (backing off when they crash in a loop), recycles them (max-requests,
;; max-memory), reloads a new generation on SIGHUP, reopens logs on SIGUSR1, stops
;; gracefully on SIGTERM/SIGINT, and publishes the pool's status (the scoreboard file that
;; workers answer the status path from). It never parses FastCGI and never loads the
;; application: a bad app cannot take it down.
;;
;; Everything happens in one loop (the main thread): worker reports, worker exits, signals
;; and a 0.25 s tick arrive as events, so the pool state needs no locks.
(require ffi/unsafe/port
         file/sha1
         json
         racket/file
         racket/list
         racket/os
         racket/random
         racket/runtime-path
         racket/string
         compiler/find-exe
         "log.rkt"
         "logging.rkt"
         "pm.rkt"
         "pool-status.rkt"
         "server.rkt"
         "signals.rkt"
         "transport.rkt")
(provide run-manager)

(define-runtime-path worker-module "worker-main.rkt")

(define tick-seconds 0.25)
(define crash-window-ms 10000.)   ; a worker that dies younger than this counts as a crash

;; One worker process. state: 'starting 'ready 'draining. retiring?: it was asked to
;; retire (serve its servlet sessions, then stop) rather than to stop. control: the output
;; port of its control connection, once it said hello.
(struct worker (id sp pid gen started-ms
                [state #:mutable] [ready-ms #:mutable]
                [requests #:mutable] [active #:mutable] [connections #:mutable] [slow #:mutable]
                [shed #:mutable] [queue-delay #:mutable] [sessions #:mutable]
                [rss #:mutable] [drain-deadline #:mutable] [recycle #:mutable]
                [last-busy-ms #:mutable] [retiring? #:mutable] [control #:mutable])
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
  (define listener
    (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
      (resolve-listener (cfg-ref 'listen) #:backlog (cfg-ref 'backlog 1024)
                        #:socket-mode (cfg-ref 'socket-mode #o660)
                        #:socket-owner (cfg-ref 'socket-owner) #:socket-group (cfg-ref 'socket-group))))
  (define address (listener-address listener))
  (define listen-port (unsafe-file-descriptor->port (listener-fd listener) 'listener '(read)))
  (define run-dir (make-temporary-directory "fastcgi-~a"))
  (file-or-directory-permissions run-dir #o700)
  (define control (open-listener (parse-listen-address (string-append "unix:" (path->string (build-path run-dir "control.sock"))))
                                 #:socket-mode #o600))
  (define pid-file (cfg-ref 'pid-file))
  (define scoreboard (if pid-file
                         (string-append pid-file ".status.json")
                         (path->string (build-path run-dir "status.json"))))
  (when pid-file
    (call-with-output-file pid-file #:exists 'truncate (λ (out) (fprintf out "~a\n" pid))))
  (define plan (make-pm-plan cfg))
  (define graceful (cfg-ref 'graceful-timeout 30))
  (define start-timeout (cfg-ref 'start-timeout 60))
  (define max-memory (cfg-ref 'max-memory))
  (define racket-exe (find-exe))
  (define session-drain (cfg-ref 'session-drain 600))
  ;; stateless servlets' URLs must verify in every worker, and after a reload: without
  ;; --secret-file, one secret for the manager's life, in its private folder
  (define secret-file
    (or (cfg-ref 'secret-file)
        (let ([f (build-path run-dir "secret")])
          (call-with-output-file f #:exists 'truncate
            (λ (out) (write-string (bytes->hex-string (crypto-random-bytes 32)) out)))
          (file-or-directory-permissions f #o600)
          (path->string f))))
  (define worker-cfg
    (hash-set* (for/hash ([k (in-list '(app log-level limits allowed-clients access-log slow-log slow-threshold
                                        status-path ping-path max-requests graceful-timeout
                                        servlet-memory continuation-timeout session-drain))]
                          #:when (hash-has-key? cfg k))
                 (values k (hash-ref cfg k)))
               'secret-file secret-file
               'secret-lasting? (and (cfg-ref 'secret-file) #t)
               'peer-dir (path->string run-dir)))

  ;; ---- pool state (touched by the main loop only)
  (define workers (make-hasheqv))            ; pid -> worker
  (define gen 1)
  (define reload-gen #f)                     ; the generation being started by a reload
  (define next-id 0)
  (define failures 0)                        ; crashes in a row
  (define next-spawn-ms 0.)                  ; backoff: no spawn before this
  (define stopping? #f)
  (define stop-deadline #f)
  (define totals (make-hasheq))              ; counters of workers that are gone, and events
  (define max-active 0)
  (define start-ms (current-inexact-milliseconds))
  (define messages (make-channel))
  (define last-board #f)
  (define last-board-ms 0.)
  (define last-memory-ms 0.)
  (define (total-add! k n) (hash-set! totals k (+ n (hash-ref totals k 0))))

  ;; spawn! : natural -> worker
  (define (spawn! g)
    (set! next-id (add1 next-id))
    (define wcfg (hash-set* worker-cfg 'control (path->string (build-path run-dir "control.sock"))
                            'master-pid pid 'scoreboard scoreboard 'worker-id next-id))
    (define-values (sp out in err)
      (subprocess (passable (current-output-port)) listen-port (passable (current-error-port))
                  racket-exe "-N" "fastcgi-worker" "-t" (path->string worker-module)
                  "--" (format "~s" wcfg)))
    (define now (current-inexact-milliseconds))
    (define w (worker next-id sp (subprocess-pid sp) g now 'starting #f 0 0 0 0 0 0 0 #f #f #f now #f #f))
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
      (set-worker-drain-deadline! w (+ (current-inexact-milliseconds) (* 1000 (+ graceful 2))))
      (send-signal! (worker-pid w) SIGTERM)))

  ;; retire! : worker string -> void
  ;; A worker that is replaced: it stops taking connections, finishes what it holds and
  ;; serves its servlet sessions (continuation URLs other workers pass on to it) until
  ;; they end or session-drain seconds pass. Without a control connection, drain!.
  (define (retire! w why)
    (cond
      [(eq? (worker-state w) 'draining) (void)]
      [(and (worker-control w)
            (with-handlers ([exn:fail? (λ (e) #f)])
              (write-string "retire\n" (worker-control w))
              (flush-output (worker-control w))
              #t))
       (log-fastcgi-info "retiring worker ~a (~a)" (worker-pid w) why)
       (set-worker-state! w 'draining)
       (set-worker-retiring?! w #t)
       (set-worker-drain-deadline! w (+ (current-inexact-milliseconds)
                                        (* 1000 (+ session-drain (* 2 graceful) 5))))]
      [else (drain! w why)]))

  (define (live-workers) (hash-values workers))
  (define (serving g)                        ; starting or ready, in generation g
    (filter (λ (w) (and (= (worker-gen w) g) (not (eq? (worker-state w) 'draining))))
            (live-workers)))

  ;; maintain! : -> void ; ask the process manager what to start and stop, and do it
  (define (maintain!)
    (unless stopping?
      (define now (current-inexact-milliseconds))
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
    (set-worker-ready-ms! w (current-inexact-milliseconds))
    (log-fastcgi-info "worker ~a ready (generation ~a)" (worker-pid w) (worker-gen w))
    (cond
      [(and reload-gen (= (worker-gen w) reload-gen))
       (when (andmap (λ (x) (eq? (worker-state x) 'ready)) (serving reload-gen))
         (for ([old (in-list (live-workers))] #:when (< (worker-gen old) reload-gen))
           (retire! old "reload: replaced by the new generation"))
         (set! gen reload-gen)
         (set! reload-gen #f)
         (total-add! 'reloads 1)
         (log-fastcgi-info "reload done: generation ~a serves" gen))]
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
    (hash-remove! workers (worker-pid w))
    (total-add! 'requests (worker-requests w))
    (total-add! 'accepted_connections (worker-connections w))
    (total-add! 'slow_requests (worker-slow w))
    (total-add! 'shed_requests (worker-shed w))
    (define status (subprocess-status (worker-sp w)))
    (define now (current-inexact-milliseconds))
    (cond
      [(eq? (worker-state w) 'draining)
       (log-fastcgi-info "worker ~a exited (~a)" (worker-pid w) (describe-status status))]
      [else
       (log-fastcgi-warning "worker ~a exited unexpectedly (~a) after ~a s"
                            (worker-pid w) (describe-status status)
                            (/ (round (/ (- now (worker-started-ms w)) 100)) 10.0))
       (total-add! 'restarts 1)
       (cond
         [(or (not (worker-ready-ms w)) (< (- now (worker-started-ms w)) crash-window-ms))
          (set! failures (add1 failures))
          (when (> failures 1)
            (define delay (min 30. (* 0.1 (expt 2 (- failures 2)))))
            (set! next-spawn-ms (+ now (* 1000 delay)))
            (log-fastcgi-error "workers crash at start or soon after (~a in a row): next start in ~a s"
                               failures delay))]
         [else (set! failures 0)])
       (when (and reload-gen (= (worker-gen w) reload-gen))
         (log-fastcgi-error "reload failed: a worker of the new generation died before it was ready; generation ~a goes on serving" gen)
         (total-add! 'reload_failures 1)
         (for ([x (in-list (serving reload-gen))]) (drain! x "reload failed"))
         (set! reload-gen #f))])
    (maintain!))

  ;; reload! : -> void
  (define (reload!)
    (cond
      [stopping? (void)]
      [reload-gen (log-fastcgi-warning "reload asked while one is under way: ignored")]
      [else
       (define n (pm-reload-count plan (length (serving gen))))
       (log-fastcgi-info "reload: starting generation ~a (~a workers)" (add1 gen) n)
       (cond
         [(zero? n) (set! gen (add1 gen)) (total-add! 'reloads 1)]
         [else
          (set! reload-gen (add1 gen))
          (set! failures 0)
          (set! next-spawn-ms 0.)
          (for ([_ (in-range n)]) (spawn! reload-gen))])]))

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

  ;; tick! : -> void
  (define (tick!)
    (define now (current-inexact-milliseconds))
    (for ([w (in-list (live-workers))])
      (cond
        [(and (eq? (worker-state w) 'draining) (> now (worker-drain-deadline w)))
         (log-fastcgi-warning "worker ~a did not stop within ~a s: killing it" (worker-pid w) graceful)
         (send-signal! (worker-pid w) SIGKILL)
         (set-worker-drain-deadline! w (+ now 5000))]
        [(and (eq? (worker-state w) 'starting) (> (- now (worker-started-ms w)) (* 1000 start-timeout)))
         (log-fastcgi-error "worker ~a not ready after ~a s: killing it" (worker-pid w) start-timeout)
         (send-signal! (worker-pid w) SIGKILL)]))
    (when (> (- now last-memory-ms) 1000)
      (set! last-memory-ms now)
      (for ([w (in-list (live-workers))])
        (set-worker-rss! w (process-rss (worker-pid w)))
        (when (and max-memory (worker-rss w) (> (worker-rss w) max-memory) (eq? (worker-state w) 'ready))
          (recycle! w (format "memory ~a MiB over --max-memory ~a MiB"
                              (quotient (worker-rss w) 1048576) (quotient max-memory 1048576))))))
    (define active-now (for/sum ([w (in-list (live-workers))]) (if (positive? (worker-active w)) 1 0)))
    (set! max-active (max max-active active-now))
    (maintain!)
    (publish! now))

  ;; publish! : flonum -> void ; rewrite the scoreboard when it changed (or each second)
  (define (publish! now)
    (define board (make-board now))
    (when (or (not (equal? (hash-remove board 'uptime) (and last-board (hash-remove last-board 'uptime))))
              (> (- now last-board-ms) 1000))
      (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "cannot write the status file ~a: ~a"
                                                           (log-escape scoreboard) (log-escape (exn-message e))))])
        (write-scoreboard! scoreboard board))
      (set! last-board board)
      (set! last-board-ms now)))

  ;; make-board : flonum -> hash
  (define (make-board now)
    (define ws (sort (live-workers) < #:key worker-id))
    (define (sum f) (for/sum ([w (in-list ws)]) (f w)))
    (hasheq 'pool (path->string (file-name-from-path* (cfg-ref 'app)))
            'pm (symbol->string (pm-plan-kind plan))
            'listen address
            'master_pid pid
            'start_time (exact-floor (/ start-ms 1000))
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
            'sessions (sum worker-sessions)
            'max_active_workers max-active
            'max_workers_reached (hash-ref totals 'max_workers_reached 0)
            'slow_requests (+ (hash-ref totals 'slow_requests 0) (sum worker-slow))
            'shed_requests (+ (hash-ref totals 'shed_requests 0) (sum worker-shed))
            'restarts (hash-ref totals 'restarts 0)
            'recycled (hash-ref totals 'recycled 0)
            'reloads (hash-ref totals 'reloads 0)
            'reload_failures (hash-ref totals 'reload_failures 0)
            'workers
            (for/list ([w (in-list ws)])
              (hasheq 'pid (worker-pid w)
                      'state (symbol->string
                              (case (worker-state w)
                                [(ready) (if (positive? (worker-active w)) 'busy 'idle)]
                                [else (worker-state w)]))
                      'generation (worker-gen w)
                      'requests (worker-requests w)
                      'active (worker-active w)
                      'connections (worker-connections w)
                      'sessions (worker-sessions w)
                      'shed (worker-shed w)
                      'queue_delay (worker-queue-delay w)
                      'memory (or (worker-rss w) (json-null))
                      'start_time (/ (round (worker-started-ms w)) 1000.)
                      'uptime (exact-floor (/ (- now (worker-started-ms w)) 1000))))))

  ;; handle-message! : (list natural string) -> void
  (define (handle-message! pid line)
    (define w (hash-ref workers pid #f))
    (define words (string-split line))
    (when (and w (pair? words))
      (case (first words)
        [("ready") (ready! w) (publish! (current-inexact-milliseconds))]
        [("stat")
         (define ns (map string->number (rest words)))
         (when (and (<= 6 (length ns) 7) (andmap exact-nonnegative-integer? ns))
           (when (or (positive? (second ns)) (> (first ns) (worker-requests w)))
             (set-worker-last-busy-ms! w (current-inexact-milliseconds)))
           (set-worker-requests! w (first ns))
           (set-worker-active! w (second ns))
           (set-worker-connections! w (third ns))
           (set-worker-slow! w (fourth ns))
           (set-worker-shed! w (fifth ns))
           (set-worker-queue-delay! w (sixth ns))
           (when (= 7 (length ns)) (set-worker-sessions! w (seventh ns))))]
        [("recycle") (recycle! w (string-join (rest words)))]
        [else (void)])))

  ;; control connections: each worker says "hello PID" first, then its reports
  (thread
   (λ ()
     (let loop ()
       (define-values (in out peer)
         (with-handlers ([exn:fail? (λ (e) (values #f #f #f))]) (listener-accept control)))
       (when in
         (thread (λ () (read-reports in out messages)))
         (loop)))))

  (log-fastcgi-info "listening on ~a (manager of ~a; ~a)" address (cfg-ref 'app) (pm-describe plan))
  (for ([_ (in-range (pm-initial-count plan))]) (spawn! gen))
  (let loop ([next-tick (+ (current-inexact-milliseconds) (* 1000 tick-seconds))])
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
         (wrap-evt (alarm-evt next-tick) (λ (_) '(tick))))))
    (case (first ev)
      [(message)
       (define w (hash-ref workers (second ev) #f))
       (if (output-port? (third ev))
           (when w (set-worker-control! w (third ev)))
           (handle-message! (second ev) (third ev)))]
      [(exit) (exited! (second ev))]
      [(usr1)
       (log-fastcgi-info "SIGUSR1: workers reopen their log files")
       (for ([w (in-list (live-workers))]) (send-signal! (worker-pid w) SIGHUP))]
      [(reload) (reload!)]
      [(stop) (stop! (second ev))]
      [(pending)
       (log-fastcgi-debug "a connection waits and no worker is idle: starting one")
       (unless (< (current-inexact-milliseconds) next-spawn-ms) (spawn! gen))]
      [(tick) (tick!)])
    ;; a changed pool is published at once (the status shows a replaced worker at once)
    (when (memq (first ev) '(exit reload stop pending)) (publish! (current-inexact-milliseconds)))
    (cond
      [(and stopping? (zero? (hash-count workers)))
       (log-fastcgi-info "stopped")
       (when (and pid-file (equal? (file->string* pid-file) (format "~a\n" pid)))
         (delete-file* pid-file))
       (delete-file* scoreboard)
       (listener-close! control)
       (with-handlers ([exn:fail? void]) (delete-directory/files run-dir))
       (flush-logging)
       (exit 0)]
      [(eq? (first ev) 'tick) (loop (+ (current-inexact-milliseconds) (* 1000 tick-seconds)))]
      [else (loop next-tick)])))

;; read-reports : input-port output-port channel -> void
;; After hello, the main loop gets (list pid out), the port to ask the worker to retire.
(define (read-reports in out messages)
  (with-handlers ([exn:fail? void])
    (define hello (read-line in))
    (define m (and (string? hello) (regexp-match #rx"^hello ([0-9]+)$" hello)))
    (when m
      (define pid (string->number (cadr m)))
      (channel-put messages (list pid out))
      (let loop ()
        (define line (read-line in))
        (when (string? line)
          (channel-put messages (list pid line))
          (loop)))))
  (close-input-port in))

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
