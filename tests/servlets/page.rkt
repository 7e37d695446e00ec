#lang racket/base
;; web-server/page: define/page, page's embed/url and get-binding.
(require web-server/page
         web-server/servlet)
(provide start)

(define (start req) (show req 1))

(define/page (show n)
  (response/xexpr
   `(html (head (title "Pages"))
          (body (p ,(format "page ~a, q=~a" n (or (get-binding 'q) "none")))
                (a ([href ,(embed/url (λ (r) (show r (add1 n))))]) "next")))))
