#lang web-server
;; 'stateless with hash-stuffer: SHA-256 of the serialised continuation (hex), stored by
;; dir-store in the folder named by $FASTCGI_TEST_URLS.
(require file/sha1
         web-server/stuffers)
(provide interface-version stuffer start)

(define interface-version 'stateless)
(define stuffer
  (stuffer-chain serialize-stuffer
                 (hash-stuffer (λ (bs) (string->bytes/latin-1 (bytes->hex-string (sha256-bytes bs))))
                               (dir-store (getenv "FASTCGI_TEST_URLS")))))

(define (start req)
  (define n
    (send/suspend
     (λ (k-url)
       (response/xexpr
        `(html (head (title "Hash")) (body (a ([href ,k-url]) "next")))))))
  (response/xexpr `(html (head (title "Hashed")) (body (p "hash stuffer resumed")))))
