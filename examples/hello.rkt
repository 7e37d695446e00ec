#lang racket/base
;; The smallest app: `Hello, World!` as text/plain on every path.
;;   raco fastcgi serve examples/hello.rkt --listen unix:/tmp/hello.sock
;;   raco fastcgi dev examples/hello.rkt
(require web-server/http)
(provide start)

(define (start req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out))
                   #:mime-type #"text/plain"))
