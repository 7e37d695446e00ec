#lang racket/base
;; Passing a kept connection to another worker of the pool, so that a worker that is
;; replaced (a reload, a recycle) never closes a connection the front may be using.
;;
;; Why: a front that keeps connections (nginx with upstream keepalive, HAProxy) may send
;; a request on an idle kept connection at the very moment the worker closes it; the
;; request then meets a closed connection, and the front retries it elsewhere only when
;; it is idempotent (nginx never retries a POST that it has sent). No close of an idle
;; kept connection is free of that race, so a retiring worker does not close one: it
;; sends the socket itself (SCM_RIGHTS), with the bytes of a record it has begun to read,
;; to a sibling that serves the pool's code, and forgets it. Whatever the front sent or
;; sends meanwhile waits in the socket for the new owner.
;;
;; Each worker of a manager receives on a unix socket of the abstract namespace (no file
;; that a cleanup of /tmp could remove), named after the manager's pid and the worker's
;; id; such a socket has no permissions, so each end checks the other's user
;; (SO_PEERCRED): a sender whose uid is not ours is refused, and a connection is never
;; sent to a name that another user's process holds.
;; One SOCK_SEQPACKET connection per connection handed over, carrying one message:
;; the descriptor, and as data the peer's length (2 bytes), the peer, the pending bytes.
(require ffi/unsafe
         ffi/unsafe/port
         "ffi.rkt"
         "../util/log.rkt")
(provide handover-address
         start-handover-receiver!
         hand-over!)

