#lang racket/base
;; A formlet processed in an embed/url closure of send/suspend/dispatch.
(require web-server/formlets
         web-server/servlet)
(provide start)

(define person-formlet
  (formlet
   (div (label "Name" ,{input-string . => . name})
        (label "Age" ,{input-int . => . age}))
   (list name age)))

(define (start req)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (head (title "Who are you?"))
             (body (form ([action ,(embed/url greet)] [method "post"])
                         ,@(formlet-display person-formlet)
                         (input ([type "submit"] [value "Send"])))
                   (a ([href ,(embed/url (λ (r) (response/xexpr '(html (head (title "Cancelled")) (body (p "cancelled"))))))])
                      "cancel")))))))

(define (greet req)
  (define who (formlet-process person-formlet req))
  (response/xexpr
   `(html (head (title "Hello"))
          (body (p ,(format "~a is ~a years old" (car who) (cadr who)))))))
