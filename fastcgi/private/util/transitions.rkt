#lang racket/base
;; A state machine's table written once, as data and as code: engine/owner.rkt's (who
;; reads a connection) and manager/lifecycle.rkt's (the pool's processes). Each event
;; lists its moves (from to); a move not listed does not apply.
(require (for-syntax racket/base))
(provide define-transitions)

;; (define-transitions table next [event (from to) ...] ...)
;; table: event -> list of (from . to), for the tests and the docs; (next event state):
;; the state the event moves state to, or #f where it does not apply.
(define-syntax-rule (define-transitions table next [event (from to) ...] ...)
  (begin
    (define table (hasheq (~@ 'event '((from . to) ...)) ...))
    (define (next e state)
      (case e
        [(event) (case state [(from) 'to] ... [else #f])] ...
        [else #f]))))
