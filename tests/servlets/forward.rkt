#lang racket/base
;; send/forward: the second page forgets the first one's continuations.
(require web-server/servlet)
(provide start)

(define (step title k-url)
  (response/xexpr `(html (head (title ,title)) (body (p ,title) (a ([href ,k-url]) "next")))))

(define (start req)
  (send/suspend (λ (k-url) (step "step one" k-url)))
  (send/forward (λ (k-url) (step "step two" k-url)))
  (response/xexpr `(html (head (title "Done")) (body (p "done")))))
