#lang racket/base
;; The libc bindings (fastcgi/private/os/ffi.rkt): define-libc with and without saving errno,
;; the descriptor flags set through fcntl, and IPv4-mapped addresses.
(require ffi/unsafe
         rackunit
         "../fastcgi/private/os/ffi.rkt")

(define-libc close/errno "close" _int -> _int)
(define-libc close/no-errno "close" #:no-errno _int -> _int)
(define-libc c-pipe "pipe" _bytes -> _int)
(define-libc c-fcntl "fcntl" #:no-errno #:varargs-after 2 _int _int _int -> _int)
(define EBADF 9)
(define F_GETFD 1)
(define F_GETFL 3)
(define O_NONBLOCK #o4000)
(define FD_CLOEXEC 1)

(test-case "define-libc saves errno; with #:no-errno it leaves it alone"
  (saved-errno 0)
  (check-equal? (close/errno -1) -1)
  (check-equal? (saved-errno) EBADF)
  (saved-errno 0)
  (check-equal? (close/no-errno -1) -1)
  (check-equal? (saved-errno) 0))

(test-case "set-nonblocking! and set-cloexec! add their flag and keep the others"
  (define fds (make-bytes 8))
  (check-equal? (c-pipe fds) 0)
  (define r (integer-bytes->integer fds #t #f 0 4))
  (define w (integer-bytes->integer fds #t #f 4 8))
  (check-equal? (bitwise-and (c-fcntl r F_GETFL 0) O_NONBLOCK) 0)
  (check-equal? (bitwise-and (c-fcntl r F_GETFD 0) FD_CLOEXEC) 0)
  (define access-mode (bitwise-and (c-fcntl r F_GETFL 0) 3))
  (check-true (set-nonblocking! r))
  (check-equal? (bitwise-and (c-fcntl r F_GETFL 0) O_NONBLOCK) O_NONBLOCK)
  (check-equal? (bitwise-and (c-fcntl r F_GETFL 0) 3) access-mode)
  (check-equal? (bitwise-and (c-fcntl r F_GETFD 0) FD_CLOEXEC) 0 "only its own flag")
  (check-true (set-cloexec! r))
  (check-equal? (bitwise-and (c-fcntl r F_GETFD 0) FD_CLOEXEC) FD_CLOEXEC)
  (check-equal? (bitwise-and (c-fcntl r F_GETFL 0) O_NONBLOCK) O_NONBLOCK)
  (check-equal? (bitwise-and (c-fcntl w F_GETFL 0) O_NONBLOCK) 0 "the other end untouched")
  (c-close r)
  (c-close w)
  (check-equal? (set-nonblocking! r) EBADF "a closed fd: its errno")
  (check-equal? (set-cloexec! r) EBADF))

(test-case "unmap-ipv4: ::ffff:a.b.c.d is a.b.c.d; any other address as is"
  (for ([row (in-list '(("::ffff:10.1.2.3" "10.1.2.3")
                        ("::ffff:127.0.0.1" "127.0.0.1")
                        ("10.1.2.3" "10.1.2.3")
                        ("::1" "::1")
                        ("::fffe:10.1.2.3" "::fffe:a01:203")
                        ("2001:db8::ffff:10.1.2.3" "2001:db8::ffff:a01:203")))])
    (check-equal? (bytes->ip (unmap-ipv4 (ip->bytes (car row)))) (cadr row) (car row))))
