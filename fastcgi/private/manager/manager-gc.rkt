#lang racket/base
;; The manager's memory. A manager is idle most of the time, and what it allocates after
;; it starts is little and short-lived; two things would still keep its resident size up:
;; - what starting left behind (the options, the modules' set-up), which the runtime
;;   collects in full only once memory in use has doubled: so the manager collects in full
;;   itself, once, when the first generation serves;
;; - memory freed by a collection, which the runtime keeps for later up to as much again
;;   as is in use: the manager keeps a tenth (heap-reserve-ratio), since it does not
;;   allocate fast enough to need more. Workers keep the runtime's default.
(require ffi/unsafe/vm
         "../util/log.rkt")
(provide manager-memory-setup!
         make-manager-gc
         manager-gc!)

;; manager-memory-setup! : -> void ; at the manager's start
(define (manager-memory-setup!)
  ((vm-primitive 'heap-reserve-ratio) 0.1))

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
