#lang racket/base
;; A notify socket of the test's own, standing in for systemd's (PID 1 here is not
;; systemd): an AF_UNIX datagram socket bound to a path, or to "@name" in the abstract
;; namespace, with SO_PASSCRED on, so that the kernel tells which process sent each
;; datagram (SCM_CREDENTIALS), as it tells systemd. A thread keeps every datagram
;; received, in order; the test waits for the ones it expects, each wait bounded.
(require ffi/unsafe
         ffi/unsafe/port
         "../../fastcgi/private/os/ffi.rkt")
(provide open-notify-socket
         close-notify-socket!
         notify-datagrams
         wait-for-datagram
         (struct-out datagram)
         test-monotonic-usec)

(define SOCK_DGRAM 2)
(define SO_PASSCRED 16)
(define SCM_CREDENTIALS 2)
(define CLOCK_MONOTONIC 1)

(define-libc c-recvmsg "recvmsg" _int _pointer _int -> _ssize)
(define-libc c-clock-gettime "clock_gettime" _int _bytes -> _int)

;; pid: the sender's, from its credentials (#f if none came); text: the datagram
(struct datagram (pid text) #:transparent)

;; fd; got: the datagrams so far, newest first; lock; the reader thread; closed?
(struct notify-socket (fd [got #:mutable] lock reader [closed? #:mutable #:auto]) #:auto-value #f)

;; open-notify-socket : string -> notify-socket ; a path, or "@name" (abstract)
(define (open-notify-socket address)
  (define fd (c-socket AF_UNIX (bitwise-ior SOCK_DGRAM SOCK_CLOEXEC SOCK_NONBLOCK) 0))
  (when (< fd 0) (error 'notify-socket "socket: ~a" (errno-message (saved-errno))))
  (unless (eq? #t (setsockopt-int fd SOL_SOCKET SO_PASSCRED 1))
    (error 'notify-socket "SO_PASSCRED: ~a" (errno-message (saved-errno))))
  (define b (string->bytes/utf-8 address))
  (define sa (if (regexp-match? #rx#"^@" b)
                 (subbytes (make-sockaddr-un (bytes-append #"\0" (subbytes b 1))) 0 (+ 2 (bytes-length b)))
                 (make-sockaddr-un b)))
  (when (< (c-bind fd sa (bytes-length sa)) 0)
    (error 'notify-socket "bind ~a: ~a" address (errno-message (saved-errno))))
  (define ns-box (box #f))
  (define ns (notify-socket fd '() (make-semaphore 1)
                            (thread (λ () (read-loop (unbox ns-box))))))
  (set-box! ns-box ns)
  ns)

;; close-notify-socket! : notify-socket -> void ; once (a second time does nothing)
(define (close-notify-socket! ns)
  (unless (notify-socket-closed? ns)
    (set-notify-socket-closed?! ns #t)
    (kill-thread (notify-socket-reader ns))
    (c-close (notify-socket-fd ns))
    (void)))

;; notify-datagrams : notify-socket -> (listof datagram) ; oldest first
(define (notify-datagrams ns)
  (call-with-semaphore (notify-socket-lock ns) (λ () (reverse (notify-socket-got ns)))))

;; wait-for-datagram : notify-socket natural (datagram -> any) seconds string -> natural
;; The index of the first datagram at or after from that satisfies ok?; fails with what,
;; and the datagrams seen, after secs. Polls every 20 ms.
(define (wait-for-datagram ns from ok? secs what)
  (define deadline (+ (current-inexact-monotonic-milliseconds) (* 1000 secs)))
  (let loop ()
    (define all (notify-datagrams ns))
    (define i (for/first ([d (in-list (if (> from (length all)) '() (list-tail all from)))]
                          [i (in-naturals from)]
                          #:when (ok? d))
                i))
    (cond
      [i i]
      [(> (current-inexact-monotonic-milliseconds) deadline)
       (error 'notify-socket "timed out after ~a s waiting for ~a; datagrams from ~a on: ~s"
              secs what from (if (> from (length all)) '() (list-tail all from)))]
      [else (sleep 0.02) (loop)])))

;; read-loop : notify-socket -> none
(define (read-loop ns)
  (define fd (notify-socket-fd ns))
  (define data (malloc 4096 'raw))
  (define control (malloc 64 'raw))
  (define iov (malloc 16 'raw))
  (define msg (malloc 56 'raw))
  (ptr-set! iov _pointer 0 data)
  (ptr-set! iov _size 1 4096)
  (let loop ()
    ;; struct msghdr: name, namelen, iov, iovlen, control, controllen, flags
    (memset msg 0 56)
    (ptr-set! msg _pointer 2 iov)
    (ptr-set! msg _size 3 1)
    (ptr-set! msg _pointer 4 control)
    (ptr-set! msg _size 5 64)
    (memset control 0 64)
    (define n (c-recvmsg fd msg MSG_DONTWAIT))
    (cond
      [(>= n 0)
       (define text (bytes->string/utf-8 (make-sized-byte-string* data n) #\?))
       ;; struct cmsghdr: len (size_t), level, type (int); then struct ucred: pid, uid, gid
       (define pid (and (>= (ptr-ref msg _size 5) 28)
                        (= (ptr-ref control _int 2) SOL_SOCKET)
                        (= (ptr-ref control _int 3) SCM_CREDENTIALS)
                        (ptr-ref control _int 4)))
       (call-with-semaphore (notify-socket-lock ns)
                            (λ () (set-notify-socket-got! ns (cons (datagram pid text) (notify-socket-got ns)))))]
      [else (sync (unsafe-fd->evt fd 'read))])
    (loop)))

;; make-sized-byte-string* : cpointer natural -> bytes ; a fresh copy
(define (make-sized-byte-string* p n)
  (define b (make-bytes n))
  (memcpy b p n)
  b)

;; test-monotonic-usec : -> natural ; this process's reading of CLOCK_MONOTONIC
(define (test-monotonic-usec)
  (define ts (make-bytes 16 0))
  (c-clock-gettime CLOCK_MONOTONIC ts)
  (+ (* 1000000 (integer-bytes->integer ts #t #f 0 8))
     (quotient (integer-bytes->integer ts #t #f 8 16) 1000)))
