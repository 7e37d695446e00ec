#lang racket/base
;; `raco fastcgi serve`'s command line: its options, each value checked as it is parsed (a
;; bad one is one error line, never a failing worker), gathered into one serve-config
;; (config.rkt, which states every default; the --help texts that name a default take it
;; from there or from limits.rkt), then run by the manager, the single process or --check.
(require racket/cmdline
         "cli-args.rkt"
         "../util/relative-path.rkt"
         "../worker/config.rkt"
         "../util/limits.rkt"
         "../manager/manager.rkt")
(provide handle-serve
         parse-serve-argv
         check-pool!)

;; handle-serve : (vectorof string) -> none
(define (handle-serve argv)
  (define-values (cfg modes) (parse-serve-argv argv))
  (define single? (hash-ref modes 'single? #f))
  (unless single? (check-pool! cfg))
  (cond
    [(hash-ref modes 'check? #f) ((dynamic-require check-module 'check-serve) cfg)]
    [single? ((dynamic-require single-module 'run-single) cfg)]
    [else (run-manager cfg)]))

;; parse-serve-argv : (vectorof string) -> (values serve-config (hash/c symbol #t))
;; The configuration the command line gives, and its modes ('single? 'check?).
(define (parse-serve-argv argv)
  (define given (make-hasheq))                 ; serve-config field -> value
  (define limit-args (make-hasheq))            ; make-limits keyword name -> value
  (define modes (make-hasheq))                 ; 'single? 'check? -> #t
  (define (put! k v) (hash-set! given k v))
  (put! 'allowed-clients (getenv "FCGI_WEB_SERVER_ADDRS"))
  (define app
    (parse-command-line "raco fastcgi serve" argv
                        (append (listener-flags put!)
                                (pool-flags put! (λ (k) (hash-set! modes k #t)))
                                (log-flags put!)
                                (servlet-flags put!)
                                (limit-flags (λ (k v) (hash-set! limit-args k v))))
                        (λ (flags app-file) app-file)
                        '("app-file")))
  (define app-path (path->complete-path app))
  (unless (file-exists? app-path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" app))
  (put! 'app (path->string app-path))
  (put! 'limits (hash->limits limit-args))
  (values (hash->serve-config given) modes))

;; --check and --single load the app, so they need the worker's modules; the manager, which
;; runs as long as the pool does, never loads them (each process holds what it loads).
(define-relative-path check-module "check.rkt")
(define-relative-path single-module "../worker/single.rkt")

;; hash->limits : (hash/c symbol any) -> limits ; make-limits with these keyword arguments
(define (hash->limits h)
  (define ks (sort (hash-keys h) symbol<?))
  (keyword-apply make-limits
                 (for/list ([k (in-list ks)]) (string->keyword (symbol->string k)))
                 (for/list ([k (in-list ks)]) (hash-ref h k))
                 '()))

;; check-pool! : serve-config -> void ; the pool sizes must make sense together
(define (check-pool! cfg)
  (define min-spare (serve-config-min-spare cfg))
  (define max-spare (serve-config-max-spare cfg))
  (define max-workers (serve-config-max-workers cfg))
  (unless (<= min-spare max-spare)
    (raise-user-error 'raco-fastcgi "--min-spare (~a) must not exceed --max-spare (~a)" min-spare max-spare))
  (when (and (positive? (serve-config-max-requests-jitter cfg)) (not (serve-config-max-requests cfg)))
    (raise-user-error 'raco-fastcgi "--max-requests-jitter (~a) needs --max-requests"
                      (serve-config-max-requests-jitter cfg)))
  (let ([soft (serve-config-max-memory cfg)] [hard (serve-config-max-memory-hard cfg)])
    (when (and soft hard (< hard soft))
      (raise-user-error 'raco-fastcgi "--max-memory-hard (~a) must not be below --max-memory (~a)" hard soft)))
  (when (eq? (serve-config-pm cfg) 'dynamic)
    (unless (<= min-spare max-workers)
      (raise-user-error 'raco-fastcgi "--min-spare (~a) must not exceed --max-workers (~a)" min-spare max-workers))))

;; ---------------------------------------------------------------------------------------
;; The options, in parse-command-line's table form, one group per part of --help. A flag
;; is (list FLAGS HANDLER (list HELP ARG-NAME ...)); HANDLER gets the flag, then its args.

;; the default of a serve-config field, and of a limit
(define (default get) (get default-serve-config))
(define (default-limit get) (get default-limits))

;; group : string flag ... -> list ; flags under a heading of --help
(define (group label . flags)
  (list (list 'help-labels "" label) (cons 'once-each flags)))

;; listener-flags : (symbol any -> void) -> list
(define (listener-flags put!)
  (group
   "Listening socket:"
    (list '("--listen" "-l") (λ (_ addr) (put! 'listen addr))
          '(("Address to listen on: unix:/path, HOST:PORT, [::1]:PORT or fd:0."
             "Default: fd 0 when it is a listening socket (spawned by the web server),"
             "else systemd socket activation (LISTEN_FDS), else an error.")
            "addr"))
    (option/default put! '("--socket-mode") 'socket-mode octal-arg serve-config-socket-mode "octal"
                    "Mode of a unix socket file (default 0~o)")
    (list '("--socket-owner") (λ (_ user) (put! 'socket-owner (name-or-id user)))
          '("Owner (name or uid) of a unix socket file" "user"))
    (list '("--socket-group") (λ (_ grp) (put! 'socket-group (name-or-id grp)))
          '("Group (name or gid) of a unix socket file" "grp"))
    (option/default put! '("--backlog") 'backlog count-arg serve-config-backlog "n"
                    "Listen backlog (default ~a)")
    (list '("--allowed-clients") (λ (_ list) (put! 'allowed-clients list))
          '(("Comma-separated IPv4/IPv6 addresses or CIDR blocks allowed to connect over TCP"
             "(default: $FCGI_WEB_SERVER_ADDRS, else everyone). A list that parses to nothing denies everyone.")
            "list"))))

;; option/default : (symbol any -> void) (listof string) symbol (string string -> any)
;;                  (serve-config -> any) string string -> list
;; An option whose value is (parse flag value) and whose help ends with its default (text:
;; a format string with one ~a, given the default's field).
(define (option/default put! flags key parse field meta text)
  (list flags (λ (_ v) (put! key (parse (car flags) v))) (list (format text (default field)) meta)))

;; pool-flags : (symbol any -> void) (symbol -> void) -> list
;; mode! gets 'single? or 'check?.
(define (pool-flags put! mode!)
  (group
   "Worker processes (the manager):"
    (list '("--workers" "-w") (λ (_ n) (put! 'workers (count-arg "--workers" n)))
          '(("Worker processes for --pm static; for dynamic and ondemand, the default of"
             "--max-spare and half the default of --max-workers (default: the core count)")
            "n"))
    (list '("--pm") (λ (_ kind) (put! 'pm (choice-arg "--pm" kind '(static dynamic ondemand)
                                                     "static, dynamic or ondemand")))
          '("static (default), dynamic or ondemand" "kind"))
    (option/default put! '("--min-spare") 'min-spare count-arg serve-config-min-spare "n"
                    "dynamic: fewest idle workers (default ~a)")
    (list '("--max-spare") (λ (_ n) (put! 'max-spare (count-arg "--max-spare" n)))
          '("dynamic: most idle workers (default --workers)" "n"))
    (list '("--max-workers") (λ (_ n) (put! 'max-workers (count-arg "--max-workers" n)))
          '("dynamic, ondemand: most workers (default 2 x --workers)" "n"))
    (option/default put! '("--idle-timeout") 'idle-timeout seconds-arg serve-config-idle-timeout "secs"
                    "ondemand: seconds before an idle worker stops (default ~a)")
    (list '("--max-requests") (λ (_ n) (put! 'max-requests (count-arg "--max-requests" n)))
          '("Replace a worker after it took N requests (default: never)" "n"))
    (list '("--max-requests-jitter") (λ (_ n) (put! 'max-requests-jitter (natural-arg "--max-requests-jitter" n)))
          (list (list "With --max-requests: each worker draws its limit in [max-requests, max-requests + N]"
                      (format "when it starts, so that workers started together are not replaced together (default ~a)"
                              (default serve-config-max-requests-jitter)))
                "n"))
    (list '("--max-memory") (λ (_ size) (put! 'max-memory (size-arg "--max-memory" size)))
          '(("Replace a worker whose private memory (its resident memory less what it shares"
             "with other processes, such as the loaded image) passes SIZE, e.g. 512m (default: never)")
            "size"))
    (list '("--max-memory-hard") (λ (_ size) (put! 'max-memory-hard (size-arg "--max-memory-hard" size)))
          '(("Stop a worker whose private memory passes SIZE at once, without waiting for its"
             "requests: SIGTERM, then SIGKILL 1 s later (default: 2 x --max-memory)")
            "size"))
    (option/default put! '("--graceful-timeout") 'graceful-timeout seconds-arg serve-config-graceful-timeout "secs"
                    "Seconds to finish in-flight requests on stop and reload (default ~a)")
    (option/default put! '("--start-timeout") 'start-timeout seconds-arg serve-config-start-timeout "secs"
                    "Seconds a new worker, or a generation's loader, may take to load the app (default ~a)")
    (list '("--canary") (λ (_ secs) (put! 'canary (seconds-arg "--canary" secs)))
          '(("Reload through a canary: the new generation's first worker serves beside the old"
             "generation for SECS (and --canary-requests answers); past --canary-max-errors the"
             "reload rolls back by itself (default: no canary)")
            "secs"))
    (option/default put! '("--canary-requests") 'canary-requests count-arg serve-config-canary-requests "n"
                    "Answers a canary must give before it is judged, within 3 x its seconds (default ~a)")
    (option/default put! '("--canary-max-errors") 'canary-max-errors points-arg serve-config-canary-max-errors "points"
                    "Percentage points of 5xx answers a canary may have over the old generation (default ~a)")
    (list '("--pid-file") (λ (_ file) (put! 'pid-file (path->string (path->complete-path file))))
          '("Write the manager's pid here (and the status to FILE.status.json)" "file"))
    (list '("--preload") (λ (_) (put! 'preload #t))
          '(("Load the app once per generation and fork the workers from it even when loading it"
             "leaves what a fork cannot share (open files, sockets); each such thing is logged")))
    (list '("--no-preload") (λ (_) (put! 'preload #f))
          '(("Each worker loads the app itself (default: the app is loaded once per generation"
             "and the workers are forked from it, unless loading it leaves what a fork cannot share)")))
    (list '("--single-process") (λ (_) (mode! 'single?))
          '("No manager: serve in this one process (the pm options do not apply)"))
    (list '("--check") (λ (_) (mode! 'check?))
          '("Load the app and check the options and paths, then exit (status 0: all is well); serve nothing"))))

