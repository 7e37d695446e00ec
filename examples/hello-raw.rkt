#lang racket/base
;; Hello world on the raw interface: params in, CGI answer out, no web-server structs.
;;   raco fastcgi serve examples/hello-raw.rkt --listen unix:/tmp/hello.sock
(require fastcgi)
(provide fastcgi-handler)

(define answer #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n")

(define (fastcgi-handler req)
  (write-bytes answer (fastcgi-request-stdout req)))
