#lang racket/base
;; Listeners: TCP host:port, unix socket paths (mode, owner, stale-socket check), inherited
;; listening fds (FCGI_LISTENSOCK_FILENO = 0, systemd socket activation on fd 3), private
;; sockets (abstract, our user only), and the allowed-clients check. Every descriptor made
;; or adopted here is close-on-exec: no program the application starts holds one. The server takes accepted connections as bare fds (it reads and
;; writes them through the FFI); other callers get ordinary Racket ports.
(require ffi/unsafe
         ffi/unsafe/atomic
         ffi/unsafe/custodian
         ffi/unsafe/port
         racket/list
         racket/string
         "ffi.rkt"
         "log.rkt")
(provide (struct-out exn:fail:fastcgi:transport)
         parse-listen-address listen-spec? listen-spec->string
         open-listener inherited-listener open-private-listener private-connect
         listener? listener-fd listener-kind listener-address
         listener-accept listener-accept-fd listener-try-accept listener-close!
         fd->ports
         socket-shutdown-write! socket-close!
         socket-read! socket-write! socket-write-records! sendrecs-max
         socket-input-pending?
         listener-queue-length
         parse-allowed-clients client-allowed?
         fd-listening-socket?)

(struct exn:fail:fastcgi:transport exn:fail ())

