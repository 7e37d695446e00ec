#lang racket/base
;; fastcgi/private/util/hmac.rkt: HMAC-SHA256 on the test vectors of RFC 4231 (keys shorter
;; than, equal to and longer than the block), and the constant-time comparison on a table.
(require file/sha1
         rackunit
         "../fastcgi/private/util/hmac.rkt")

;; hex : string -> bytes
(define (hex s) (hex-string->bytes s))

;; RFC 4231 test cases 1, 2, 3, 4, 6 and 7: key, data, HMAC-SHA256 (case 5 is truncated)
(define rfc4231
  `((,(make-bytes 20 #x0b) #"Hi There"
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    (#"Jefe" #"what do ya want for nothing?"
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    (,(make-bytes 20 #xaa) ,(make-bytes 50 #xdd)
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe")
    (,(hex "0102030405060708090a0b0c0d0e0f10111213141516171819") ,(make-bytes 50 #xcd)
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b")
    (,(make-bytes 131 #xaa) #"Test Using Larger Than Block-Size Key - Hash Key First"
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    (,(make-bytes 131 #xaa)
     #"This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm."
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2")))

(test-case "hmac-sha256: RFC 4231 test vectors"
  (for ([row (in-list rfc4231)] [i (in-naturals 1)])
    (define mac (hmac-sha256 (car row) (cadr row)))
    (check-equal? (bytes-length mac) 32)
    (check-equal? (bytes->hex-string mac) (caddr row) (format "row ~a" i))))

(test-case "hmac-sha256: a key of exactly 64 bytes is used as is, 65 bytes is hashed"
  (define k64 (make-bytes 64 7))
  (define k65 (make-bytes 65 7))
  (check-equal? (hmac-sha256 k65 #"m") (hmac-sha256 (sha256-bytes k65) #"m"))
  (check-not-equal? (hmac-sha256 k64 #"m") (hmac-sha256 (sha256-bytes k64) #"m"))
  ;; a short key is padded with zeros to the block
  (check-equal? (hmac-sha256 #"k" #"m") (hmac-sha256 (bytes-append #"k" (make-bytes 63 0)) #"m")))

(test-case "bytes=?/constant-time: equal only when every byte and the length are"
  (for ([row (in-list '((#"" #"" #t) (#"abc" #"abc" #t) (#"abc" #"abd" #f) (#"abc" #"xbc" #f)
                        (#"abc" #"ab" #f) (#"ab" #"abc" #f) (#"" #"a" #f)
                        (#"\0\0" #"\0\0" #t) (#"\377" #"\376" #f)))])
    (check-equal? (bytes=?/constant-time (car row) (cadr row)) (caddr row) (format "~s" row))))