;; log-flags : (symbol any -> void) -> list
(define (log-flags put!)
  (group
   "Status and logs:"
    (list '("--status-path") (λ (_ path) (put! 'status-path (url-path-arg "--status-path" path)))
          '("Answer the pool's status at this path, e.g. /status (?json ?openmetrics ?prometheus ?html)" "path"))
    (list '("--ping-path") (λ (_ path) (put! 'ping-path (url-path-arg "--ping-path" path)))
          '("Answer \"pong\" at this path, e.g. /ping" "path"))
    (list '("--access-log") (λ (_ file) (put! 'access-log (log-file-arg file)))
          '("One line per request to FILE, or - for stdout (default: none)" "file"))
    (list '("--slow-log") (λ (_ file) (put! 'slow-log (log-file-arg file)))
          '("Requests running past --slow-threshold, with their stack, to FILE" "file"))
    (option/default put! '("--slow-threshold") 'slow-threshold seconds-arg serve-config-slow-threshold "secs"
                    "Seconds after which a request is slow (default ~a)")
    (list '("--log-level") (λ (_ level) (put! 'log-level (log-level-arg level)))
          '("Log level on stderr: error, warning, info (default), debug" "level"))))

;; servlet-flags : (symbol any -> void) -> list
(define (servlet-flags put!)
  (define timeout (default serve-config-continuation-timeout))
  (group
   "Servlets with continuations (send/suspend, stateless servlets):"
    (list '("--continuation-timeout")
          (λ (_ secs) (put! 'continuation-timeout (seconds-arg "--continuation-timeout" secs)))
          (list (list "Seconds a continuation lives after its last use, in the default manager"
                      (format "(default ~a: ~a hours, as serve/servlet)" timeout (/ timeout 3600)))
                "secs"))
    (list '("--servlet-memory") (λ (_ size) (put! 'servlet-memory (size-arg "--servlet-memory" size)))
          (list (list "Memory a worker's sessions may add to what it held once the app loaded: past it,"
                      (format "the default manager ends the least recently used sessions (default ~a)"
                              (size-text (default serve-config-servlet-memory))))
                "size"))
    (list '("--session-drain")
          (λ (_ secs) (put! 'session-drain (nonnegative-seconds-arg "--session-drain" secs)))
          (list (list "Seconds a worker replaced by a reload or recycling keeps serving its live"
                      (format "sessions, while new ones go to the new workers (default ~a; 0: none)"
                              (default serve-config-session-drain)))
                "secs"))
    (list '("--secret-file") (λ (_ file) (put! 'secret-file (secret-file-arg file)))
          '(("Sign stateless servlets' URLs with the secret in FILE (at least 16 bytes), the same"
             "on every host (default: a secret made at start, valid until the manager stops)")
            "file"))))