;; kind: 'unix (target: path string), 'tcp (target: host string, port), 'fd (target: fd)
(struct listen-spec (kind target port) #:transparent)

;; unix-path and unix-id (device . inode) are set only for a socket file we bound ourselves.
;; peer-uid: #f, or the only user whose connections are accepted (a private socket).
;; cref: the registration with the custodian, whose shutdown closes the listener.
(struct listener (fd kind address unix-path unix-id peer-uid closed-sema [closed? #:mutable]
                  [cref #:mutable]))

;; raise-transport : format-string any ... -> none
(define (raise-transport fmt . args)
  (raise (exn:fail:fastcgi:transport (string-append "fastcgi: " (apply format fmt args))
                                     (current-continuation-marks))))

;; raise-errno : string errno -> none
(define (raise-errno what errno)
  (raise-transport "~a: ~a" what (errno-message errno)))

;; check-syscall : int string [(-> any)] -> void
;; After a libc call: on failure, run the clean-up, then raise with the saved errno.
(define (check-syscall r what [clean-up void])
  (when (< r 0)
    (define errno (saved-errno))
    (clean-up)
    (raise-errno what errno)))

;; ---------------------------------------------------------------------------------------
;; Listen addresses

;; parse-listen-address : string -> listen-spec
(define (parse-listen-address str)
  (define (bad why)
    (raise-transport "invalid listen address ~s: ~a" str why))
  (cond
    [(string-prefix? str "unix:")
     (define path (substring str 5))
     (cond [(string=? path "") (bad "empty socket path")]
           [(string-contains? path "\0") (bad "NUL in socket path")]
           [(> (bytes-length (string->bytes/utf-8 path)) SUN_PATH_MAX)
            (bad (format "socket path longer than ~a bytes" SUN_PATH_MAX))]
           [else (listen-spec 'unix path #f)])]
    [(string-prefix? str "fd:")
     (define m (regexp-match #px"^fd:([0-9]{1,9})$" str))
     (if m (listen-spec 'fd (string->number (cadr m)) #f) (bad "expected fd:N"))]
    [(or (regexp-match #px"^\\[([^]]*)\\]:([0-9]{1,5})$" str)
         (regexp-match #px"^([^:\\[\\]]*):([0-9]{1,5})$" str))
     => (lambda (m)
          (define host (if (member (cadr m) '("" "*")) "*" (cadr m)))
          (define port (string->number (caddr m)))
          (cond [(> port 65535) (bad "port must be 0..65535")]
                [(not (host->bytes host))
                 (bad "host must be a numeric IPv4 address, [IPv6], localhost or *")]
                [(and (string-prefix? str "[") (not (regexp-match? #rx":" host)))
                 (bad "only IPv6 addresses go in brackets")]
                [else (listen-spec 'tcp host port)]))]
    [else (bad "expected unix:PATH, HOST:PORT, [IPV6]:PORT, *:PORT or fd:N")]))

;; host->bytes : string -> (or/c bytes #f)
(define (host->bytes host)
  (case host
    [("*") (bytes 0 0 0 0)]
    [("localhost") (bytes 127 0 0 1)]
    [else (ip->bytes host)]))

;; listen-spec->string : listen-spec -> string
(define (listen-spec->string spec)
  (define target (listen-spec-target spec))
  (case (listen-spec-kind spec)
    [(unix) (string-append "unix:" target)]
    [(fd) (format "fd:~a" target)]
    [else (ip+port->string target (listen-spec-port spec))]))

;; ip+port->string : string port -> string
(define (ip+port->string ip port)
  (if (regexp-match? #rx":" ip) (format "[~a]:~a" ip port) (format "~a:~a" ip port)))

;; ---------------------------------------------------------------------------------------
;; Opening listeners

(define socket-flags (bitwise-ior SOCK_STREAM SOCK_NONBLOCK SOCK_CLOEXEC))

;; open-listener : listen-spec #:backlog int #:socket-mode int #:socket-owner ...
;;                 #:socket-group ... -> listener
(define (open-listener spec
                       #:backlog [backlog 1024]
                       #:socket-mode [mode #o660]
                       #:socket-owner [owner #f]
                       #:socket-group [group #f])
  (case (listen-spec-kind spec)
    [(unix) (open-unix (listen-spec-target spec) backlog mode owner group)]
    [(tcp) (open-tcp spec backlog)]
    [else (adopt-fd (listen-spec-target spec))]))

;; open-tcp : listen-spec int -> listener
(define (open-tcp spec backlog)
  (define where (listen-spec->string spec))
  (define addr (host->bytes (listen-spec-target spec)))
  (define v6? (= 16 (bytes-length addr)))
  (define fd (c-socket (if v6? AF_INET6 AF_INET) socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (define (check-opt r what)
    (unless (eq? r #t) (close-fd) (raise-errno (format "cannot set ~a on ~a" what where) r)))
  (check-opt (setsockopt-int fd SOL_SOCKET SO_REUSEADDR 1) "SO_REUSEADDR")
  (when v6? (check-opt (setsockopt-int fd IPPROTO_IPV6 IPV6_V6ONLY 0) "IPV6_V6ONLY"))
  (define sa (make-sockaddr-in addr (listen-spec-port spec)))
  (check-syscall (c-bind fd sa (bytes-length sa)) (format "cannot bind ~a" where) close-fd)
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-fd)
  (define bound (make-bytes SOCKADDR_MAX 0))
  (check-syscall (c-getsockname fd bound (integer->integer-bytes SOCKADDR_MAX 4 #f))
                 (format "cannot read the address of ~a" where) close-fd)
  (define-values (ip port) (sockaddr->ip+port bound))
  (make-listener fd 'tcp (ip+port->string (bytes->ip ip) port) #f #f))

;; open-unix : string int int owner group -> listener
(define (open-unix path-str backlog mode owner group)
  (define path (path->complete-path path-str))
  (define path-bytes (path->bytes path))
  (define where (string-append "unix:" (path->string path)))
  (when (> (bytes-length path-bytes) SUN_PATH_MAX)
    (raise-transport "cannot listen on ~a: socket path is ~a bytes, the limit is ~a"
                     where (bytes-length path-bytes) SUN_PATH_MAX))
  (define uid (resolve-id owner uid-of-user "user"))
  (define gid (resolve-id group gid-of-group "group"))
  (define sa (make-sockaddr-un path-bytes))
  (remove-stale-socket! path sa where)
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (define (close-and-unlink) (c-close fd) (c-unlink path))
  ;; umask is process-wide: set it only for the bind, in atomic mode, so no other Racket
  ;; thread creates a file with it, and the socket never exists with a looser mode.
  (start-atomic)
  (define old-umask (c-umask #o177))
  (define bound (c-bind fd sa (bytes-length sa)))
  (define bind-errno (saved-errno))
  (c-umask old-umask)
  (end-atomic)
  (when (< bound 0)
    (close-fd)
    (raise-errno (format "cannot bind ~a" where) bind-errno))
  (check-syscall (c-chmod path mode) (format "cannot chmod ~a" where) close-and-unlink)
  (when (or uid gid)
    (check-syscall (c-chown path (or uid -1) (or gid -1))
                   (format "cannot chown ~a" where) close-and-unlink))
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-and-unlink)
  (make-listener fd 'unix where path (file-id path)))

;; ---------------------------------------------------------------------------------------
;; Private sockets: the manager's control socket and the workers' relay sockets. They are
;; Linux abstract unix sockets: a name and no file, so that cleaning temporary folders
;; under a running pool removes nothing it needs. Such a name has no permissions, so each
;; end checks the other's user (SO_PEERCRED): a connection from, or a listener of, another
;; user is refused.

;; private-sockaddr : string -> bytes ; sun_path is a NUL then the name, no terminator
(define (private-sockaddr name)
  (define nb (string->bytes/utf-8 name))
  (unless (<= 1 (bytes-length nb) (sub1 SUN_PATH_MAX))
    (raise-transport "private socket name ~s: 1 to ~a bytes" name (sub1 SUN_PATH_MAX)))
  (bytes-append (subbytes (make-sockaddr-un #"") 0 2) #"\0" nb))

;; private-address : string -> string ; for messages, as `ss -x` shows it
(define (private-address name) (string-append "unix:@" name))

;; open-private-listener : string #:backlog int -> listener
;; Accepts connections from processes of our (effective) user only.
(define (open-private-listener name #:backlog [backlog 128])
  (define where (private-address name))
  (define sa (private-sockaddr name))
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (check-syscall (c-bind fd sa (bytes-length sa)) (format "cannot bind ~a" where) close-fd)
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-fd)
  (make-listener fd 'private where #f #f (c-geteuid)))

;; private-connect : string -> (values input-port output-port)
;; A connection (close-on-exec) to the private socket of a process of our user. Raises
;; exn:fail:fastcgi:transport when nothing listens there, its queue stays full for a
;; second, or another user's process holds the name.
(define (private-connect name)
  (define where (private-address name))
  (define sa (private-sockaddr name))
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket to connect to ~a" where))
  (let loop ([tries 0])
    (define r (c-connect fd sa (bytes-length sa)))
    (define errno (if (< r 0) (saved-errno) 0))
    (cond
      [(= r 0) (void)]
      [(= errno EINTR) (loop tries)]
      ;; a unix socket's full accept queue: the connection is not under way, ask again
      [(and (= errno EAGAIN) (< tries 100)) (sleep 0.01) (loop (add1 tries))]
      [else (c-close fd) (raise-errno (format "cannot connect to ~a" where) errno)]))
  (define cred (peer-credentials fd))
  (unless (and cred (= (cadr cred) (c-geteuid)))
    (c-close fd)
    (raise-transport "~a is held by another user (uid ~a): not connecting" where (and cred (cadr cred))))
  (fd->ports fd "unix"))

;; peer-allowed? : listener fd -> boolean
;; For a private listener, whether the connection comes from a process of its user; a
;; refusal is logged (one line a second at most, with the count of the others).
(define refusals (vector -inf.0 0))
(define (peer-allowed? l conn)
  (define uid (listener-peer-uid l))
  (define cred (and uid (peer-credentials conn)))
  (or (not uid)
      (and cred (= uid (cadr cred)))
      (let ([now (current-inexact-monotonic-milliseconds)])
        (vector-set! refusals 1 (add1 (vector-ref refusals 1)))
        (when (> (- now (vector-ref refusals 0)) 1000.0)
          (log-fastcgi-warning "~a: refused ~a connection(s) from another user (the last: ~a)"
                               (listener-address l) (vector-ref refusals 1)
                               (if cred (format "pid ~a, uid ~a" (car cred) (cadr cred)) "unknown"))
          (vector-set! refusals 0 now)
          (vector-set! refusals 1 0))
        #f)))

;; resolve-id : (or/c #f string exact-integer) (string -> (or/c int #f)) string -> (or/c int #f)
(define (resolve-id who lookup what)
  (cond [(string? who) (or (lookup who) (raise-transport "unknown ~a ~s" what who))]
        [else who]))

;; file-id : path -> (or/c (cons dev inode) #f)
;; Identity of the file at path without following symlinks; #f if there is none.
(define (file-id path)
  (define st (lstat path))
  (and st (cons (hash-ref st 'device-id) (hash-ref st 'inode))))

;; lstat : path -> (or/c hash #f)
(define (lstat path)
  (with-handlers ([exn:fail:filesystem? (lambda (e) #f)])
    (file-or-directory-stat path #t)))

;; remove-stale-socket! : path bytes string -> void
;; A socket file left by a dead server refuses connections (ECONNREFUSED): remove it.
;; A live server, or anything that is not a socket, is left alone and reported.
(define (remove-stale-socket! path sa where)
  (define st (lstat path))
  (when st
    (unless (= #o140000 (bitwise-and (hash-ref st 'mode) #o170000))
      (raise-transport "cannot listen on ~a: the path exists and is not a socket" where))
    (define probe (c-socket AF_UNIX socket-flags 0))
    (check-syscall probe (format "cannot create a socket to probe ~a" where))
    (define r (c-connect probe sa (bytes-length sa)))
    (define errno (saved-errno))
    (c-close probe)
    (cond [(or (= r 0) (= errno EAGAIN))
           (raise-transport "another server is listening on ~a" where)]
          [(= errno ECONNREFUSED)
           (log-fastcgi-info "removing stale socket ~a" (log-escape where))
           (check-syscall (c-unlink path) (format "cannot remove stale socket ~a" where))]
          [else (raise-errno (format "cannot probe existing socket ~a" where) errno)])))

;; adopt-fd : fd -> listener
;; An inherited listening fd, made non-blocking and close-on-exec: no program the
;; application starts may hold it (an orphan would keep the port after we stop). A
;; standard descriptor (the FastCGI convention's fd 0) moves to a new close-on-exec number
;; and /dev/null takes its place, so a program started with our stdin gets /dev/null.
(define (adopt-fd fd)
  (unless (fd-listening-socket? fd)
    (raise-transport "fd:~a is not a listening socket" fd))
  (define held
    (cond
      [(<= fd 2)
       (define new (dup-cloexec fd))
       (when (pair? new) (raise-errno (format "cannot move fd:~a to a close-on-exec descriptor" fd) (car new)))
       (define r (null-onto! fd))
       (unless (eq? r #t)
         (c-close new)
         (raise-errno (format "cannot put /dev/null in the place of fd:~a" fd) r))
       new]
      [else
       (define r (set-cloexec! fd))
       (unless (eq? r #t) (raise-errno (format "cannot make fd:~a close-on-exec" fd) r))
       fd]))
  (define r (set-nonblocking! held))
  (unless (eq? r #t) (raise-errno (format "cannot make fd:~a non-blocking" fd) r))
  (make-listener held 'inherited (format "fd:~a" fd) #f #f))

;; make-listener : fd kind string (or/c path #f) (or/c pair #f) [(or/c uid #f)] -> listener
;; The current custodian's shutdown closes the listener (and removes its socket file).
(define (make-listener fd kind address unix-path unix-id [peer-uid #f])
  (define l (listener fd kind address unix-path unix-id peer-uid (make-semaphore 0) #f #f))
  (set-listener-cref! l (register-custodian-shutdown l listener-close!))
  l)

;; fd-listening-socket? : fd -> boolean
(define (fd-listening-socket? fd)
  (define v (getsockopt-int fd SOL_SOCKET SO_ACCEPTCONN))
  (and v (not (zero? v))))

;; inherited-listener : -> (or/c listener #f)
;; fd 0 when the web server spawned us with a listening socket as stdin; otherwise systemd
;; socket activation (its variables are removed so that our children do not act on them).
(define (inherited-listener)
  (define env (current-environment-variables))
  (define (getenv* name) (environment-variables-ref env name))
  (define listen-fds
    (let ([v (getenv* #"LISTEN_FDS")]) (and v (string->number (bytes->string/latin-1 v)))))
  (define for-us?
    (equal? (getenv* #"LISTEN_PID") (string->bytes/utf-8 (number->string (c-getpid)))))
  (cond
    [(fd-listening-socket? 0) (adopt-fd 0)]
    [(and for-us? (exact-positive-integer? listen-fds))
     (for ([name '(#"LISTEN_PID" #"LISTEN_FDS" #"LISTEN_FDNAMES")])
       (environment-variables-set! env name #f))
     (when (> listen-fds 1)
       (log-fastcgi-warning "LISTEN_FDS=~a: only fd 3 is used" listen-fds))
     (adopt-fd 3)]
    [else #f]))

;; ---------------------------------------------------------------------------------------
;; Accepting and closing

(define accept-flags (bitwise-ior SOCK_NONBLOCK SOCK_CLOEXEC))

;; listener-accept : listener -> (values input-port output-port string)
;; Blocks only the calling thread; see listener-accept-fd.
(define (listener-accept l)
  (define-values (fd peer) (listener-accept-fd l))
  (define-values (in out) (fd->ports fd peer))
  (values in out peer))

;; listener-accept-fd : listener -> (values fd string)
;; The next connection, as listener-try-accept gives it; blocks only the calling thread
;; until there is one. Raises once the listener is closed.
(define (listener-accept-fd l)
  (let loop ()
    (define-values (fd peer) (listener-try-accept l))
    (cond
      [fd (values fd peer)]
      [(eq? peer 'again) (wait-readable l) (loop)]
      [(eq? peer 'scarce) (sleep 0.1) (loop)]
      [(eq? peer 'closed) (raise-transport "listener ~a is closed" (listener-address l))]
      [else (raise peer)])))

;; listener-try-accept : listener -> (values (or/c fd #f) (or/c string symbol exn))
;; One accept that does not wait. A connection: its non-blocking, close-on-exec fd, which
;; the caller owns, and its peer ("unix", or the client's IP address; TCP_NODELAY is set
;; on TCP connections). Otherwise #f and why: 'again (none pending), 'closed (the listener
;; is), 'scarce (out of fds or memory: logged; try again later) or the exception for any
;; other failure. A private listener closes a connection from another user unseen. The closed check and accept4 run in atomic mode so that listener-close!
;; cannot close (and the kernel reuse) the fd in between.
(define (listener-try-accept l)
  (define fd (listener-fd l))
  (define sa (make-bytes SOCKADDR_MAX 0))
  (define len (integer->integer-bytes SOCKADDR_MAX 4 #f))
  (let loop ()
    (start-atomic)
    (define closed? (listener-closed? l))
    (define conn (cond
                   [closed? -1]
                   [else
                    (define fast (c-accept4/fast fd sa len accept-flags))
                    ;; failed: again, saving errno (a connection that came meanwhile is taken)
                    (if (>= fast 0) fast (c-accept4 fd sa len accept-flags))]))
    (define errno (if (>= conn 0) 0 (saved-errno)))
    (end-atomic)
    (cond
      [closed? (values #f 'closed)]
      [(and (>= conn 0) (not (peer-allowed? l conn)))
       (c-close/fast conn)
       (integer->integer-bytes SOCKADDR_MAX 4 #f #f len 0)
       (loop)]
      [(>= conn 0) (values conn (connection-peer conn sa))]
      [(= errno EAGAIN) (values #f 'again)]
      [(memv errno (list EINTR ECONNABORTED EPROTO))
       (integer->integer-bytes SOCKADDR_MAX 4 #f #f len 0)
       (loop)]
      [(memv errno (list EMFILE ENFILE ENOBUFS ENOMEM))
       (log-fastcgi-warning "accept on ~a: ~a; retrying in 0.1 s"
                            (listener-address l) (errno-message errno))
       (values #f 'scarce)]
      [else
       (values #f (exn:fail:fastcgi:transport
                   (format "fastcgi: accept on ~a failed: ~a" (listener-address l) (errno-message errno))
                   (current-continuation-marks)))])))

;; wait-readable : listener -> void
;; Returns when the fd is readable or the listener is closed.
(define (wait-readable l)
  (start-atomic)
  (define evt (and (not (listener-closed? l)) (unsafe-fd->evt (listener-fd l) 'read)))
  (end-atomic)
  (when evt (sync evt (semaphore-peek-evt (listener-closed-sema l)))))

;; connection-peer : fd bytes -> string
;; "unix", or the TCP peer's address (an IPv4-mapped IPv6 one as IPv4); sets TCP_NODELAY.
(define (connection-peer conn sa)
  (cond [(memv (sockaddr-family sa) (list AF_INET AF_INET6))
         (setsockopt-int conn IPPROTO_TCP TCP_NODELAY 1)
         (let-values ([(ip port) (sockaddr->ip+port sa)])
           (bytes->ip (unmap-ipv4 ip)))]
        [else "unix"]))

;; fd->ports : fd string -> (values input-port output-port)
;; Racket 8.7's unsafe-socket->port hands the raw fd to code expecting an rktio handle and
;; crashes on the first read, so sockets are wrapped as plain fd ports (closing both ports
;; closes the fd); unsafe-port->file-descriptor recovers the fd.
(define (fd->ports fd peer)
  (unsafe-file-descriptor->port fd (string->symbol peer) '(read write)))

;; socket-close! : fd -> void ; for an fd from listener-accept-fd that has no ports
(define (socket-close! fd)
  (c-close/fast fd)
  (void))

;; listener-close! : listener -> void
;; Events on the fd are removed (waking blocked accepts) before the fd is closed.
(define (listener-close! l)
  (start-atomic)
  (define was-open? (not (listener-closed? l)))
  (when was-open?
    (set-listener-closed?! l #t)
    ;; #f when the custodian was already shut down at the listener's creation
    (when (listener-cref l) (unregister-custodian-shutdown l (listener-cref l)))
    (unsafe-fd->evt (listener-fd l) 'remove)
    (c-close (listener-fd l))
    (semaphore-post (listener-closed-sema l)))
  (end-atomic)
  (define path (listener-unix-path l))
  (when (and was-open? path (equal? (file-id path) (listener-unix-id l)))
    (c-unlink path))
  (void))

;; socket-shutdown-write! : (or/c output-port fd) -> void
;; Flush (a port), then half-close, so the peer reads EOF and no reset; errors mean the
;; peer is gone.
(define (socket-shutdown-write! out)
  (cond
    [(exact-integer? out) (c-shutdown out SHUT_WR)]
    [else
     (with-handlers ([exn:fail? void])
       (flush-output out)
       (define fd (unsafe-port->file-descriptor out))
       (when fd (c-shutdown fd SHUT_WR)))])
  (void))

;; ---------------------------------------------------------------------------------------
;; Reading and writing a connected socket directly (the server's hot path): one read() or
;; send() per call, no fcntl and no readiness poll before it, unlike Racket's fd ports.
;; Neither call raises: callers run them in atomic mode (so that the fd cannot be closed
;; and reused in between) and raise the returned exception after leaving it.

;; socket-read! : fd bytes natural natural -> (or/c natural eof exn:fail:fastcgi:transport)
;; The bytes read into bs[start, end), 0 when none are available now, eof at the end.
(define (socket-read! fd bs start end)
  (define n (let ([n (c-read/fast fd (ptr-add bs start) (- end start))])
              (if (< n 0) (c-read fd (ptr-add bs start) (- end start)) n)))
  (cond
    [(> n 0) n]
    [(= n 0) eof]
    [else (socket-error "read" (saved-errno) (λ () (socket-read! fd bs start end)))]))

;; listener-queue-length : listener -> (or/c natural #f)
;; Connections waiting in a TCP listener's accept queue, from TCP_INFO, which gives a
;; listening socket's backlog as tcpi_unacked (as `ss -l` shows it); #f for a unix socket
;; (no such count) or when the call fails.
(define TCP_INFO 11)
(define TCP_LISTEN 10)
(define (listener-queue-length l)
  (define info (make-bytes 256 0))
  (define len (integer->integer-bytes 256 4 #f))
  (and (not (listener-closed? l))
       (= 0 (c-getsockopt (listener-fd l) IPPROTO_TCP TCP_INFO info len))
       (= TCP_LISTEN (bytes-ref info 0))          ; tcpi_state
       (integer-bytes->integer info #f #f 24 28))) ; tcpi_unacked

;; socket-input-pending? : fd -> boolean
;; Whether bytes from the peer wait unread in the socket (a peek that does not wait). No
;; means none came or the peer closed or failed: closing now sends no reset.
(define peek-byte (make-bytes 1))
(define (socket-input-pending? fd)
  (> (c-recv/fast fd peek-byte 1 (bitwise-ior MSG_PEEK MSG_DONTWAIT)) 0))

;; socket-write! : fd bytes natural natural -> (or/c natural exn:fail:fastcgi:transport)
;; The bytes of bs[start, end) sent, 0 when the socket's buffer is full. MSG_NOSIGNAL: a
;; peer that went away gives EPIPE, not a SIGPIPE.
(define (socket-write! fd bs start end)
  (define n (let ([n (c-send/fast fd (ptr-add bs start) (- end start) MSG_NOSIGNAL)])
              (if (< n 0) (c-send fd (ptr-add bs start) (- end start) MSG_NOSIGNAL) n)))
  (if (>= n 0)
      n
      (socket-error "write" (saved-errno) (λ () (socket-write! fd bs start end)))))

;; socket-write-records! : fd bytes natural bytes natural natural natural -> natural
;; What one sendmsg sent of k records, each an 8-byte header of heads (from h on) and n
;; bytes of bs (from start on): 0 when it failed, for any reason, or where there is no
;; c-sendrecs/fast (the caller goes on record by record).
(define (socket-write-records! fd heads h bs start n k)
  (if c-sendrecs/fast
      (max 0 (c-sendrecs/fast fd heads h bs start n k))
      0))

;; socket-error : string errno (-> any) -> any
;; EAGAIN: 0 (would block); EINTR: try again; any other errno: the exception to raise.
(define (socket-error what errno retry)
  (cond
    [(= errno EAGAIN) 0]
    [(= errno EINTR) (retry)]
    [else (exn:fail:fastcgi:transport (format "fastcgi: ~a: ~a" what (errno-message errno))
                                      (current-continuation-marks))]))

;; ---------------------------------------------------------------------------------------
;; Allowed clients

;; entries: (listof (cons address-bytes prefix-length)), IPv4-mapped IPv6 stored as IPv4
(struct allowed (entries))

;; unmap-ipv4 : bytes -> bytes
;; ::ffff:a.b.c.d becomes the 4-byte a.b.c.d; any other address is returned as is.
(define (unmap-ipv4 addr)
  (if (and (= 16 (bytes-length addr))
           (equal? (subbytes addr 0 12) #"\0\0\0\0\0\0\0\0\0\0\377\377"))
      (subbytes addr 12)
      addr))

;; parse-allowed-clients : string -> allowed
(define (parse-allowed-clients str)
  (define entries
    (filter-map parse-allowed-entry (string-split str #px"[,\\s]+")))
  (when (null? entries)
    (log-fastcgi-warning "allowed clients \"~a\": no valid address, every TCP client is denied"
                         (log-escape str)))
  (allowed entries))

;; parse-allowed-entry : string -> (or/c (cons bytes int) #f)
(define (parse-allowed-entry entry)
  (define m (regexp-match #px"^([^/]+)(?:/([0-9]{1,3}))?$" entry))
  (define addr (and m (ip->bytes (cadr m))))
  (define bits (and addr (* 8 (bytes-length addr))))
  (define prefix (and addr (if (caddr m) (string->number (caddr m)) bits)))
  (cond
    [(not (and prefix (<= prefix bits)))
     (log-fastcgi-warning "allowed clients: ignoring invalid entry \"~a\"" (log-escape entry))
     #f]
    [(and (= bits 128) (>= prefix 96) (= 4 (bytes-length (unmap-ipv4 addr))))
     (cons (unmap-ipv4 addr) (- prefix 96))]
    [else (cons addr prefix)]))

;; client-allowed? : allowed string -> boolean
(define (client-allowed? a peer)
  (or (equal? peer "unix")
      (let ([addr (ip->bytes peer)])
        (and addr
             (for/or ([entry (in-list (allowed-entries a))])
               (prefix-match? (car entry) (cdr entry) (unmap-ipv4 addr)))))))

;; prefix-match? : bytes int bytes -> boolean
(define (prefix-match? net prefix addr)
  (and (= (bytes-length net) (bytes-length addr))
       (let-values ([(whole rest) (quotient/remainder prefix 8)])
         (and (equal? (subbytes net 0 whole) (subbytes addr 0 whole))
              (or (zero? rest)
                  (let ([mask (bitwise-and #xff (arithmetic-shift #xff (- 8 rest)))])
                    (= (bitwise-and mask (bytes-ref net whole))
                       (bitwise-and mask (bytes-ref addr whole)))))))))
