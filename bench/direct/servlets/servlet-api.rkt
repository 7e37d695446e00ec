#lang racket/base
;; examples/hello.rkt's answer from a module that requires web-server/servlet (as most
;; servlets do): the process then has web-server's continuation API, and the servlet runs
;; under the servlet prompt and parameters (fastcgi/private/servlet/servlet.rkt) though it never
;; captures a continuation.
(require web-server/servlet)
(provide start)
(define (start req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out)) #:mime-type #"text/plain"))
