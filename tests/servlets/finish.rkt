#lang racket/base
;; send/finish: the last page clears the continuations, so going back gets the
;; expiration page.
(require web-server/servlet)
(provide start)

(define (start req)
  (send/suspend
   (λ (k-url)
     (response/xexpr `(html (head (title "Confirm")) (body (a ([href ,k-url]) "confirm"))))))
  (send/finish (response/xexpr `(html (head (title "Finished")) (body (p "order placed"))))))
