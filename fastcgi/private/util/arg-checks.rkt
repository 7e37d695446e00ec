#lang racket/base
;; The checks the public module (main.rkt) makes of its arguments, as its contracts would:
;; a value that does not pass is an exn:fail:contract naming the procedure, the argument
;; (a keyword by its name) and what was expected. Not racket/contract, which every process
;; that loads `fastcgi` would then hold (bench/RESULTS.md, memory): a raw worker otherwise
;; loads nothing of it.
(provide check-arg
         check-keywords
         positive-real?
         timeout?
         port-number?
         user-or-group?
         roles-of?)

;; check-arg : symbol string boolean any -> void ; what: "#:name expectation"
(define (check-arg who what ok? v)
  (unless ok? (raise-argument-error who what v)))

;; check-keywords : symbol (listof keyword) (listof any) (hash keyword (cons pred string)) -> void
;; Each keyword argument against its check in the table.
(define (check-keywords who kws vals checks)
  (for ([k (in-list kws)] [v (in-list vals)])
    (define c (hash-ref checks k))
    (check-arg who (string-append (keyword->string* k) " " (cdr c)) ((car c) v) v)))

(define (keyword->string* k) (string-append "#:" (keyword->string k)))

(define (positive-real? v) (and (real? v) (> v 0)))
(define (timeout? v) (or (not v) (positive-real? v)))
(define (port-number? v) (or (not v) (and (exact-integer? v) (<= 0 v 65535))))
(define (user-or-group? v) (or (not v) (string? v) (exact-nonnegative-integer? v)))

;; roles-of? : (listof symbol) -> (any -> boolean) ; a non-empty list of these roles
(define ((roles-of? allowed) v)
  (and (pair? v) (list? v) (for/and ([r (in-list v)]) (and (memq r allowed) #t))))
