#lang racket/base
;; The module convention, interface-version 'v1: continuations and the instance time out
;; after `timeout` seconds (web-server's timeout manager).
(require web-server/servlet)
(provide interface-version timeout start)

(define interface-version 'v1)
(define timeout 3)

(define (start req) (counter 0))

(define (counter n)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "v1"))
             (body (p ,(format "v1 count: ~a" n))
                   (a ([href ,(embed/url (λ (r) (counter (add1 n))))]) "plus")))))))
