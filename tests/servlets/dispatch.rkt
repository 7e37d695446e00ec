#lang racket/base
;; send/suspend/dispatch with embed/url: a counter whose links are closures.
(require web-server/servlet)
(provide start)

(define (start req) (counter 0))

(define (counter n)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "Counter"))
             (body (p ,(format "count: ~a" n))
                   (a ([href ,(embed/url (λ (r) (counter (add1 n))))]) "plus")
                   " "
                   (a ([href ,(embed/url (λ (r) (counter (sub1 n))))]) "minus")))))))
