#lang racket/base
;; A servlet that calls exit on /exit (after capturing a continuation on /suspend-exit's
;; resumption); any other path answers normally.
(require net/url
         web-server/servlet)
(provide start)

(define (start req)
  (define path (url->string (request-uri req)))
  (cond
    [(regexp-match? #rx"^/exit" path) (exit 3)]
    [(regexp-match? #rx"^/suspend-exit" path)
     (send/suspend (λ (k-url) (response/xexpr `(html (body (a ([href ,k-url]) "exit"))))))
     (exit 0)]
    [else (response/xexpr `(html (head (title "Alive")) (body (p "still serving"))))]))
