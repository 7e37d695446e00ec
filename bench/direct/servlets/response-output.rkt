#lang racket/base
;; examples/hello.rkt's servlet: response/output on every request (web-server's contracted
;; constructor, as a servlet calls it).
(require web-server/http)
(provide start)
(define (start req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out)) #:mime-type #"text/plain"))
