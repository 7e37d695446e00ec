#lang racket/base
;; The out-of-band collection bench's app (bench/oob-gc.rkt): a servlet whose requests
;; leave garbage that outlives the young generation, as a cache or sessions do. Each
;; request builds a table of rows and keeps it in a ring of the last ring-size tables, so
;; each table lives for ring-size requests and then dies in an old generation, which only
;; a major collection gives back (a shorter life ends in a younger generation, which the
;; runtime's minor collections reclaim, and the bench would measure no major at all). It
;; answers "Hello, World!\n" as text/plain (the bench's
;; check that a backend answers).
;;   raco fastcgi serve bench/apps/alloc-servlet.rkt --listen unix:/tmp/alloc.sock
(require web-server/http)
(provide start)

(define ring-size 8000)
(define rows-per-request 40)

(define ring (make-vector ring-size #f))
(define next 0)

(define (start req)
  (define table
    (for/list ([i (in-range rows-per-request)])
      (vector i (number->string i) (make-bytes 64 (modulo i 256)))))
  (vector-set! ring next table)
  (set! next (modulo (add1 next) ring-size))
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out))
                   #:mime-type #"text/plain"))
