#lang racket/base
;; Web cells: a counter kept in a web cell follows the browser's history (back, then a
;; new click, starts from the page that was gone back to), unlike a global.
(require web-server/servlet)
(provide start)

(define count (make-web-cell 0))

(define (start req) (show))

(define (show)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "Cells"))
             (body (p ,(format "cell: ~a" (web-cell-ref count)))
                   (a ([href ,(embed/url (λ (r)
                                           (web-cell-shadow count (add1 (web-cell-ref count)))
                                           (show)))])
                      "inc")))))))
