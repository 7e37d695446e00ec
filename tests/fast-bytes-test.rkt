#lang racket/base
;; fastcgi/private/util/fast-bytes.rkt: bytes-range=? against comparing the two slices.
(require rackunit
         "../fastcgi/private/util/fast-bytes.rkt")

(test-case "bytes-range=?: as comparing the two slices, at every offset and length"
  (define a (apply bytes (for/list ([i 40]) (random 3))))
  (define b (apply bytes (for/list ([i 40]) (random 3))))
  (for* ([i (in-range 0 12)] [j (in-range 0 12)] [n (in-range 0 28)])
    (check-equal? (bytes-range=? a i b j n) (equal? (subbytes a i (+ i n)) (subbytes b j (+ j n)))
                  (format "~s ~a ~s ~a ~a" a i b j n))
    (check-true (bytes-range=? a i a i n)))
  (check-true (bytes-range=? #"abcdefgh" 0 #"xabcdefghx" 1 8))
  (check-false (bytes-range=? #"abcdefgh" 0 #"xabcdefgXx" 1 8) "last byte differs")
  (check-false (bytes-range=? #"abcdefgh" 0 #"xaXcdefghx" 1 8) "within the first 4-byte step"))
