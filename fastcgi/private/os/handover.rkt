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
;; the descriptor, and as data what the connection awaits (1 byte), whether a record and a
;; BEGIN_REQUEST were read on it (1 byte), the ms its deadline has left (4 bytes), the
;; peer's length (2 bytes), the peer, the pending bytes.
;;
;; The deadline goes as the ms it has left, not as the moment it falls: now-ms's origin
;; is each process's start (clock.rkt), and the kernel's CLOCK_MONOTONIC, the one clock
;; both processes share, would be read on both sides only to count the message's way from
;; sendmsg to the receiving thread, which is short next to any timeout (whole seconds).
;; A handover must neither renew a deadline (a peer that never sends a byte would keep
;; its connection for as long as workers recycle) nor shorten one.
(require ffi/unsafe
         ffi/unsafe/port
         "ffi.rkt"
         "../util/log.rkt")
(provide handover-address
         (struct-out handed)
         start-handover-receiver!
         hand-over!)

;; What a connection takes to its new owner besides its socket and peer: the bytes read
;; of a record begun (pending), what it awaits ('first-byte, 'read, 'idle; #f: nothing)
;; and the ms its deadline has left (#f: none), whether a whole record (served?) and a
;; BEGIN_REQUEST (begun?) were read on it. It has no live request (the sender's rule), so
;; nothing more of it bounds it.
(struct handed (pending awaiting left-ms served? begun?) #:transparent)

;; what a connection awaits, by its number in the message
(define awaited '#(#f first-byte read idle drain))
(define no-deadline #xFFFFFFFF)

(define SOCK_SEQPACKET 5)
(define SCM_RIGHTS 1)
(define MSG_CMSG_CLOEXEC #x40000000)
(define MSG_CTRUNC #x8)

(define-libc c-sendmsg "sendmsg" _int _pointer _int -> _ssize)
(define-libc c-recvmsg "recvmsg" _int _pointer _int -> _ssize)

;; The largest message: the state, a peer's text and a partly read record (header,
;; content, padding).
(define max-message (+ 6 2 1024 8 65535 255))

;; handover-address : string natural -> bytes ; the abstract name of a worker's receiver
;; Named by the pool's prefix (control.rkt: the manager's pid and random bytes), not by the
;; manager's pid alone: abstract names are shared by the network namespace, and two
;; managers that are each PID 1 of a container on the host's network have the same pid.
(define (handover-address pool-prefix worker-id)
  (bytes-append #"\0" (string->bytes/utf-8 (format "~a/handover-~a" pool-prefix worker-id))))

;; hand-over! : fd string handed (listof bytes) -> boolean
;; Sends fd (with peer and h) to the first of addresses that takes it. #t: a sibling has it
;; (the caller closes its own copy and forgets the connection); #f: none did.
;; Never waits: a sibling whose queue is full counts as one that is not there.
(define (hand-over! fd peer h addresses)
  (define data (encode-handed peer h))
  (for/or ([a (in-list addresses)])
    (send-one a fd data)))

;; encode-handed : string handed -> bytes ; the message's data
(define (encode-handed peer h)
  (define peer-bytes (let ([b (string->bytes/utf-8 peer)])
                       (if (> (bytes-length b) 1024) (subbytes b 0 1024) b)))
  (define left (handed-left-ms h))
  (bytes-append (bytes (for/first ([a (in-vector awaited)] [i (in-naturals)]
                                   #:when (eq? a (handed-awaiting h)))
                         i)
                       (+ (if (handed-served? h) 1 0) (if (handed-begun? h) 2 0)))
                (integer->integer-bytes (if left (min left (sub1 no-deadline)) no-deadline) 4 #f #t)
                (integer->integer-bytes (bytes-length peer-bytes) 2 #f #t)
                peer-bytes
                (handed-pending h)))

;; decode-handed : bytes -> (or/c (cons string handed) #f) ; #f: not a message of ours
(define (decode-handed data)
  (define n (bytes-length data))
  (define len (and (>= n 8) (integer-bytes->integer data #f #t 6 8)))
  (and len
       (<= (+ 8 len) n)
       (< (bytes-ref data 0) (vector-length awaited))
       (let ([left (integer-bytes->integer data #f #t 2 6)]
             [flags (bytes-ref data 1)])
         (cons (bytes->string/utf-8 (subbytes data 8 (+ 8 len)) #\?)
               (handed (subbytes data (+ 8 len))
                       (vector-ref awaited (bytes-ref data 0))
                       (and (not (= left no-deadline)) left)
                       (bitwise-bit-set? flags 0)
                       (bitwise-bit-set? flags 1))))))

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

;; start-handover-receiver! : bytes (fd string handed -> any) -> (or/c thread #f)
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

;; receive-loop : fd (fd string handed -> any) -> none
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

;; receive-one : fd (fd string handed -> any) -> void
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
             (define peer+h (decode-handed data))
             (cond
               [(not fd) 'nothing]
               [(or (not peer+h) (not (zero? (bitwise-and (ptr-ref msg _int 12) MSG_CTRUNC))))
                (c-close fd)
                'nothing]
               [else (list fd peer+h)])]))))
    (cond
      [(pair? got) (adopt! (car got) (car (cadr got)) (cdr (cadr got)))]
      [(and (eq? got 'again) (< tries 100))
       (sync/timeout 0.05 ready)
       (loop (add1 tries))]
      [else (void)])))
