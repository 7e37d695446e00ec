#lang racket/base
;; The same answer by web-server's response constructor without its contract (the
;; module's private submodule, which web-server's own code uses).
(require (submod web-server/http/response-structs private))
(provide start)
(define (start req)
  (response 200 #"OK" (current-seconds) #"text/plain" '()
            (λ (out) (write-bytes #"Hello, World!\n" out))))
