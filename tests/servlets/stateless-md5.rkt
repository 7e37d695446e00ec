#lang web-server
;; 'stateless with md5-stuffer: the URL carries the hash of the serialised continuation,
;; which is stored in the folder named by $FASTCGI_TEST_URLS.
(require web-server/stuffers)
(provide interface-version stuffer start)

(define interface-version 'stateless)
(define stuffer
  (stuffer-chain serialize-stuffer (md5-stuffer (getenv "FASTCGI_TEST_URLS"))))

(define (start req)
  (define first-word (ask "First word"))
  (define second-word (ask "Second word"))
  (response/xexpr `(html (head (title "Words")) (body (p ,(format "md5: ~a ~a" first-word second-word))))))

(define (ask prompt)
  (define req
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title ,prompt))
               (body (form ([action ,k-url] [method "post"])
                           (input ([type "text"] [name "w"]))
                           (input ([type "submit"] [value "Next"])))))))))
  (extract-binding/single 'w (request-bindings req)))
