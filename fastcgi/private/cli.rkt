#lang racket/base
;; `raco fastcgi`: one handle-<command> per subcommand.
(require racket/cmdline
         racket/future
         racket/list
         racket/runtime-path
         "check.rkt"
         "ctl.rkt"
         "manager.rkt"
         "request-cli.rkt"
         "worker.rkt")
(provide main app-last)

(define commands
  '(("serve" "run an application as a FastCGI server")
    ("dev" "run an application behind a local HTTP front (no nginx needed)")
    ("request" "send a FastCGI request to any FastCGI server, like cgi-fcgi")
    ("ctl" "status, reload or stop a running manager (by its pid file)")))

;; usage : output-port -> void
(define (usage out)
  (fprintf out "usage: raco fastcgi <command> [option ...] [arg ...]\n\ncommands:\n")
  (for ([c (in-list commands)]) (fprintf out "  ~a~a~a\n" (first c) (make-string (- 10 (string-length (first c))) #\space) (second c)))
  (fprintf out "\n`raco fastcgi <command> --help` describes a command's options.\n"))

;; main : (vectorof string) -> void
(define (main argv)
  (cond
    [(zero? (vector-length argv)) (usage (current-error-port)) (exit 2)]
    [else
     (define cmd (vector-ref argv 0))
     (define rest (vector-copy-rest argv))
     (case cmd
       [("serve") (handle-serve (app-last rest))]
       [("dev") ((dynamic-require dev-module 'handle-dev) (app-last rest))]
       [("request") (request-command (positionals-last rest))]
       [("ctl") (ctl-command (app-last rest))]
       [("help" "--help" "-h") (usage (current-output-port))]
       [else (eprintf "raco fastcgi: unknown command ~s\n" cmd) (usage (current-error-port)) (exit 2)])]))

;; the dev front pulls in web-server's HTTP server: loaded only when its command runs
(define-runtime-path dev-module "dev.rkt")

;; app-last : (vectorof string) -> (vectorof string)
;; `serve APP.rkt --listen X` reads as `serve --listen X APP.rkt`: racket/cmdline wants the
;; flags first, people write the app first.
(define (app-last argv)
  (if (and (> (vector-length argv) 1) (not (regexp-match? #rx"^-" (vector-ref argv 0))))
      (for/vector ([i (in-range (vector-length argv))])
        (vector-ref argv (modulo (add1 i) (vector-length argv))))
      argv))

;; positionals-last : (vectorof string) -> (vectorof string)
;; `request ADDR URI --repeat 5` reads as `request --repeat 5 ADDR URI`: the arguments
;; before the first flag move to the end.
(define (positionals-last argv)
  (define args (vector->list argv))
  (define-values (lead rest) (splitf-at args (λ (a) (not (regexp-match? #rx"^-" a)))))
  (if (or (null? lead) (null? rest)) argv (list->vector (append rest lead))))

;; vector-copy-rest : vector -> vector
(define (vector-copy-rest v) (for/vector ([x (in-vector v 1)]) x))

;; ---------------------------------------------------------------------------------------
;; serve

;; size-arg : string string -> natural ; 64m, 512k, 1g, or bytes
(define (size-arg flag s)
  (define m (regexp-match #rx"^([0-9]+)([kKmMgG]?)$" s))
  (unless m (raise-user-error 'raco-fastcgi "~a: expected a size like 1048576, 512k, 64m or 1g, got ~s" flag s))
  (* (string->number (cadr m))
     (case (string-downcase (caddr m)) [("k") 1024] [("m") 1048576] [("g") 1073741824] [else 1])))

;; positive-size-arg : string string -> positive integer ; as size-arg, 0 refused
(define (positive-size-arg flag s)
  (define n (size-arg flag s))
  (unless (positive? n) (raise-user-error 'raco-fastcgi "~a: expected a size above 0, got ~s" flag s))
  n)

;; seconds-arg : string string -> positive real
(define (seconds-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (positive? n))
    (raise-user-error 'raco-fastcgi "~a: expected a positive number of seconds, got ~s" flag s))
  n)

;; nonnegative-seconds-arg : string string -> nonnegative real
(define (nonnegative-seconds-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (>= n 0))
    (raise-user-error 'raco-fastcgi "~a: expected a number of seconds (0 or more), got ~s" flag s))
  n)

;; count-arg : string string -> positive integer
(define (count-arg flag s)
  (define n (string->number s))
  (unless (exact-positive-integer? n)
    (raise-user-error 'raco-fastcgi "~a: expected a positive integer, got ~s" flag s))
  n)

;; name-or-id : string -> (or/c string natural) ; "33" is a uid/gid, "www-data" a name
(define (name-or-id s)
  (if (regexp-match? #rx"^[0-9]+$" s) (string->number s) s))

;; handle-serve : (vectorof string) -> void
;; Parses the options into one configuration hash; the manager (default) or the single
;; process server (--single-process) runs it.
(define (handle-serve argv)
  (define cfg (make-hasheq))
  (define (set k v) (hash-set! cfg k v))
  (define limit-args (make-hasheq))
  (define (limit! kw v) (hash-set! limit-args kw v))
  (set 'allowed-clients (getenv "FCGI_WEB_SERVER_ADDRS"))
  (define single? #f)
  (define check? #f)
  (define app
    (command-line
     #:program "raco fastcgi serve"
     #:argv argv
     #:help-labels "" "Listening socket:"
     #:once-each
     [("--listen" "-l") addr
      ("Address to listen on: unix:/path, HOST:PORT, [::1]:PORT or fd:0."
       "Default: fd 0 when it is a listening socket (spawned by the web server),"
       "else systemd socket activation (LISTEN_FDS), else an error.")
      (set 'listen addr)]
     [("--socket-mode") octal "Mode of a unix socket file (default 0660)"
      (set 'socket-mode (or (string->number octal 8)
                            (raise-user-error 'raco-fastcgi "--socket-mode: expected an octal mode like 0660, got ~s" octal)))]
     [("--socket-owner") user "Owner (name or uid) of a unix socket file" (set 'socket-owner (name-or-id user))]
     [("--socket-group") grp "Group (name or gid) of a unix socket file" (set 'socket-group (name-or-id grp))]
     [("--backlog") n "Listen backlog (default 1024)" (set 'backlog (count-arg "--backlog" n))]
     [("--allowed-clients") list
      ("Comma-separated IPv4/IPv6 addresses or CIDR blocks allowed to connect over TCP"
       "(default: $FCGI_WEB_SERVER_ADDRS, else everyone). A list that parses to nothing denies everyone.")
      (set 'allowed-clients list)]
     #:help-labels "" "Worker processes (the manager):"
     #:once-each
     [("--workers" "-w") n
      ("Worker processes for --pm static; for dynamic and ondemand, the default of"
       "--max-spare and half the default of --max-workers (default: the core count)")
      (set 'workers (count-arg "--workers" n))]
     [("--pm") kind "static (default), dynamic or ondemand"
      (set 'pm (string->symbol kind))
      (unless (memq (hash-ref cfg 'pm) '(static dynamic ondemand))
        (raise-user-error 'raco-fastcgi "--pm: expected static, dynamic or ondemand, got ~s" kind))]
     [("--min-spare") n "dynamic: fewest idle workers (default 1)" (set 'min-spare (count-arg "--min-spare" n))]
     [("--max-spare") n "dynamic: most idle workers (default --workers)" (set 'max-spare (count-arg "--max-spare" n))]
     [("--max-workers") n "dynamic, ondemand: most workers (default 2 x --workers)" (set 'max-workers (count-arg "--max-workers" n))]
     [("--idle-timeout") secs "ondemand: seconds before an idle worker stops (default 10)"
      (set 'idle-timeout (seconds-arg "--idle-timeout" secs))]
     [("--max-requests") n "Replace a worker after it took N requests (default: never)"
      (set 'max-requests (count-arg "--max-requests" n))]
     [("--max-memory") size "Replace a worker whose resident memory passes SIZE, e.g. 512m (default: never)"
      (set 'max-memory (size-arg "--max-memory" size))]
     [("--max-memory-hard") size
      ("Stop a worker whose resident memory passes SIZE at once, without waiting for its"
       "requests: SIGTERM, then SIGKILL 1 s later (default: 2 x --max-memory)")
      (set 'max-memory-hard (size-arg "--max-memory-hard" size))]
     [("--graceful-timeout") secs "Seconds to finish in-flight requests on stop and reload (default 30)"
      (set 'graceful-timeout (seconds-arg "--graceful-timeout" secs))]
     [("--start-timeout") secs "Seconds a new worker may take to load the app (default 60)"
      (set 'start-timeout (seconds-arg "--start-timeout" secs))]
     [("--pid-file") file "Write the manager's pid here (and the status to FILE.status.json)"
      (set 'pid-file (path->string (path->complete-path file)))]
     [("--single-process") "No manager: serve in this one process (the pm options do not apply)"
      (set! single? #t)]
     [("--check") "Load the app and check the options and paths, then exit (status 0: all is well); serve nothing"
      (set! check? #t)]
     #:help-labels "" "Status and logs:"
     #:once-each
     [("--status-path") path "Answer the pool's status at this path, e.g. /status (?json ?openmetrics ?html)"
      (set 'status-path (url-path-arg "--status-path" path))]
     [("--ping-path") path "Answer \"pong\" at this path, e.g. /ping" (set 'ping-path (url-path-arg "--ping-path" path))]
     [("--access-log") file "One line per request to FILE, or - for stdout (default: none)"
      (set 'access-log (if (equal? file "-") file (path->string (path->complete-path file))))]
     [("--slow-log") file "Requests running past --slow-threshold, with their stack, to FILE"
      (set 'slow-log (if (equal? file "-") file (path->string (path->complete-path file))))]
     [("--slow-threshold") secs "Seconds after which a request is slow (default 5)"
      (set 'slow-threshold (seconds-arg "--slow-threshold" secs))]
     [("--log-level") level "Log level on stderr: error, warning, info (default), debug"
      (set 'log-level (string->symbol level))
      (unless (memq (hash-ref cfg 'log-level) '(fatal error warning info debug))
        (raise-user-error 'raco-fastcgi "--log-level: expected error, warning, info or debug, got ~s" level))]
     #:help-labels "" "Servlets with continuations (send/suspend, stateless servlets):"
     #:once-each
     [("--continuation-timeout") secs
      ("Seconds a continuation lives after its last use, in the default manager"
       "(default 14400: 4 hours, as serve/servlet)")
      (set 'continuation-timeout (seconds-arg "--continuation-timeout" secs))]
     [("--servlet-memory") size
      ("Memory a worker's sessions may add to what it held once the app loaded: past it,"
       "the default manager ends the least recently used sessions (default 128m)")
      (set 'servlet-memory (size-arg "--servlet-memory" size))]
     [("--session-drain") secs
      ("Seconds a worker replaced by a reload or recycling keeps serving its live"
       "sessions, while new ones go to the new workers (default 600; 0: none)")
      (set 'session-drain (nonnegative-seconds-arg "--session-drain" secs))]
     [("--secret-file") file
      ("Sign stateless servlets' URLs with the secret in FILE (at least 16 bytes), the same"
       "on every host (default: a secret made at start, valid until the manager stops)")
      (let ([f (path->complete-path file)])
        (unless (file-exists? f) (raise-user-error 'raco-fastcgi "--secret-file: no such file: ~a" file))
        (set 'secret-file (path->string f)))]
     #:help-labels "" "Limits (per worker):"
     #:once-each
     [("--max-body") size "Largest request body (default 64m): 413 past it"
      (limit! 'max-body (size-arg "--max-body" size))]
     [("--max-params-bytes") size "Largest total of params (default 128k): 431 past it"
      (limit! 'max-params-bytes (size-arg "--max-params-bytes" size))]
     [("--max-params-pairs") n "Most params per request (default 1000): 431 past it"
      (limit! 'max-params-pairs (count-arg "--max-params-pairs" n))]
     [("--max-concurrent") n "Most handlers running at once (default 1000): 503 past it"
      (limit! 'max-concurrent (count-arg "--max-concurrent" n))]
     [("--max-queue-delay") secs "Shed load: past SECS of CPU work ahead of it, a new request gets 503 (default: off)"
      (limit! 'max-queue-delay (if (equal? secs "off") #f (seconds-arg "--max-queue-delay" secs)))]
     [("--max-connections") n "Most open connections (default 1024)"
      (limit! 'max-connections (count-arg "--max-connections" n))]
     [("--max-requests-per-connection") n "Most live requests on one connection (default 100): OVERLOADED past it"
      (limit! 'max-requests-per-connection (count-arg "--max-requests-per-connection" n))]
     [("--stdin-buffer") size "Body bytes queued for one handler that has not read them (default 256k)"
      (limit! 'stdin-buffer (size-arg "--stdin-buffer" size))]
     [("--connection-buffer") size "Input the live requests of one multiplexed connection hold together (default 1m)"
      (limit! 'connection-buffer (size-arg "--connection-buffer" size))]
     [("--first-byte-timeout") secs "Seconds from accept to the first whole record (default 10)"
      (limit! 'first-byte-timeout (seconds-arg "--first-byte-timeout" secs))]
     [("--keepalive-timeout") secs "Seconds a kept connection may idle between requests (default 120)"
      (limit! 'idle-timeout (seconds-arg "--keepalive-timeout" secs))]
     [("--read-timeout") secs "Seconds without progress while a request's input is incomplete (default 30)"
      (limit! 'read-timeout (seconds-arg "--read-timeout" secs))]
     [("--write-timeout") secs "Seconds one write may block on a peer that does not read (default 30)"
      (limit! 'write-timeout (seconds-arg "--write-timeout" secs))]
     [("--request-timeout") secs "Seconds a handler may run before it is stopped and the front gets 503 (default: no limit)"
      (limit! 'request-timeout (seconds-arg "--request-timeout" secs))]
     [("--request-memory") size
      ("Memory one request's handler may hold: past it, the handler is ended and the front"
       "gets 500 (default: no limit)")
      (limit! 'request-memory (positive-size-arg "--request-memory" size))]
     #:args (app-file) app-file))
  (define app-path (path->complete-path app))
  (unless (file-exists? app-path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" app))
  (set 'app (path->string app-path))
  (set 'limits (for/list ([(k v) (in-hash limit-args)]) (cons (symbol->string k) v)))
  ;; checked here, so that a bad value is one error line, not a failing worker
  (apply make-limits* (hash-ref cfg 'limits))
  (when (and (hash-ref cfg 'slow-log #f) (not (hash-ref cfg 'slow-threshold #f)))
    (set 'slow-threshold 5))
  (unless single?
    (unless (hash-ref cfg 'workers #f) (set 'workers (processor-count)))
    (check-pool! cfg))
  (cond
    [check? (check-serve (hash-copy->immutable cfg))]
    [single? (run-single (hash-copy->immutable cfg))]
    [else (run-manager (hash-copy->immutable cfg))]))

;; check-pool! : hash -> void ; the pool sizes must make sense together
(define (check-pool! cfg)
  (define workers (hash-ref cfg 'workers))
  (define min-spare (hash-ref cfg 'min-spare 1))
  (define max-spare (hash-ref cfg 'max-spare (max min-spare workers)))
  (define max-workers (hash-ref cfg 'max-workers (if (eq? (hash-ref cfg 'pm 'static) 'static) workers (* 2 workers))))
  (unless (<= min-spare max-spare)
    (raise-user-error 'raco-fastcgi "--min-spare (~a) must not exceed --max-spare (~a)" min-spare max-spare))
  (let ([soft (hash-ref cfg 'max-memory #f)] [hard (hash-ref cfg 'max-memory-hard #f)])
    (when (and soft hard (< hard soft))
      (raise-user-error 'raco-fastcgi "--max-memory-hard (~a) must not be below --max-memory (~a)" hard soft)))
  (when (eq? (hash-ref cfg 'pm 'static) 'dynamic)
    (unless (<= min-spare max-workers)
      (raise-user-error 'raco-fastcgi "--min-spare (~a) must not exceed --max-workers (~a)" min-spare max-workers)))
  (hash-set! cfg 'max-spare max-spare)
  (hash-set! cfg 'max-workers max-workers))

;; hash-copy->immutable : mutable-hash -> immutable-hash
(define (hash-copy->immutable h) (for/hasheq ([(k v) (in-hash h)]) (values k v)))

;; url-path-arg : string string -> string
(define (url-path-arg flag s)
  (unless (regexp-match? #rx"^/[^?# ]*$" s)
    (raise-user-error 'raco-fastcgi "~a: expected a path starting with /, got ~s" flag s))
  s)
