#lang web-server/insta
;; web-server's tutorial starts like this: the language runs serve/servlet when the module
;; is instantiated. raco fastcgi serve refuses it.
(define (start req)
  (response/xexpr '(html (body (p "insta")))))
