#lang racket/base
;; Listeners on real sockets: unix paths in a temp dir, TCP on 127.0.0.1 and ::1 port 0,
;; inherited fds in child processes.
(require compiler/find-exe
         ffi/unsafe
         ffi/unsafe/port
         racket/file
         racket/port
         racket/runtime-path
         racket/string
         racket/tcp
         racket/unix-socket
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/ffi.rkt"
         "../fastcgi/private/log.rkt"
         "../fastcgi/private/protocol.rkt"
         "../fastcgi/private/transport.rkt")

(define-runtime-path transport-module "../fastcgi/private/transport.rkt")

(define c-dup (get-ffi-obj "dup" #f (_fun _int -> _int)))
(define c-pipe (get-ffi-obj "pipe" #f (_fun _bytes -> _int)))
(define c-fcntl (get-ffi-obj "fcntl" #f (_fun #:varargs-after 2 _int _int _int -> _int)))
(define F_GETFL 3)
(define F_SETFL 4)
(define O_NONBLOCK #o4000)
(define c-getrlimit (get-ffi-obj "getrlimit" #f (_fun _int _bytes -> _int)))
(define c-setrlimit (get-ffi-obj "setrlimit" #f (_fun _int _bytes -> _int)))
(define RLIMIT_NOFILE 7)

(define tmp-dir (make-temporary-file "fcgi-transport-~a" 'directory))
(define (tmp name) (path->string (build-path tmp-dir name)))

;; transport-error? : regexp -> (any -> boolean)
(define ((transport-error? rx) e)
  (and (exn:fail:fastcgi:transport? e) (regexp-match? rx (exn-message e))))

;; listener-port : listener -> port number (from "HOST:PORT" or "[V6]:PORT")
(define (listener-port l)
  (string->number (cadr (regexp-match #rx":([0-9]+)$" (listener-address l)))))

;; round-trip : listener (-> (values in out)) -> peer-string
;; Connects, accepts, sends a line each way, and returns what the listener saw as the peer.
(define (round-trip l connect)
  (define-values (ci co) (connect))
  (define-values (si so peer) (listener-accept l))
  (write-string "ping\n" co)
  (flush-output co)
  (check-equal? (read-line si) "ping")
  (write-string "pong\n" so)
  (flush-output so)
  (check-equal? (read-line ci) "pong")
  (for-each close-port (list ci co si so))
  peer)

(define (close-port p) (if (input-port? p) (close-input-port p) (close-output-port p)))

;; exists? : path-string -> boolean
;; True for any file, sockets included (link-exists? is only for symbolic links).
(define (exists? p)
  (with-handlers ([exn:fail:filesystem? (lambda (e) #f)])
    (and (file-or-directory-stat p #t) #t)))

(test-case "unix listener: mode, round trip, peer, close removes the file"
  (define path (tmp "a.sock"))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (check-equal? (listener-kind l) 'unix)
  (check-equal? (listener-address l) (string-append "unix:" path))
  (check-equal? (file-or-directory-permissions path 'bits) #o660)
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  (listener-close! l)
  (listener-close! l)
  (check-false (exists? path)))

(test-case "unix listener: custom mode, numeric owner and group, relative path"
  (define dir-stat (file-or-directory-stat tmp-dir))
  (define l (parameterize ([current-directory tmp-dir])
              (open-listener (parse-listen-address "unix:rel.sock")
                             #:socket-mode #o600
                             #:socket-owner (hash-ref dir-stat 'user-id)
                             #:socket-group (hash-ref dir-stat 'group-id))))
  (define path (tmp "rel.sock"))
  (check-equal? (listener-address l) (string-append "unix:" path))
  (check-equal? (file-or-directory-permissions path 'bits) #o600)
  (check-equal? (hash-ref (file-or-directory-stat path) 'user-id) (hash-ref dir-stat 'user-id))
  (listener-close! l)
  (check-false (exists? path))
  (check-exn (transport-error? #rx"unknown user \"no-such-user-fcgi\"")
             (lambda () (open-listener (parse-listen-address (string-append "unix:" path))
                                       #:socket-owner "no-such-user-fcgi")))
  (check-false (exists? path)))

(test-case "user and group names resolve through getpwnam and getgrnam"
  (check-equal? (uid-of-user "root") 0)
  (check-equal? (gid-of-group "root") 0)
  (check-false (uid-of-user "no-such-user-fcgi"))
  (check-false (gid-of-group "no-such-group-fcgi")))

(test-case "unix listener: a stale socket file is replaced"
  (define path (tmp "stale.sock"))
  (define fd (c-socket AF_UNIX SOCK_STREAM 0))
  (define sa (make-sockaddr-un (string->bytes/utf-8 path)))
  (check-equal? (c-bind fd sa (bytes-length sa)) 0)
  (c-close fd)
  (check-true (exists? path))
  (define log (make-log-receiver fastcgi-logger 'info))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  ;; HOSTILE.md item 28: detected, removed (said so in the log), rebound with mode 0660
  (check-equal? (bitwise-and (file-or-directory-permissions path 'bits) #o777) #o660)
  (check-true (for/or ([_ 20])
                (define v (sync/timeout 1 log))
                (and v (regexp-match? #rx"removing stale socket unix:.*stale[.]sock" (vector-ref v 1))))
              "the removal is logged")
  (listener-close! l))

(test-case "unix listener: a live server or a regular file is refused, left untouched"
  (define path (tmp "live.sock"))
  (define spec (parse-listen-address (string-append "unix:" path)))
  (define l (open-listener spec))
  (check-exn (transport-error? #rx"another server is listening on unix:")
             (lambda () (open-listener spec)))
  ;; the probe's connection reaches the live server, which sees it close at once
  (define-values (pi po peer) (listener-accept l))
  (check-equal? (read-bytes 1 pi) eof)
  (for-each close-port (list pi po))
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  (listener-close! l)
  (define file (tmp "regular"))
  (call-with-output-file file (lambda (o) (write-string "keep me" o)))
  (check-exn (transport-error? #rx"not a socket")
             (lambda () (open-listener (parse-listen-address (string-append "unix:" file)))))
  (check-equal? (file->string file) "keep me"))

(test-case "unix listener: close leaves alone a file that replaced our socket"
  (define path (tmp "replaced.sock"))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (delete-file path)
  (call-with-output-file path (lambda (o) (write-string "new" o)))
  (listener-close! l)
  (check-equal? (file->string path) "new"))

(test-case "unix listener: path too long for sun_path"
  (define long-dir (build-path tmp-dir (make-string 100 #\d)))
  (make-directory long-dir)
  (check-exn (transport-error? #rx"socket path is [0-9]+ bytes, the limit is 107")
             (lambda () (parameterize ([current-directory long-dir])
                          (open-listener (parse-listen-address "unix:x.sock"))))))

(test-case "TCP listeners on 127.0.0.1 and ::1: bound port, peer, TCP_NODELAY"
  ;; "[::]" is dual-stack: an IPv4 client arrives as ::ffff:127.0.0.1, reported as 127.0.0.1
  (for ([spec '("127.0.0.1:0" "[::1]:0" "localhost:0" "[::]:0")]
        [host '("127.0.0.1" "::1" "127.0.0.1" "127.0.0.1")]
        [rx (list #rx"^127\\.0\\.0\\.1:[0-9]+$" #rx"^\\[::1\\]:[0-9]+$" #rx"^127\\.0\\.0\\.1:"
                  #rx"^\\[::\\]:[0-9]+$")])
    (define l (open-listener (parse-listen-address spec)))
    (check-equal? (listener-kind l) 'tcp)
    (check-regexp-match rx (listener-address l))
    (check-true (> (listener-port l) 0))
    (define-values (ci co) (tcp-connect host (listener-port l)))
    (define-values (si so peer) (listener-accept l))
    (check-equal? peer host spec)
    (check-equal? (getsockopt-int (unsafe-port->file-descriptor so) IPPROTO_TCP TCP_NODELAY) 1)
    (check-false (fd-listening-socket? (unsafe-port->file-descriptor so)))
    (check-true (fd-listening-socket? (listener-fd l)))
    (for-each close-port (list ci co si so))
    (check-equal? (round-trip l (lambda () (tcp-connect host (listener-port l)))) host)
    (listener-close! l)))

(test-case "TCP: a port in use is one clear error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-exn (transport-error? #rx"^fastcgi: cannot bind 127\\.0\\.0\\.1:[0-9]+: .*\\(errno 98\\)$")
             (lambda () (open-listener (parse-listen-address (listener-address l)))))
  (listener-close! l))

(test-case "socket-shutdown-write!: the peer reads EOF and can still send"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define-values (si so peer) (listener-accept l))
  (write-string "bye" so)
  (socket-shutdown-write! so)
  (check-equal? (port->string ci) "bye")
  (write-string "more\n" co)
  (flush-output co)
  (check-equal? (read-line si) "more")
  (socket-shutdown-write! so)
  (for-each close-port (list ci co si so))
  (socket-shutdown-write! so)
  (listener-close! l))

(test-case "listener-accept blocks only its thread; close wakes it with an error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define ticks 0)
  (define ticker (thread (lambda () (let loop () (set! ticks (add1 ticks)) (sleep 0.01) (loop)))))
  (define result (make-channel))
  (define acceptor
    (thread (lambda ()
              (channel-put result (with-handlers ([(lambda (e) #t) values])
                                    (listener-accept l))))))
  (sleep 0.3)
  (kill-thread ticker)
  (check-true (> ticks 10))
  (check-false (thread-dead? acceptor))
  (listener-close! l)
  (define e (sync/timeout 2 result))
  (check-true ((transport-error? #rx"is closed") e))
  (check-exn (transport-error? #rx"is closed") (lambda () (listener-accept l))))

(test-case "several threads accept on one listener"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define results (make-channel))
  (for ([i 3])
    (thread (lambda ()
              (define-values (i o peer) (listener-accept l))
              (define line (read-line i))
              (close-input-port i)
              (close-output-port o)
              (channel-put results line))))
  (define clients
    (for/list ([n 3])
      (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
      (write-string (format "client ~a\n" n) co)
      (flush-output co)
      (list ci co)))
  (check-equal? (sort (for/list ([n 3]) (sync/timeout 2 results)) string<?)
                '("client 0" "client 1" "client 2"))
  (for-each close-port (apply append clients))
  (listener-close! l))

;; at-fd-limit : ((-> void) -> any) -> natural
;; Runs body with the process's descriptor limit lowered and every free descriptor taken;
;; body gets a procedure that gives them back. Returns the "retrying" warnings logged by
;; the time body returned; afterwards the descriptors and the limit are restored.
(define (at-fd-limit body)
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (define saved (make-bytes 16))
  (c-getrlimit RLIMIT_NOFILE saved)
  (define fillers '())
  (define (release!) (for-each c-close fillers) (set! fillers '()))
  (dynamic-wind
   (lambda ()
     (define open-fds (length (directory-list "/proc/self/fd")))
     (c-setrlimit RLIMIT_NOFILE (bytes-append (integer->integer-bytes (+ open-fds 8) 8 #f) (subbytes saved 8)))
     (let fill ()
       (define fd (c-socket AF_INET SOCK_STREAM 0))
       (when (>= fd 0) (set! fillers (cons fd fillers)) (fill))))
   (lambda ()
     (body release!)
     (let loop ([n 0])
       (define v (sync/timeout 0 receiver))
       (cond [(not v) n]
             [(regexp-match? #rx"Too many open files [(]errno 24[)]; retrying" (vector-ref v 1))
              (loop (add1 n))]
             [else (loop n)])))
   (lambda ()
     (release!)
     (c-setrlimit RLIMIT_NOFILE saved))))

(test-case "accept at the descriptor limit: logs, waits 0.1 s between tries, recovers"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define warnings
    (at-fd-limit
     (lambda (release!)
       (define acceptor (thread (lambda () (listener-accept l))))
       (sleep 0.35)
       (check-false (thread-dead? acceptor))
       (release!)
       (check-not-false (sync/timeout 2 acceptor)))))
  (check-true (<= 2 warnings 6) (format "~a warnings in 0.35 s" warnings))
  (close-input-port ci)
  (close-output-port co)
  (listener-close! l))

(test-case "the server's event loop at the descriptor limit: logs, stops accepting a while, then serves"
  (define address #f)
  (define stop (serve/fastcgi-raw (lambda (r) (write-bytes #"Status: 200 OK\r\n\r\nserved" (fastcgi-request-stdout r)))
                                  #:listen "127.0.0.1:0" #:on-ready (lambda (a) (set! address a))))
  (define port (string->number (cadr (regexp-match #rx":([0-9]+)$" address))))
  ;; connected before the limit, the request waits in the backlog while accept fails
  (define-values (ci co) (tcp-connect "127.0.0.1" port))
  (write-bytes (bytes-append (record->bytes 'begin-request 1 (begin-request-content 'responder #f))
                             (record->bytes 'params 1 #"") (record->bytes 'stdin 1 #""))
               co)
  (flush-output co)
  (define warnings
    (at-fd-limit
     (lambda (release!)
       (sleep 0.35)
       (check-false (sync/timeout 0 ci) "nothing answered while no fd is free"))))
  (check-true (<= 2 warnings 6) (format "~a warnings in 0.35 s" warnings))
  (define d (make-decoder))
  (define out
    (let loop ([acc #""])
      (define r (decoder-next! d))
      (cond
        [(not r) (if (sync/timeout 5 ci) (if (eof-object? (decoder-read! d ci)) acc (loop acc)) acc)]
        [(eq? (record-type r) 'stdout) (loop (bytes-append acc (record-content r)))]
        [else (loop acc)])))
  (check-equal? out #"Status: 200 OK\r\n\r\nserved" "served once fds are free again")
  (close-input-port ci)
  (close-output-port co)
  (stop #:timeout 1))

(test-case "fd-listening-socket? and fd:N listeners"
  (define fds (make-bytes 8))
  (check-equal? (c-pipe fds) 0)
  (define r (integer-bytes->integer fds #t #f 0 4))
  (define w (integer-bytes->integer fds #t #f 4 8))
  (check-false (fd-listening-socket? r))
  (check-exn (transport-error? (regexp (format "fd:~a is not a listening socket" r)))
             (lambda () (open-listener (parse-listen-address (format "fd:~a" r)))))
  (c-close r)
  (c-close w)
  (check-false (fd-listening-socket? 99999))
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define blocking-fd (c-dup (listener-fd l)))
  (c-fcntl blocking-fd F_SETFL 0)
  (check-equal? (bitwise-and (c-fcntl blocking-fd F_GETFL 0) O_NONBLOCK) 0)
  (define dup-l (open-listener (parse-listen-address (format "fd:~a" blocking-fd))))
  (check-equal? (bitwise-and (c-fcntl blocking-fd F_GETFL 0) O_NONBLOCK) O_NONBLOCK)
  (check-equal? (listener-kind dup-l) 'inherited)
  (check-regexp-match #rx"^fd:[0-9]+$" (listener-address dup-l))
  (check-equal? (round-trip dup-l (lambda () (tcp-connect "127.0.0.1" (listener-port l))))
                "127.0.0.1")
  (listener-close! dup-l)
  (listener-close! l))

;; run-child : listener string -> string
;; Runs `sh -c script` with the listener (a dup of its fd) as stdin; the child accepts one
;; connection and writes a line about its listener; returns that line.
(define (run-child l script)
  (define child-stdin (unsafe-file-descriptor->port (c-dup (listener-fd l)) 'listener '(read)))
  (define-values (child out in err)
    (subprocess (current-output-port) child-stdin (current-error-port) "/bin/sh" "-c" script))
  (close-input-port child-stdin)
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define line (sync/timeout 20 (read-line-evt ci)))
  (unless (sync/timeout 5 child) (subprocess-kill child #t))
  (close-input-port ci)
  (close-output-port co)
  line)

;; shell-quote : string -> string
(define (shell-quote s)
  (string-append "'" (string-replace s "'" "'\\''") "'"))

;; child-program-with : string -> string ; the child's program, its listener from expr
(define (child-program-with expr)
  (format "(require (file ~s))
           (define l ~a)
           (define-values (i o peer) (listener-accept l))
           (void (write-string (format \"ok ~~a ~~a ~~a\\n\" (listener-kind l)
                                       (listener-address l) (getenv \"LISTEN_FDS\"))
                               o))
           (close-output-port o)"
          (path->string transport-module) expr))

(define child-program (child-program-with "(inherited-listener)"))

(test-case "inherited listener: fd 0 (FCGI_LISTENSOCK_FILENO) in a child process"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "exec ~a -e ~a" (find-exe) (shell-quote child-program)))
                "ok inherited fd:0 #f")
  (listener-close! l))

(test-case "inherited listener: systemd socket activation on fd 3"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "export LISTEN_PID=$$ LISTEN_FDS=1
                                      exec ~a -e ~a 3<&0 0</dev/null"
                                     (find-exe) (shell-quote child-program)))
                "ok inherited fd:3 #f")
  (listener-close! l))

(test-case "listener-for: an address opened with its listener-options, a listener as is"
  (define path (tmp "for.sock"))
  (define l (listener-for (string-append "unix:" path) (make-listener-options #:socket-mode #o600)))
  (check-equal? (listener-kind l) 'unix)
  (check-equal? (file-or-directory-permissions path 'bits) #o600)
  (check-eq? (listener-for l) l)
  (listener-close! l)
  (define d (listener-for (string-append "unix:" path)))
  (check-equal? (file-or-directory-permissions path 'bits) #o660 "default-listener-options' mode")
  (listener-close! d)
  (define t (listener-for "127.0.0.1:0" (make-listener-options #:backlog 2)))
  (check-regexp-match #rx"^127[.]0[.]0[.]1:[0-9]+$" (listener-address t))
  (listener-close! t))

(test-case "listener-for #f: the inherited listener, else one clear error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "exec ~a -e ~a" (find-exe)
                                     (shell-quote (child-program-with "(listener-for #f)"))))
                "ok inherited fd:0 #f")
  (listener-close! l)
  (define env (environment-variables-copy (current-environment-variables)))
  (environment-variables-set! env #"LISTEN_PID" #f)
  (unless (fd-listening-socket? 0)
    (parameterize ([current-environment-variables env])
      (check-exn (transport-error? #rx"^fastcgi: no address to listen on: give --listen")
                 (lambda () (listener-for #f))))))

(delete-directory/files tmp-dir)

(test-case "listener-queue-length: connections waiting to be accepted on TCP; none known for unix"
  ;; the status page's listen_queue (manager-status.rkt); read from TCP_INFO, not /proc/net/tcp
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (listener-queue-length l) 0)
  (define clients
    (for/list ([i 3])
      (define-values (in out) (tcp-connect "127.0.0.1" (listener-port l)))
      (cons in out)))
  (sleep 0.1)                             ; the handshakes complete in the kernel
  (check-equal? (listener-queue-length l) 3)
  (define-values (fd peer) (listener-try-accept l))
  (check-true (exact-integer? fd))
  (socket-close! fd)
  (check-equal? (listener-queue-length l) 2)
  (for ([c (in-list clients)]) (close-input-port (car c)) (close-output-port (cdr c)))
  (listener-close! l)
  (check-false (listener-queue-length l) "closed")
  (define dir (make-temporary-file "fcgi-queue-~a" 'directory))
  (define u (open-listener (parse-listen-address (string-append "unix:" (path->string (build-path dir "q.sock"))))))
  (check-false (listener-queue-length u))
  (listener-close! u)
  (delete-directory/files dir))
