#lang racket/base
;; owner.rkt: the connection's owner state machine, by tables (no sockets, no processes).
(require rackunit
         racket/list
         fastcgi/private/engine/owner
         (only-in fastcgi/private/os/poller make-poller poller-stop!)
         (only-in fastcgi/private/os/ffi c-socket c-close AF_UNIX SOCK_STREAM))

(define states '(parked loop loop-inline thread thread-inline ended))
(define events '(step park own detach inline return take-over end))

;; Every (state event) pair that changes the state, written out here independently of
;; owner.rkt's table; every other pair must leave the state as it is and answer #f.
(define expected
  '(((parked step) loop)
    ((loop park) parked)
    ((parked own) thread)
    ((loop detach) thread)
    ((loop inline) loop-inline)
    ((thread inline) thread-inline)
    ((loop-inline return) loop)
    ((thread-inline return) thread)
    ((loop-inline take-over) thread)
    ((thread-inline take-over) thread)
    ((parked end) ended)
    ((loop end) ended)
    ((loop-inline end) ended)
    ((thread end) ended)
    ((thread-inline end) ended)))

;; call-with-loop-owner : ((-> owner) -> any) -> any
;; Owners that join a real epoll set (a poller that is never started: no loop thread runs
;; steps) with an unconnected socket of their own each.
(define (call-with-loop-owners proc)
  (define p (make-poller void))
  (define fds '())
  (define (new-owner)
    (define fd (c-socket AF_UNIX SOCK_STREAM 0))
    (set! fds (cons fd fds))
    (define o (make-owner #:poller p #:fd fd #:entry (gensym) #:resume void))
    (check-true (owner-join-loop! o) "epoll takes the socket")
    o)
  (dynamic-wind void
                (λ () (proc new-owner))
                (λ () (poller-stop! p) (for-each c-close fds))))

;; an owner put in state s by the transitions that lead there
(define (owner-in s new-loop-owner)
  (define-values (o path)
    (case s
      [(thread) (values (make-owner #:resume void) '())]
      [(thread-inline) (values (make-owner #:resume void) '(inline))]
      [(ended) (values (make-owner #:resume void) '(end))]
      [(parked) (values (new-loop-owner) '())]
      [(loop) (values (new-loop-owner) '(step))]
      [(loop-inline) (values (new-loop-owner) '(step inline))]))
  (for ([e (in-list path)]) (check-true (owner-step! o e)))
  o)

(test-case "a new owner (no loop) is a thread; the inline cycle returns to it"
  (define o (make-owner #:resume void))
  (check-equal? (owner-state o) 'thread)
  (owner-run-inline! o)
  (check-equal? (owner-state o) 'thread-inline)
  (check-true (owner-inline? o))
  (check-true (owner-return! o) "no take-over: still the reader")
  (check-equal? (owner-state o) 'thread))

(test-case "every (state, event) pair: the transitions written above, and no other change"
  (call-with-loop-owners
   (λ (new-loop-owner)
     (for* ([s (in-list states)]
            [e (in-list events)])
       (define o (owner-in s new-loop-owner))
       (check-equal? (owner-state o) s)
       (define want (cond [(assoc (list s e) expected) => cadr] [else #f]))
       (check-equal? (owner-step! o e) (and want #t) (format "~a in ~a" e s))
       (check-equal? (owner-state o) (or want s) (format "state after ~a in ~a" e s))))))

(test-case "a loop owner: joins parked; loop-inline taken over leaves the loop for a thread"
  (call-with-loop-owners
   (λ (new-loop-owner)
     (define o (new-loop-owner))
     (check-equal? (owner-state o) 'parked)
     (check-true (owner-loop? o))
     (check-true (owner-parked? o))
     (check-true (owner-step! o 'step))
     (owner-run-inline! o)
     (check-equal? (owner-state o) 'loop-inline)
     (owner-take-over! o)
     (check-equal? (owner-state o) 'thread)
     (check-false (owner-loop? o))
     (check-false (owner-return! o)))))

(test-case "the table as data equals the transitions written above"
  (define from-module
    (sort (for*/list ([(e pairs) (in-hash transitions)] [p (in-list pairs)])
            (list (list (car p) e) (cdr p)))
          string<? #:key (λ (x) (format "~a" x))))
  (check-equal? from-module (sort expected string<? #:key (λ (x) (format "~a" x))))
  (check-true (for/and ([row (in-list expected)]) (and (memq (car (car row)) states)
                                                      (memq (cadr (car row)) events)
                                                      (memq (cadr row) states) #t))))

(test-case "take-over: resume runs once; the handler's thread then is no longer the reader"
  (define resumed 0)
  (define o (make-owner #:resume (λ (_) (set! resumed (add1 resumed)))))
  (owner-run-inline! o)
  (owner-take-over! o)
  (check-equal? resumed 1)
  (check-equal? (owner-state o) 'thread)
  (owner-take-over! o)
  (check-equal? resumed 1 "a second take-over does nothing")
  (check-false (owner-return! o) "the handler's thread learns it was taken over")
  (check-false (owner-inline? o)))

(test-case "take-over outside an inline handler does nothing"
  (define resumed 0)
  (define o (make-owner #:resume (λ (_) (set! resumed (add1 resumed)))))
  (owner-take-over! o)
  (check-equal? resumed 0)
  (check-equal? (owner-state o) 'thread))

(test-case "end: once, from any state; nothing leaves ended"
  (define o (make-owner #:resume void))
  (check-true (owner-end! o))
  (check-false (owner-end! o))
  (for ([e (in-list events)]) (check-false (owner-step! o e)))
  (check-equal? (owner-state o) 'ended))

(test-case "before-block without a loop, and lost: the actions given at creation"
  (define lost 0)
  (define o (make-owner #:resume void #:lose (λ (_) (set! lost (add1 lost)))))
  (owner-before-block! o)
  (check-equal? (owner-state o) 'thread "a thread of its own may block")
  (owner-lost! o)
  (check-equal? lost 1))

(test-case "end races: of many threads ending at once, exactly one gets it"
  (define o (make-owner #:resume void))
  (define wins (box 0))
  (define ts (for/list ([i 50]) (thread (λ () (when (owner-end! o)
                                                 (let loop () (unless (box-cas! wins (unbox wins) (add1 (unbox wins))) (loop))))))))
  (for-each thread-wait ts)
  (check-equal? (unbox wins) 1))
