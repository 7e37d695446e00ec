#lang racket/base
;; Who reads a connection at a given moment: one state machine per connection. Exactly one
;; party owns the connection's reading (and with it the decoder) in each state, and every
;; change of owner is one of the transitions below, made atomically by `owner-step!`.
;;
;; States (who runs the connection's reader):
;;   parked         in the event loop's epoll set; no thread is in its reader
;;   loop           the event loop's thread runs its reader
;;   loop-inline    the loop's thread runs a request's handler in the reader (an inline
;;                  handler: connection.rkt); nothing reads the connection meanwhile
;;   thread         a thread of its own runs its reader (off the loop for good)
;;   thread-inline  that thread runs a handler inline; nothing reads meanwhile
;;   ended          the end was handled (slot freed, server told); terminal
;;
;; Transitions (event: from -> to; who makes it; what goes with it):
;;   step:       parked -> loop          the loop saw it readable, or the stop's sweeper
;;                                       claims it to hand it over (connection.rkt)
;;   park:       loop -> parked          its reader would wait: the loop waits for it
;;   own:        parked -> thread        epoll refused it: a thread of its own reads it
;;   detach:     loop -> thread          the loop's reader would block (a full pipe, a
;;                                       send): it leaves the epoll set and this thread
;;                                       goes on as its own reader; a new thread becomes
;;                                       the loop (owner-before-block!)
;;   inline:     loop -> loop-inline     the reader runs a handler itself
;;               thread -> thread-inline
;;   return:     loop-inline -> loop     the inline handler is done; its thread reads on
;;               thread-inline -> thread
;;   take-over:  loop-inline -> thread   someone needs the connection read while the
;;               thread-inline -> thread handler runs (it waits on its abort-evt, it has
;;                                       run long, or it would block as the loop): a new
;;                                       reader thread goes on from where the reader
;;                                       stopped (the resume action); from loop-inline the
;;                                       connection also leaves the epoll set and a new
;;                                       thread becomes the loop. The handler's thread
;;                                       finishes its request and then reads no more.
;;   end:        any but ended -> ended  whoever saw the end (the reader; for a parked
;;                                       connection, whoever broke it): once
;;
;; The other half of a connection's life is wire.rkt's: open, then draining (closing?:
;; half-closed, the reader drains what the peer still sends and takes no new request),
;; then cut (broken?: the socket closed). Any owner may see those flags; only the owner
;; reads.
;;
;; Two actions are given once, when the owner is made, and never changed: resume (a new
;; thread that goes on reading: take-over) and lose (what the connection does once it is
;; cut: its live requests are aborted and a parked connection is ended), each applied to
;; the owner's entry (the connection). They are how this module, below the connection
;; layer, starts the work that belongs to it; the connection layer gives the same two
;; procedures to every owner.
(require racket/unsafe/ops
         "../util/transitions.rkt"
         "../os/poller.rkt")
(provide make-owner
         owner?
         owner-state
         owner-step!
         owner-join-loop!
         owner-forget!
         owner-before-block!
         owner-run-inline!
         owner-return!
         owner-take-over!
         owner-end!
         owner-lost!
         owner-loop?
         owner-parked?
         owner-inline?
         transitions)

