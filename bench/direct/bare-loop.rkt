#lang racket/base
;; racket bench/direct/bare-loop.rkt unix:PATH : the floor of a Racket FastCGI backend, for
;; comparison only (bench/ab.rkt takes it as a variant: NAME=bench/direct/bare-loop.rkt).
;; One Racket thread: epoll_wait blocking in C, one read() per readable connection, and a
;; canned hello answer with the request's id in one send(). No Racket scheduler, ports,
;; record decoding, params, limits or handler: it answers correctly only a front that
;; sends each whole request in one piece and one request at a time, as nginx does for
;; hello world, and keeps each connection until the front closes it (keep-conn rows
;; only). What separates it from the C responder is Racket itself; what separates
;; `fastcgi` from it is the engine's work (round 11 of bench/OPTIMISATIONS.md as of c223f0c).
(require ffi/unsafe)

(define path (regexp-replace #rx"^unix:" (vector-ref (current-command-line-arguments) 0) ""))
(define-syntax-rule (define-libc name c-name type) (define name (get-ffi-obj c-name #f type)))
(define-libc c-socket "socket" (_fun _int _int _int -> _int))
(define-libc c-bind "bind" (_fun _int _bytes _int -> _int))
(define-libc c-listen "listen" (_fun _int _int -> _int))
(define-libc c-accept4 "accept4" (_fun _int _pointer _pointer _int -> _int))
(define-libc c-epoll-create1 "epoll_create1" (_fun _int -> _int))
(define-libc c-epoll-ctl "epoll_ctl" (_fun _int _int _int _pointer -> _int))
(define-libc c-epoll-wait "epoll_wait" (_fun #:blocking? #t _int _pointer _int _int -> _int))
(define-libc c-read "read" (_fun _int _bytes _size -> _ssize))
(define-libc c-send "send" (_fun _int _bytes _size _int -> _ssize))
(define-libc c-close "close" (_fun _int -> _int))

(define AF_UNIX 1)
(define SOCK_STREAM 1)
(define SOCK_CLOEXEC #o2000000)
(define SOCK_NONBLOCK #o4000)
(define EPOLLIN 1)
(define EPOLL_CTL_ADD 1)
(define MSG_NOSIGNAL #x4000)

(define address (make-bytes 110 0))     ; struct sockaddr_un
(bytes-set! address 0 AF_UNIX)
(bytes-copy! address 2 (string->bytes/utf-8 path))
(define listener (c-socket AF_UNIX (bitwise-ior SOCK_STREAM SOCK_CLOEXEC) 0))
(unless (zero? (c-bind listener address 110)) (error 'bare-loop "cannot bind ~a" path))
(void (c-listen listener 1024))

(define epfd (c-epoll-create1 0))
(define event (malloc 12 'raw))         ; struct epoll_event, packed
(define (watch! fd)
  (ptr-set! event _uint32 'abs 0 EPOLLIN)
  (ptr-set! event _int32 'abs 4 fd)
  (void (c-epoll-ctl epfd EPOLL_CTL_ADD fd event)))
(watch! listener)
(define events (malloc (* 12 64) 'raw))
(define buf (make-bytes 65536))

;; STDOUT with the hello answer (padded to 8), the empty STDOUT, END_REQUEST; request id 1
(define answer
  (let* ([body #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n"]
         [n (bytes-length body)]
         [pad (modulo (- 8 (modulo n 8)) 8)])
    (bytes-append (bytes 1 6 0 1 (quotient n 256) (modulo n 256) pad 0) body (make-bytes pad 0)
                  (bytes 1 6 0 1 0 0 0 0)
                  (bytes 1 3 0 1 0 8 0 0 0 0 0 0 0 0 0 0))))
(define tail (- (bytes-length answer) 24))
(define id-offsets (list 2 (+ tail 2) (+ tail 10)))

(let loop ()
  (define n (c-epoll-wait epfd events 64 -1))
  (for ([i (in-range n)])
    (define fd (ptr-ref events _int32 'abs (+ (* i 12) 4)))
    (cond
      [(= fd listener)
       (define c (c-accept4 listener #f #f (bitwise-ior SOCK_NONBLOCK SOCK_CLOEXEC)))
       (when (>= c 0) (watch! c))]
      [else
       (define got (c-read fd buf 65536))
       (cond
         [(> got 0)
          ;; the request id of the first record read (BEGIN_REQUEST)
          (for ([at (in-list id-offsets)])
            (bytes-set! answer at (bytes-ref buf 2))
            (bytes-set! answer (add1 at) (bytes-ref buf 3)))
          (void (c-send fd answer (bytes-length answer) MSG_NOSIGNAL))]
         [(= got 0) (void (c-close fd))]
         [else (void)])]))
  (loop))
