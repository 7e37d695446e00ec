#lang racket/base
;; `raco fastcgi`: one handle-<command> per subcommand.
(require racket/cmdline
         racket/list
         racket/os
         racket/runtime-path
         "app.rkt"
         "limits.rkt"
         "log.rkt"
         "logging.rkt"
         "server.rkt"
         "transport.rkt"
         "request-cli.rkt")
(provide main app-last)

(define commands
  '(("serve" "run an application as a FastCGI server")
    ("dev" "run an application behind a local HTTP front (no nginx needed)")
    ("request" "send a FastCGI request to any FastCGI server, like cgi-fcgi")))

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
       [("request") (request-command rest)]
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

;; seconds-arg : string string -> positive real
(define (seconds-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (positive? n))
    (raise-user-error 'raco-fastcgi "~a: expected a positive number of seconds, got ~s" flag s))
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
(define (handle-serve argv)
  (define listen #f)
  (define allowed (getenv "FCGI_WEB_SERVER_ADDRS"))
  (define mode #o660)
  (define owner #f)
  (define group #f)
  (define backlog 1024)
  (define graceful 30)
  (define log-level 'info)
  (define limit-args (make-hasheq))
  (define app
    (command-line
     #:program "raco fastcgi serve"
     #:argv argv
     #:once-each
     [("--listen" "-l") addr
      ("Address to listen on: unix:/path, HOST:PORT, [::1]:PORT or fd:0."
       "Default: fd 0 when it is a listening socket (spawned by the web server),"
       "else systemd socket activation (LISTEN_FDS), else an error.")
      (set! listen addr)]
     [("--allowed-clients") list
      ("Comma-separated IPv4/IPv6 addresses or CIDR blocks allowed to connect over TCP"
       "(default: $FCGI_WEB_SERVER_ADDRS, else everyone). A list that parses to nothing denies everyone.")
      (set! allowed list)]
     [("--socket-mode") octal "Mode of a unix socket file (default 0660)"
      (set! mode (or (string->number octal 8)
                     (raise-user-error 'raco-fastcgi "--socket-mode: expected an octal mode like 0660, got ~s" octal)))]
     [("--socket-owner") user "Owner (name or uid) of a unix socket file" (set! owner (name-or-id user))]
     [("--socket-group") grp "Group (name or gid) of a unix socket file" (set! group (name-or-id grp))]
     [("--backlog") n "Listen backlog (default 1024)" (set! backlog (count-arg "--backlog" n))]
     [("--graceful-timeout") secs "Seconds to finish in-flight requests on stop (default 30)"
      (set! graceful (seconds-arg "--graceful-timeout" secs))]
     [("--max-body") size "Largest request body (default 64m): 413 past it"
      (hash-set! limit-args '#:max-body (size-arg "--max-body" size))]
     [("--max-params-bytes") size "Largest total of params (default 128k): 431 past it"
      (hash-set! limit-args '#:max-params-bytes (size-arg "--max-params-bytes" size))]
     [("--max-params-pairs") n "Most params per request (default 1000): 431 past it"
      (hash-set! limit-args '#:max-params-pairs (count-arg "--max-params-pairs" n))]
     [("--max-concurrent") n "Most handlers running at once (default 1000): 503 past it"
      (hash-set! limit-args '#:max-concurrent (count-arg "--max-concurrent" n))]
     [("--max-connections") n "Most open connections (default 1024)"
      (hash-set! limit-args '#:max-connections (count-arg "--max-connections" n))]
     [("--max-requests-per-connection") n "Most live requests on one connection (default 100): OVERLOADED past it"
      (hash-set! limit-args '#:max-requests-per-connection (count-arg "--max-requests-per-connection" n))]
     [("--first-byte-timeout") secs "Seconds from accept to the first byte (default 10)"
      (hash-set! limit-args '#:first-byte-timeout (seconds-arg "--first-byte-timeout" secs))]
     [("--idle-timeout") secs "Seconds a kept connection may idle between requests (default 120)"
      (hash-set! limit-args '#:idle-timeout (seconds-arg "--idle-timeout" secs))]
     [("--read-timeout") secs "Seconds without progress while a request's input is incomplete (default 30)"
      (hash-set! limit-args '#:read-timeout (seconds-arg "--read-timeout" secs))]
     [("--write-timeout") secs "Seconds one write may block on a peer that does not read (default 30)"
      (hash-set! limit-args '#:write-timeout (seconds-arg "--write-timeout" secs))]
     [("--request-timeout") secs "Seconds a handler may run before it is stopped and the front gets 503 (default: no limit)"
      (hash-set! limit-args '#:request-timeout (seconds-arg "--request-timeout" secs))]
     [("--log-level") level "Log level on stderr: error, warning, info (access lines; default), debug"
      (set! log-level (string->symbol level))
      (unless (memq log-level '(fatal error warning info debug))
        (raise-user-error 'raco-fastcgi "--log-level: expected error, warning, info or debug, got ~s" level))]
     #:args (app-file) app-file))
  (start-stderr-logging! log-level)
  (define lim (keyword-apply make-limits
                             (sort (hash-keys limit-args) keyword<?)
                             (for/list ([k (in-list (sort (hash-keys limit-args) keyword<?))]) (hash-ref limit-args k))
                             '()))
  (define-values (handler roles) (load-app app lim))
  (define l (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
              (resolve-listener listen #:backlog backlog #:socket-mode mode
                                #:socket-owner owner #:socket-group group)))
  (define rs (start-server handler l #:roles roles #:limits lim
                           #:allowed-clients (and allowed (parse-allowed-clients allowed))))
  (log-fastcgi-info "serving ~a on ~a (pid ~a)" app (running-server-address rs) (getpid))
  (wait-for-signal)
  (log-fastcgi-info "stopping: finishing in-flight requests (up to ~a s)" graceful)
  ((running-server-stop rs) #:timeout graceful)
  (flush-logging)
  (exit 0))

;; wait-for-signal : -> void ; SIGINT, SIGTERM and SIGHUP reach the main thread as breaks
(define (wait-for-signal)
  (with-handlers ([exn:break? void])
    (sync never-evt)))