;; limit-flags : (symbol any -> void) -> list ; limit! gets make-limits' keyword name
(define (limit-flags limit!)
  (define (size get) (size-text (get default-limits)))
  (define (num get) (get default-limits))
  (define (off-or-seconds flag s) (if (equal? s "off") #f (seconds-arg flag s)))
  ;; flag, make-limits keyword name, parser, argument name, --help text (~a: the default)
  ;; and the default as it reads there (#f: none to fill in)
  (define rows
    (list
     (list "--max-body" 'max-body size-arg "size"
           "Largest request body (default ~a): 413 past it" (size limits-max-body))
     (list "--max-params-bytes" 'max-params-bytes size-arg "size"
           "Largest total of params (default ~a): 431 past it" (size limits-max-params-bytes))
     (list "--max-params-pairs" 'max-params-pairs count-arg "n"
           "Most params per request (default ~a): 431 past it" (num limits-max-params-pairs))
     (list "--max-concurrent" 'max-concurrent count-arg "n"
           "Most handlers running at once (default ~a): 503 past it" (num limits-max-concurrent))
     (list "--max-queue-delay" 'max-queue-delay off-or-seconds "secs"
           "Shed load: past SECS of CPU work ahead of it, a new request gets 503 (default: off)" #f)
     (list "--max-connections" 'max-connections count-arg "n"
           "Most open connections (default ~a)" (num limits-max-connections))
     (list "--max-requests-per-connection" 'max-requests-per-connection count-arg "n"
           "Most live requests on one connection (default ~a): OVERLOADED past it"
           (num limits-max-requests-per-connection))
     (list "--stdin-buffer" 'stdin-buffer size-arg "size"
           "Body bytes queued for one handler that has not read them (default ~a)" (size limits-stdin-buffer))
     (list "--connection-buffer" 'connection-buffer size-arg "size"
           "Input the live requests of one multiplexed connection hold together (default ~a)"
           (size limits-connection-buffer))
     (list "--first-byte-timeout" 'first-byte-timeout seconds-arg "secs"
           "Seconds from accept to the first whole record (default ~a)" (num limits-first-byte-timeout))
     (list "--keepalive-timeout" 'idle-timeout seconds-arg "secs"
           "Seconds a kept connection may idle between requests (default ~a)" (num limits-idle-timeout))
     (list "--read-timeout" 'read-timeout seconds-arg "secs"
           "Seconds without progress while a request's input is incomplete (default ~a)" (num limits-read-timeout))
     (list "--write-timeout" 'write-timeout seconds-arg "secs"
           "Seconds one write may block on a peer that does not read (default ~a)" (num limits-write-timeout))
     (list "--request-timeout" 'request-timeout seconds-arg "secs"
           "Seconds a handler may run before it is stopped and the front gets 503 (default: no limit)" #f)
     (list "--request-memory" 'request-memory positive-size-arg "size"
           '("Memory one request's handler may hold: past it, the handler is ended and the front"
             "gets 500 (default: --max-memory when it is given, else no limit)")
           #f)))
  (apply group "Limits (per worker):"
         (for/list ([r (in-list rows)])
           (define-values (flag key parse arg help default) (apply values r))
           (list (list flag) (λ (_ v) (limit! key (parse flag v)))
                 (list (if default (format help default) help) arg)))))