;; The table above, as data (transitions: event -> list of (from . to)) and as the code
;; that makes them (next-state: event state -> state or #f), both from this one form
;; (util/transitions.rkt).

(define-transitions transitions next-state
  [step (parked loop)]
  [park (loop parked)]
  [own (parked thread)]
  [detach (loop thread)]
  [inline (loop loop-inline) (thread thread-inline)]
  [return (loop-inline loop) (thread-inline thread)]
  [take-over (loop-inline thread) (thread-inline thread)]
  [end (parked ended) (loop ended) (loop-inline ended) (thread ended) (thread-inline ended)])

;; state: one of the states above. poller, fd, entry: the event loop and how the connection
;; is registered with it (#f: never in a loop). runner: the thread running an inline
;; handler. resume, lose: the two actions (see the header).
(struct owner ([state #:mutable] poller fd entry [runner #:mutable] resume lose))

;; make-owner : #:poller (or/c poller #f) #:fd (or/c natural #f) #:entry any
;;              #:resume (any -> any) #:lose (any -> any) -> owner
;; A new owner is a thread (the caller's, reading); owner-join-loop! parks it in the loop.
(define (make-owner #:poller [p #f] #:fd [fd #f] #:entry [entry #f]
                    #:resume resume #:lose [lose void])
  (owner 'thread p fd entry #f resume lose))

;; owner-step! : owner symbol -> boolean
;; Makes the transition for event from the current state, atomically (a compare-and-set of
;; the state); #f (and no change) when the table has none from it: another party owns the
;; connection now.
(define (owner-step! o event)
  (let retry ()
    (define from (owner-state o))
    (define to (next-state event from))
    (cond
      [(not to) #f]
      [(unsafe-struct*-cas! o 0 from to) #t]
      [else (retry)])))

;; owner-join-loop! : owner -> boolean
;; The connection is registered with the loop and parked (thread -> parked, made here as
;; the setup step of a loop connection); #f when epoll refuses it, and it stays a thread.
(define (owner-join-loop! o)
  (set-owner-state! o 'parked)
  (cond
    [(poller-add! (owner-poller o) (owner-fd o) (owner-entry o)) #t]
    [else (owner-step! o 'own) #f]))

;; owner-forget! : owner boolean -> void
;; The fd leaves the epoll set (if it is there); closing?: the caller closes it next.
(define (owner-forget! o closing?)
  (when (owner-poller o)
    (poller-forget! (owner-poller o) (owner-fd o) (owner-entry o) closing?)))

;; owner-before-block! : owner -> void
;; The current thread is about to block on this connection's behalf (a full pipe, a full
;; socket, a write lock held by another thread). The loop must never block for one
;; connection: if this thread is the loop, the connection either gets a reader thread of
;; its own (an inline handler: take-over) or leaves the loop with this thread as its
;; reader (detach), and a new thread becomes the loop. Otherwise nothing.
(define (owner-before-block! o)
  (define p (owner-poller o))
  (when (and p (poller-owner? p))
    (case (owner-state o)
      [(loop-inline) (owner-take-over! o)]
      [(loop)
       (when (owner-step! o 'detach)
         (owner-forget! o #f)
         (poller-hand-over! p (current-thread)))]
      [else (void)])))

;; owner-run-inline! : owner -> void ; the reader is about to run a handler itself
;; (the runner is set first: a take-over reads it once the state says loop-inline)
(define (owner-run-inline! o)
  (set-owner-runner! o (current-thread))
  (owner-step! o 'inline)
  (void))

;; owner-return! : owner -> boolean
;; The inline handler is done: #t when this thread is still the reader (return), #f when a
;; reader thread took over meanwhile (this thread is done with the connection).
(define (owner-return! o) (owner-step! o 'return))

;; owner-take-over! : owner -> void
;; While a handler runs inline, nothing reads the connection: a new reader thread goes on
;; from where the reader stopped (once; a no-op in any other state).
(define (owner-take-over! o)
  (define from
    (let retry ()
      (define from (owner-state o))
      (define to (next-state 'take-over from))
      (cond [(not to) #f]
            [(unsafe-struct*-cas! o 0 from to) from]
            [else (retry)])))
  (when from
    (when (eq? from 'loop-inline)
      (owner-forget! o #f)
      (poller-hand-over! (owner-poller o) (owner-runner o)))
    ((owner-resume o) (owner-entry o))))

;; owner-end! : owner -> boolean ; #t the first time (whoever gets it handles the end)
(define (owner-end! o) (owner-step! o 'end))

;; owner-lost! : owner -> void ; the connection was cut: the lose action
(define (owner-lost! o) ((owner-lose o) (owner-entry o)))

;; owner-loop? : owner -> boolean ; read by the event loop (in its epoll set)
(define (owner-loop? o) (and (memq (owner-state o) '(parked loop loop-inline)) #t))

;; owner-parked? : owner -> boolean
(define (owner-parked? o) (eq? (owner-state o) 'parked))

;; owner-inline? : owner -> boolean
;; A handler runs in the reader's thread and no reader thread took over: that thread is
;; still the connection's only reader.
(define (owner-inline? o) (and (memq (owner-state o) '(loop-inline thread-inline)) #t))
