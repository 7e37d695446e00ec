#lang racket/base
;; The manager's memory. A manager is idle most of the time, and what it allocates after
;; it starts is little and short-lived; two things would still keep its resident size up:
;; - what starting left behind (the options, the modules' set-up), which the runtime
;;   collects in full only once memory in use has doubled: so the manager collects in full
;;   itself, once, when the first generation serves;
;; - memory freed by a collection, which the runtime keeps for later up to as much again
;;   as is in use: the manager keeps a tenth (heap-reserve-ratio), since it does not
;;   allocate fast enough to need more. Workers keep the runtime's default.
;;   heap-reserve-ratio is Chez Scheme's, not documented by Racket: where it is not a
;;   parameter-like procedure that reads back what was set, the default stays (one line).
(require ffi/unsafe/vm
         "../util/log.rkt"
         "../util/probes.rkt")
(provide manager-memory-setup!
         reserve-ratio-probe
         make-manager-gc
         manager-gc!)

;; manager-memory-setup! : [any] -> boolean ; at the manager's start: whether ratio was set
(define (manager-memory-setup! [ratio (vm-primitive 'heap-reserve-ratio)])
  (and (assumption-holds? "Chez Scheme's heap-reserve-ratio" (λ () (reserve-ratio-probe ratio))
                          "the manager keeps the runtime's reserve of freed memory")
       (begin (ratio 0.1) #t)))

;; reserve-ratio-probe : any -> (or/c #t string)
;; #t when ratio reads the ratio with no argument and sets it with one: another value set
;; reads back (the present one is then set again).
(define (reserve-ratio-probe ratio)
  (cond
    [(not (and (procedure? ratio) (procedure-arity-includes? ratio 0) (procedure-arity-includes? ratio 1)))
     (format "is ~.s, not a procedure of no argument or one" ratio)]
    [else
     (define now (ratio))
     (cond
       [(not (and (real? now) (>= now 0))) (format "reads ~.s, not a ratio" now)]
       [else
        (define other (+ now 0.5))
        (ratio other)
        (define got (ratio))
        (ratio now)
        (or (eqv? got other) (format "reads ~.s once set to ~.s" got other))])]))

(struct manager-gc ([done? #:mutable]))

;; make-manager-gc : -> manager-gc ; before the first generation serves
(define (make-manager-gc) (manager-gc #f))

;; manager-gc! : manager-gc boolean -> void
;; After each event of the manager's loop; serving?: the first generation serves.
(define (manager-gc! g serving?)
  (when (and serving? (not (manager-gc-done? g)))
    (set-manager-gc-done?! g #t)
    (collect-garbage)
    (log-fastcgi-debug "manager: full collection once the first generation serves: ~a bytes in use"
                       (current-memory-use))))
