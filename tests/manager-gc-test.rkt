#lang racket/base
;; manager-gc.rkt: the manager collects in full once, when the first generation serves
;; (never before, never again after), and keeps a heap reserve of a tenth.
(require ffi/unsafe/vm
         rackunit
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/manager/manager-gc.rkt")

;; collections-during : (-> any) -> natural ; the manager's full-collection log lines
(define (collections-during thunk)
  (define r (make-log-receiver fastcgi-logger 'debug 'fastcgi))
  (thunk)
  (let loop ([n 0])
    (define v (sync/timeout 0 r))
    (cond
      [(not v) n]
      [(regexp-match? #rx"manager: full collection" (vector-ref v 1)) (loop (add1 n))]
      [else (loop n)])))

(test-case "one full collection, once the first generation serves"
  (define g (make-manager-gc))
  (check-equal? (collections-during (λ () (for ([_ 5]) (manager-gc! g #f)))) 0 "not before it serves")
  (check-equal? (collections-during (λ () (manager-gc! g #t))) 1)
  (check-equal? (collections-during (λ () (for ([_ 5]) (manager-gc! g #t)) (manager-gc! g #f))) 0
                "not again"))

(test-case "the heap reserve: a tenth"
  (define reserve (vm-primitive 'heap-reserve-ratio))
  (define before (reserve))
  (manager-memory-setup!)
  (check-equal? (reserve) 0.1)
  (reserve before))
