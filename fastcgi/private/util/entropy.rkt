#lang racket/base
;; Secret random bytes (keys, the control socket's name), from the kernel's generator.
;; Not racket/random's crypto-random-bytes, which does the same on Linux but loads
;; racket/contract into the manager and the workers (jsexpr.rkt says why that matters).
(provide random-bytes)

;; random-bytes : exact-positive-integer -> bytes
(define (random-bytes n)
  (define b (call-with-input-file "/dev/urandom" (λ (in) (read-bytes n in))))
  (unless (and (bytes? b) (= (bytes-length b) n))
    (error 'random-bytes "could not read ~a bytes from /dev/urandom" n))
  b)
