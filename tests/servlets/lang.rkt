#lang web-server
;; #lang web-server providing only start (stateless, web-server's default stuffer):
;; send/suspend/hidden (the continuation in a hidden kont field), then send/suspend/url.
(provide start)

(define (start req)
  (define r1
    (send/suspend/hidden
     (λ (action hidden)
       (response/xexpr
        `(html (head (title "Hidden"))
               (body (form ([action ,(url->string action)] [method "post"])
                           ,hidden
                           (input ([type "text"] [name "word"]))
                           (input ([type "submit"] [value "Send"])))))))))
  (define word (extract-binding/single 'word (request-bindings r1)))
  (define r2
    (send/suspend/url
     (λ (k-url)
       (response/xexpr
        `(html (head (title "Link")) (body (p ,(format "word: ~a" word)) (a ([href ,(url->string k-url)]) "next")))))))
  (response/xexpr `(html (head (title "Done")) (body (p ,(format "still: ~a" word))))))
