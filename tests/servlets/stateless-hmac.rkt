#lang web-server
;; 'stateless with HMAC-SHA1-stuffer (web-server's own signature) and base64 for the URL.
(require web-server/stuffers)
(provide interface-version stuffer start)

(define interface-version 'stateless)
(define stuffer
  (stuffer-chain serialize-stuffer
                 (HMAC-SHA1-stuffer #"a key of the application, not the server")
                 base64-stuffer))

(define (start req)
  (define color "green")
  (send/suspend
   (λ (k-url)
     (response/xexpr `(html (head (title "HMAC")) (body (a ([href ,k-url]) "next"))))))
  (response/xexpr `(html (head (title "Signed")) (body (p ,(format "hmac kept: ~a" color))))))
