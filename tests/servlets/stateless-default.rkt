#lang web-server
;; The module convention, interface-version 'stateless, with web-server's default stuffer:
;; the continuation (the first number) travels in the URL.
(require web-server/stuffers)
(provide interface-version stuffer start)

(define interface-version 'stateless)
(define stuffer default-stuffer)

(define (ask prompt)
  (define req
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title ,prompt))
               (body (form ([action ,k-url] [method "post"])
                           (input ([type "text"] [name "n"]))
                           (input ([type "submit"] [value "Next"])))))))))
  (string->number (extract-binding/single 'n (request-bindings req))))

(define (start req)
  (define a (ask "First number"))
  (define b (ask "Second number"))
  (response/xexpr `(html (head (title "Sum")) (body (p ,(format "~a + ~a = ~a" a b (+ a b)))))))
