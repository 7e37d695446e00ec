#lang racket/base
;; A listening socket once open, whatever opened it (open-listener.rkt, inherited-socket.rkt,
;; private-socket.rkt): accepting its connections, without blocking other Racket threads,
;; and closing it. The server takes accepted connections as bare fds (it reads and writes
;; them through the FFI, socket-io.rkt); other callers get ordinary Racket ports.
(require ffi/unsafe
         ffi/unsafe/atomic
         ffi/unsafe/custodian
         ffi/unsafe/port
         "../os/ffi.rkt"
         "../util/log.rkt"
         "transport-exn.rkt")
(provide listener? listener-fd listener-kind listener-address
         make-listener
         listener-accept listener-accept-fd listener-try-accept listener-close!
         listener-queue-length
         fd->ports
         file-id
         lstat)

;; unix-path and unix-id (device . inode) are set only for a socket file we bound ourselves.
;; peer-uid: #f, or the only user whose connections are accepted (a private socket).
;; cref: the registration with the custodian, whose shutdown closes the listener.
(struct listener (fd kind address unix-path unix-id peer-uid closed-sema [closed? #:mutable]
                  [cref #:mutable]))

;; make-listener : fd kind string (or/c path #f) (or/c pair #f) [(or/c uid #f)] -> listener
;; The current custodian's shutdown closes the listener (and removes its socket file).
(define (make-listener fd kind address unix-path unix-id [peer-uid #f])
  (define l (listener fd kind address unix-path unix-id peer-uid (make-semaphore 0) #f #f))
  (set-listener-cref! l (register-custodian-shutdown l listener-close!))
  l)

;; file-id : path -> (or/c (cons dev inode) #f)
;; Identity of the file at path without following symlinks; #f if there is none.
(define (file-id path)
  (define st (lstat path))
  (and st (cons (hash-ref st 'device-id) (hash-ref st 'inode))))

;; lstat : path -> (or/c hash #f)
(define (lstat path)
  (with-handlers ([exn:fail:filesystem? (lambda (e) #f)])
    (file-or-directory-stat path #t)))

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
;; other failure. A private listener closes a connection from another user unseen. The
;; closed check and accept4 run in atomic mode so that listener-close! cannot close (and
;; the kernel reuse) the fd in between.
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
