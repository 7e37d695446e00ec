#lang racket/base
;; send/back: an answer from deep inside a computation, without clearing the continuations.
(require web-server/servlet)
(provide start)

(define (start req)
  (define r
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title "Search"))
               (body (form ([action ,k-url] [method "get"])
                           (input ([type "text"] [name "target"]))
                           (input ([type "submit"] [value "Search"])))))))))
  (define target (string->number (extract-binding/single 'target (request-bindings r))))
  (for ([i (in-range 100)])
    (when (eqv? (* i i) target)
      (send/back (response/xexpr `(html (head (title "Found")) (body (p ,(format "~a is ~a squared" target i))))))))
  (response/xexpr `(html (head (title "Not found")) (body (p ,(format "~a is not a square below 10000" target))))))
