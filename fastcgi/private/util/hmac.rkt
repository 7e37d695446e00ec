#lang racket/base
;; HMAC-SHA256 (RFC 2104) over racket/base's sha256-bytes, and a comparison of MACs whose
;; time does not depend on where they differ.
(provide hmac-sha256 bytes=?/constant-time)

;; hmac-sha256 : bytes bytes -> bytes ; 32 bytes
(define (hmac-sha256 key msg)
  (define k (let ([k (if (> (bytes-length key) 64) (sha256-bytes key) key)])
              (bytes-append k (make-bytes (- 64 (bytes-length k)) 0))))
  (define (pad x) (apply bytes (for/list ([b (in-bytes k)]) (bitwise-xor b x))))
  (sha256-bytes (bytes-append (pad #x5c) (sha256-bytes (bytes-append (pad #x36) msg)))))

;; bytes=?/constant-time : bytes bytes -> boolean
(define (bytes=?/constant-time a b)
  (and (= (bytes-length a) (bytes-length b))
       (zero? (for/fold ([d 0]) ([x (in-bytes a)] [y (in-bytes b)]) (bitwise-ior d (bitwise-xor x y))))))
