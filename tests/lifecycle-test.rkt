#lang racket/base
;; lifecycle.rkt: the states of the pool's processes, and the moves between them. Every
;; (state event) pair is checked against moves written out here independently of the
;; module's tables; every other pair must not apply (the move raises). Then the module's
;; tables are exactly these moves, and a move is made or refused on a real record.
(require rackunit
         "../fastcgi/private/manager/lifecycle.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (only-in "../fastcgi/private/os/child-process.rkt" adopt-child))

(define worker-states '(starting ready draining))
(define worker-events '(ready retire drain))
(define worker-expected
  '(((starting ready) ready)
    ((starting retire) draining) ((ready retire) draining)
    ((starting drain) draining) ((ready drain) draining) ((draining drain) draining)))

(define loader-states '(waiting forking loading ready unsafe gone off))
(define loader-events '(fork start loaded unsafe die fall-back))
(define loader-expected
  '(((waiting fork) forking)
    ((waiting start) loading) ((forking start) loading)
    ((loading loaded) ready)
    ((loading unsafe) unsafe)
    ((loading die) gone) ((ready die) gone)
    ((gone fall-back) off) ((ready fall-back) off)))

(test-case "a worker: each (state event) pair moves as written here, and no other"
  (for* ([s worker-states] [e worker-events])
    (define want (cond [(assoc (list s e) worker-expected) => cadr] [else #f]))
    (check-equal? (next-worker-state e s) want (format "~a --~a-->" s e))))

(test-case "a loader (or the base): each (state event) pair moves as written here, and no other"
  (for* ([s loader-states] [e loader-events])
    (define want (cond [(assoc (list s e) loader-expected) => cadr] [else #f]))
    (check-equal? (next-loader-state e s) want (format "~a --~a-->" s e))))

(test-case "the module's tables are these moves, each once"
  (for ([table (list worker-transitions loader-transitions)]
        [expected (list worker-expected loader-expected)])
    (define rows (for*/list ([(e moves) (in-hash table)] [m (in-list moves)])
                   (list (list (car m) e) (cdr m))))
    (check-equal? (length rows) (length expected))
    (for ([row (in-list rows)])
      (check-equal? (assoc (car row) expected) row (format "~a" (car row))))))

(test-case "moves on records: made where they apply, refused (raised) where they do not"
  (define w (make-worker #:id 1 #:process (adopt-child 999999) #:generation 1 #:now 0.))
  (check-eq? (worker-state w) 'starting)
  (check-exn #rx"retire without a deadline" (λ () (worker-move! w 'retire)))
  (check-eq? (worker-state w) 'starting)
  (worker-move! w 'retire #:deadline 100.)
  (check-equal? (list (worker-state w) (worker-retiring? w) (worker-drain-deadline w))
                '(draining #t 100.))
  (check-exn #rx"no retire in state draining"
             (λ () (worker-move! w 'drain #:deadline 50.) (worker-move! w 'retire #:deadline 1.)))
  (check-equal? (list (worker-state w) (worker-retiring? w) (worker-drain-deadline w))
                '(draining #f 50.))
  (check-exn #rx"no ready in state draining" (λ () (worker-move! w 'ready)))
  (worker-killed! w 1000.)
  (check-equal? (worker-drain-deadline w) 6000.)
  (worker-failed! w "not ready")
  (check-equal? (worker-failure w) "not ready")
  (define ld (make-loader #:generation 2 #:process #f #:now 0.))
  (check-eq? (loader-state ld) 'waiting)
  (loader-move! ld 'fork)
  (loader-started! ld (adopt-child 999998) 5.)
  (check-eq? (loader-state ld) 'loading)
  (check-equal? (loader-pid ld) 999998)
  (check-equal? (loader-started-ms ld) 5.)
  (check-exn #rx"no fork in state loading" (λ () (loader-move! ld 'fork)))
  (loader-move! ld 'loaded)
  (loader-move! ld 'die)
  (loader-move! ld 'fall-back)
  (check-eq? (loader-state ld) 'off))
