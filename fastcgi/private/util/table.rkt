#lang racket/base
;; A small mutable table (eqv keys) that stays fast to iterate however many keys come and
;; go. Racket 8.7 CS's mutable hash tables do not: once a table has been iterated, every
;; key later added and removed makes each following iteration slower, without bound, even
;; for a table that never holds more than one entry (bench/OPTIMISATIONS.md, Tables that
;; churn). A kept connection's live requests and a server's connections churn like that
;; and are iterated all the time, so they live here: an immutable hash in a box, replaced
;; by compare-and-set (readers see a consistent snapshot, no lock).
(provide make-table
         table-ref
         table-set!
         table-remove!
         table-remove-if-eq!
         table-count
         table-ormap
         table-values
         table-keys
         table-clear!)

(struct table (box))

;; make-table : -> table
(define (make-table) (table (box #hasheqv())))

;; table-ref : table any [any] -> any
(define (table-ref t k [default #f]) (hash-ref (unbox (table-box t)) k default))

;; update! : table (hash -> hash) -> void
(define (update! t f)
  (define b (table-box t))
  (let loop ()
    (define old (unbox b))
    (unless (box-cas! b old (f old)) (loop))))

;; table-set! : table any any -> void
(define (table-set! t k v) (update! t (λ (h) (hash-set h k v))))

;; table-remove! : table any -> void
(define (table-remove! t k) (update! t (λ (h) (hash-remove h k))))

;; table-remove-if-eq! : table any any -> void ; only while k still maps to v
(define (table-remove-if-eq! t k v)
  (update! t (λ (h) (if (eq? (hash-ref h k #f) v) (hash-remove h k) h))))

;; table-count : table -> natural
(define (table-count t) (hash-count (unbox (table-box t))))

;; table-ormap : table (any -> any) -> any ; the first true (f value), without a list
(define (table-ormap t f)
  (for/or ([v (in-immutable-hash-values (unbox (table-box t)))]) (f v)))

;; table-values : table -> list ; table-keys : table -> list
(define (table-values t) (hash-values (unbox (table-box t))))
(define (table-keys t) (hash-keys (unbox (table-box t))))

;; table-clear! : table -> void
(define (table-clear! t) (set-box! (table-box t) #hasheqv()))
