#lang racket/base
;; A session holding a large value: each new session makes 200 KB of fresh bytes that its
;; continuation keeps (the flood test of tests/servlet-hostile-test.rkt). /small answers
;; without a continuation.
(require net/url
         web-server/servlet)
(provide start)

(define size (* 200 1024))

(define (start req)
  (cond
    [(regexp-match? #rx"^/small" (url->string (request-uri req)))
     (response/xexpr '(html (body (p "small"))))]
    [else
     (define data (make-bytes size (random 256)))
     (send/suspend
      (λ (k-url) (response/xexpr `(html (body (a ([href ,k-url]) "resume"))))))
     (response/xexpr `(html (body (p ,(format "held ~a bytes of ~a" (bytes-length data) (bytes-ref data 0))))))]))
