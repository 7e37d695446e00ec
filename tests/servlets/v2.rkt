#lang racket/base
;; The module convention, interface-version 'v2: the servlet's own manager, a threshold
;; LRU manager with an expiration page of its own. A "forget" link clears the continuations.
(require web-server/managers/lru
         web-server/servlet)
(provide interface-version manager start)

(define interface-version 'v2)

(define manager
  (make-threshold-LRU-manager
   (λ (req)
     (response/xexpr
      `(html (head (title "v2 expired"))
             (body (p "v2: this session has timed out, please start again")))))
   (* 1024 1024 1024)))

(define (start req) (counter 0))

(define (counter n)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "v2"))
             (body (p ,(format "v2 count: ~a" n))
                   (a ([href ,(embed/url (λ (r) (counter (add1 n))))]) "plus")
                   " "
                   (a ([href ,(embed/url (λ (r) (clear-continuation-table!) (counter n)))]) "forget")))))))
