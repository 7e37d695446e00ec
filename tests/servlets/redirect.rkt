#lang racket/base
;; redirect/get: a POST answered with 303 See Other to a continuation URL, so that
;; reloading the result does not post again.
(require web-server/servlet)
(provide start)

(define (start req)
  (define r
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title "Post"))
               (body (form ([action ,k-url] [method "post"])
                           (input ([type "text"] [name "msg"]))
                           (input ([type "submit"] [value "Post"])))))))))
  (define msg (extract-binding/single 'msg (request-bindings r)))
  (define after (redirect/get))
  (response/xexpr
   `(html (head (title "Posted"))
          (body (p ,(format "posted: ~a" msg))
                (p ,(format "method now: ~a" (request-method after)))))))
