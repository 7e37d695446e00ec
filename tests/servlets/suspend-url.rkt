#lang racket/base
;; send/suspend/url: the continuation as a url struct; a link built from it with a query
;; added, which the resumed code reads from the new request.
(require net/url
         web-server/servlet)
(provide start)

(define (start req)
  (define r
    (send/suspend/url
     (λ (k-url)
       (response/xexpr
        `(html (head (title "URL"))
               (body (a ([href ,(url->string (struct-copy url k-url [query '((color . "blue"))]))])
                        "blue")
                     " "
                     (a ([href ,(url->string k-url)]) "plain")))))))
  (define color (let ([b (assq 'color (request-bindings r))]) (if b (cdr b) "none")))
  (response/xexpr `(html (head (title "Color")) (body (p ,(format "color: ~a" color))))))
