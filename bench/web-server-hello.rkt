#lang racket/base
;; Racket's own web-server answering hello world over HTTP, the way a Racket user serves
;; today; the bench puts it behind nginx proxy_pass with HTTP/1.1 keepalive.
;;   racket bench/web-server-hello.rkt PORT
(require web-server/http
         web-server/servlet-env)

(define (start req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out))
                   #:mime-type #"text/plain"))

(module+ main
  (serve/servlet start
                 #:port (string->number (vector-ref (current-command-line-arguments) 0))
                 #:listen-ip "127.0.0.1"
                 #:servlet-regexp #rx""
                 #:command-line? #t
                 #:launch-browser? #f))
