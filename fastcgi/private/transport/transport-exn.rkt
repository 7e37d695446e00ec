#lang racket/base
;; The transport layer's exception, exn:fail:fastcgi:transport, and the helpers that raise
;; it (with errno's message when a libc call failed).
(require ffi/unsafe
         "../os/ffi.rkt")
(provide (struct-out exn:fail:fastcgi:transport)
         raise-transport
         raise-errno
         check-syscall)

(struct exn:fail:fastcgi:transport exn:fail ())

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
