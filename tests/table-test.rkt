#lang racket/base
;; fastcgi/private/util/table.rkt: the tables of live requests and connections.
(require racket/list
         rackunit
         "../fastcgi/private/util/table.rkt")

(test-case "ref, set, remove, remove-if-eq, count, keys, values, clear"
  (define t (make-table))
  (check-equal? (table-count t) 0)
  (check-false (table-ref t 1))
  (check-equal? (table-ref t 1 'none) 'none)
  (table-set! t 1 'a)
  (table-set! t 2 'b)
  (table-set! t 1 'c)
  (check-equal? (table-count t) 2)
  (check-equal? (table-ref t 1) 'c)
  (check-equal? (sort (table-keys t) <) '(1 2))
  (check-equal? (sort (table-values t) symbol<?) '(b c))
  (table-remove-if-eq! t 1 'a)                 ; 1 maps to c now: kept
  (check-equal? (table-ref t 1) 'c)
  (table-remove-if-eq! t 1 'c)
  (check-false (table-ref t 1))
  (table-remove! t 2)
  (table-remove! t 3)                          ; absent: no-op
  (check-equal? (table-count t) 0)
  (table-set! t 'x 1)
  (table-clear! t)
  (check-equal? (table-keys t) '()))

(test-case "a snapshot taken before a change is not affected by it"
  (define t (make-table))
  (for ([i 10]) (table-set! t i i))
  (define vs (table-values t))
  (table-clear! t)
  (check-equal? (sort vs <) (range 10)))

(test-case "many threads adding and removing at once lose no update"
  (define t (make-table))
  (define threads
    (for/list ([k 8])
      (thread (λ ()
                (for ([i 2000])
                  (define key (+ (* k 100000) i))
                  (table-set! t key k)
                  (when (odd? i) (table-remove! t key)))))))
  (for-each thread-wait threads)
  (check-equal? (table-count t) (* 8 1000))
  (check-true (for/and ([k 8] #:when #t [i (in-range 0 2000 2)]) (eqv? k (table-ref t (+ (* k 100000) i))))))
