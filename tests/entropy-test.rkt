#lang racket/base
;; entropy.rkt: random-bytes gives as many bytes as asked, and different ones each time.
(require rackunit
         "../fastcgi/private/util/entropy.rkt")

(define (remove-duplicates* l) (hash-keys (for/hash ([x (in-list l)]) (values x #t))))

(test-case "the length asked, and no two draws alike"
  (for ([n (in-list '(1 8 16 32 100))])
    (check-equal? (bytes-length (random-bytes n)) n))
  (define draws (for/list ([i 50]) (random-bytes 16)))
  (check-equal? (length (remove-duplicates* draws)) 50)
  ;; not all zero, not all one value
  (check-true (> (length (remove-duplicates* (bytes->list (apply bytes-append draws)))) 100)))
