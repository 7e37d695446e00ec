#lang racket/base
;; clear-continuation-table!: page n links to page n+1 ("next") and to page n+1 after
;; forgetting every continuation so far ("forget").
(require web-server/servlet)
(provide start)

(define (start req) (show 0))

(define (show n)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "Pages"))
             (body (p ,(format "page ~a" n))
                   (a ([href ,(embed/url (λ (r) (show (add1 n))))]) "next")
                   " "
                   (a ([href ,(embed/url (λ (r) (clear-continuation-table!) (show (add1 n))))]) "forget")))))))
