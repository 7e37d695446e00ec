#lang racket/base
;; send/suspend: web-server's "add two numbers", one form per number.
(require web-server/servlet)
(provide start)

;; ask : string -> number ; a form whose action is the continuation URL
(define (ask prompt)
  (define req
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title ,prompt))
               (body (form ([action ,k-url] [method "post"])
                           (label ,prompt (input ([type "text"] [name "n"])))
                           (input ([type "submit"] [value "Next"])))))))))
  (string->number (extract-binding/single 'n (request-bindings req))))

(define (start req)
  (define a (ask "First number"))
  (define b (ask "Second number"))
  (response/xexpr
   `(html (head (title "Sum"))
          (body (p ,(format "~a + ~a = ~a" a b (+ a b)))))))