(define SOCK_SEQPACKET 5)
(define SCM_RIGHTS 1)
(define MSG_CMSG_CLOEXEC #x40000000)
(define MSG_CTRUNC #x8)

(define-libc c-sendmsg "sendmsg" _int _pointer _int -> _ssize)
(define-libc c-recvmsg "recvmsg" _int _pointer _int -> _ssize)

;; The largest message: a peer's text and a partly read record (header, content, padding).
(define max-message (+ 2 1024 8 65535 255))

;; handover-address : natural natural -> bytes ; the abstract name of a worker's receiver
(define (handover-address manager-pid worker-id)
  (bytes-append #"\0" (string->bytes/utf-8 (format "fastcgi-handover-~a-~a" manager-pid worker-id))))

;; hand-over! : fd string bytes (listof bytes) -> boolean
;; Sends fd (with peer and pending) to the first of addresses that takes it. #t: a sibling
;; has it (the caller closes its own copy and forgets the connection); #f: none did.
;; Never waits: a sibling whose queue is full counts as one that is not there.
(define (hand-over! fd peer pending addresses)
  (define peer-bytes (let ([b (string->bytes/utf-8 peer)])
                       (if (> (bytes-length b) 1024) (subbytes b 0 1024) b)))
  (define data (bytes-append (integer->integer-bytes (bytes-length peer-bytes) 2 #f #t)
                             peer-bytes pending))
  (for/or ([a (in-list addresses)])
    (send-one a fd data)))

;; send-one : bytes fd bytes -> boolean
(define (send-one address fd data)
  (define s (c-socket AF_UNIX (bitwise-ior SOCK_SEQPACKET SOCK_NONBLOCK SOCK_CLOEXEC) 0))
  (and (>= s 0)
       (begin0
         (and (= 0 (c-connect s (make-sockaddr-un address) 110))
              ;; a name of the abstract namespace has no permissions: another user could
              ;; hold a worker's name; a connection goes only to a process of our own user
              (same-user? s)
              (with-message data 24
                (λ (msg control)
                  (ptr-set! control _size 0 20)       ; cmsg_len = CMSG_LEN(sizeof(int))
                  (ptr-set! control _int 2 SOL_SOCKET)
                  (ptr-set! control _int 3 SCM_RIGHTS)
                  (ptr-set! control _int 4 fd)
                  (= (bytes-length data)
                     (c-sendmsg s msg (bitwise-ior MSG_NOSIGNAL MSG_DONTWAIT))))))
         (c-close s))))

;; with-message : bytes natural (pointer pointer -> any) -> any
;; A struct msghdr with one iovec over a copy of data (or room for max-message bytes when
;; data is #f) and control-size bytes of control data, in memory the collector does not
;; move, freed afterwards.
(define (with-message data control-size proc)
  (define size (if data (bytes-length data) max-message))
  (define buf (malloc (max 1 size) 'raw))
  (define iov (malloc 16 'raw))
  (define control (malloc control-size 'raw))
  (define msg (malloc 56 'raw))
  (dynamic-wind
   void
   (λ ()
     (memset control 0 control-size)
     (memset msg 0 56)
     (when data (memcpy buf data size))
     (ptr-set! iov _pointer 0 buf)
     (ptr-set! iov _size 1 size)
     (ptr-set! msg _pointer 2 iov)            ; msg_iov
     (ptr-set! msg _size 3 1)                 ; msg_iovlen
     (ptr-set! msg _pointer 4 control)        ; msg_control
     (ptr-set! msg _size 5 control-size)      ; msg_controllen
     (proc msg control))
   (λ () (free buf) (free iov) (free control) (free msg))))

;; start-handover-receiver! : bytes (fd string bytes -> any) -> (or/c thread #f)
;; Listens on address; each connection handed over goes to adopt! (which owns the fd from
;; then on). #f (and a warning) when the address cannot be bound: a retiring sibling then
;; hands its connections to another worker, or closes those that none takes.
(define (start-handover-receiver! address adopt!)
  (define s (c-socket AF_UNIX (bitwise-ior SOCK_SEQPACKET SOCK_NONBLOCK SOCK_CLOEXEC) 0))
  (cond
    [(or (< s 0)
         (not (= 0 (c-bind s (make-sockaddr-un address) 110)))
         (not (= 0 (c-listen s 64))))
     (log-fastcgi-warning "cannot receive connections from retiring workers: ~a"
                          (errno-message (saved-errno)))
     (when (>= s 0) (c-close s))
     #f]
    [else (thread (λ () (receive-loop s adopt!)))]))

;; receive-loop : fd (fd string bytes -> any) -> none
;; Waits on a socket semaphore (rktio's epoll set, as poller.rkt does), not on
;; unsafe-fd->evt: Racket polls an fd event on every pass of its scheduler, and this thread
;; waits in every pool worker for the whole of its life (the cost is measured in
;; bench/OPTIMISATIONS.md, CPU per request since 0570f9e).
(define (receive-loop s adopt!)
  (let loop ()
    (define c (c-accept4 s #f #f (bitwise-ior SOCK_NONBLOCK SOCK_CLOEXEC)))
    (cond
      [(< c 0) (sync (unsafe-socket->semaphore s 'read))]
      [(not (same-user? c))
       (log-fastcgi-warning "refused a connection handed over by another user")
       (c-close c)]
      [else
       (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "receiving a connection handed over: ~a"
                                                           (log-escape (exn-message e))))])
         (receive-one c adopt!))
       (unsafe-fd->evt c 'remove)
       (c-close c)])
    (loop)))

;; same-user? : fd -> boolean ; is the process at the other end of ours (SO_PEERCRED)?
(define (same-user? fd)
  (define cred (peer-credentials fd))
  (and cred (= (cadr cred) (c-geteuid))))

;; receive-one : fd (fd string bytes -> any) -> void
;; The one message of a sender (waiting a little for it: it is sent right after connect).
(define (receive-one c adopt!)
  (define ready (unsafe-fd->evt c 'read))
  (let loop ([tries 0])
    (define got
      (with-message #f 24
        (λ (msg control)
          (define n (c-recvmsg c msg (bitwise-ior MSG_DONTWAIT MSG_CMSG_CLOEXEC)))
          (cond
            [(< n 0) 'again]
            [else
             (define fd (and (>= (ptr-ref msg _size 5) 20)
                             (= (ptr-ref control _int 2) SOL_SOCKET)
                             (= (ptr-ref control _int 3) SCM_RIGHTS)
                             (ptr-ref control _int 4)))
             (define buf (ptr-ref (ptr-ref msg _pointer 2) _pointer 0))
             (define data (make-bytes n))
             (memcpy data buf n)
             (cond
               [(not fd) 'nothing]
               [(or (< n 2) (not (zero? (bitwise-and (ptr-ref msg _int 12) MSG_CTRUNC))))
                (c-close fd)
                'nothing]
               [else (list fd data)])]))))
    (cond
      [(pair? got)
       (define data (cadr got))
       (define len (integer-bytes->integer data #f #t 0 2))
       (adopt! (car got)
               (bytes->string/utf-8 (subbytes data 2 (+ 2 len)) #\?)
               (subbytes data (+ 2 len)))]
      [(and (eq? got 'again) (< tries 100))
       (sync/timeout 0.05 ready)
       (loop (add1 tries))]
      [else (void)])))
