#lang racket/base
;; The event loop: one thread serves the read side of every idle or busy kept connection
;; of a server, from an epoll set of our own (Linux). Each connection socket is registered
;; once, level-triggered (and so is a server's listening socket: its step accepts); the
;; loop asks epoll which are readable and runs each one's step in turn, without a thread
;; switch per request. Racket's own way (a thread per
;; connection, each waiting on the socket through Racket's epoll set) costs two thread
;; switches and two epoll_ctl per request (bench/OPTIMISATIONS.md, the event loop).
;;
;; A step must not block. Whoever is about to block on behalf of one connection while
;; running as the loop hands the loop over first (poller-hand-over!): a new thread becomes
;; the loop, and the old one goes on with that one connection only.
(require ffi/unsafe
         ffi/unsafe/atomic
         ffi/unsafe/port
         (only-in "ffi.rkt" c-close define-libc))
(provide make-poller
         poller?
         poller-add!
         poller-forget!
         poller-owner?
         poller-hand-over!
         poller-start!
         poller-stop!)

(define-libc c-epoll-create1 "epoll_create1" _int -> _int)
;; no errno wanted: the loop waits through Racket's scheduler on any n <= 0
(define-libc c-epoll-wait "epoll_wait" #:no-errno _int _pointer _int _int -> _int)
;; nor for a connection's registration, which only succeeds or not (saving errno is a
;; measurable part of the call)
(define-libc c-epoll-ctl "epoll_ctl" #:no-errno _int _int _int _pointer -> _int)

(define EPOLL_CLOEXEC #o2000000)
(define EPOLL_CTL_ADD 1)
(define EPOLL_CTL_DEL 2)
(define EPOLLIN #x001)
(define EPOLLRDHUP #x2000)
(define event-size 12)                  ; struct epoll_event is packed on x86_64
(define max-events 64)

;; epfd: the epoll set; events: the buffer epoll_wait fills (owned by the loop thread);
;; entries: fd -> entry (a vector that grows); owner: the thread that is the loop now;
;; step: entry -> any, run by the loop for a readable fd; paramz: the parameterization the
;; loop threads are made under (the one at make-poller, its custodian included: a new loop
;; thread may be asked for by a handler, whose own parameterize must not reach the loop);
;; quiet?, lease-until, stats: the lease (see run-loop).
(struct poller (epfd events [entries #:mutable] [owner #:mutable] step paramz
                     [stopped? #:mutable] ev
                     quiet? [lease-until #:mutable] stats))

(define-libc c-epoll-wait/blocking "epoll_wait" #:no-errno #:blocking? #t _int _pointer _int _int -> _int)
(define lease-ms 2.0)

;; make-poller : (any -> any) [(-> boolean)] -> poller
;; The loop does not run until poller-start!. quiet?: whether the loop may wait in
;; epoll_wait itself for a while (see run-loop); never, by default.
(define (make-poller step [quiet? (λ () #f)])
  (define epfd (c-epoll-create1 EPOLL_CLOEXEC))
  (when (< epfd 0)
    (error 'fastcgi "epoll_create1 failed (errno ~a)" (saved-errno)))
  ;; not moved by the GC (epoll writes into them), and freed with the poller
  (poller epfd (malloc (* event-size max-events) 'atomic-interior) (make-vector 256 #f) #f step
          (current-parameterization) #f (malloc event-size 'atomic-interior)
          quiet? 0.0 (make-vector 12 0)))

;; poller-add! : poller natural any -> boolean
;; Registers fd (readable, or the peer closed) with entry, the value handed to step.
;; #f when epoll refuses it (the caller then serves the connection otherwise).
(define (poller-add! p fd entry)
  (start-atomic)
  (when (>= fd (vector-length (poller-entries p)))
    (define old (poller-entries p))
    (define new (make-vector (max (add1 fd) (* 2 (vector-length old))) #f))
    (vector-copy! new 0 old)
    (set-poller-entries! p new))
  (vector-set! (poller-entries p) fd entry)
  (define ev (poller-ev p))
  (ptr-set! ev _uint32 'abs 0 (bitwise-ior EPOLLIN EPOLLRDHUP))
  (ptr-set! ev _int32 'abs 4 fd)
  (define ok? (= 0 (c-epoll-ctl (poller-epfd p) EPOLL_CTL_ADD fd ev)))
  (unless ok? (vector-set! (poller-entries p) fd #f))
  (end-atomic)
  ok?)

;; poller-forget! : poller natural any [boolean] -> void
;; fd no longer belongs to the loop (if it is still registered with entry). Call it before
;; the fd is closed: after, its number may already belong to the next connection.
;; closing?: the caller closes fd next, which takes it out of the epoll set: no epoll_ctl.
;; (Should the socket outlive the close, in a child between fork and exec, epoll may
;; report it once more under a number no entry or a later connection has: a step on a
;; connection with nothing to read is harmless.)
(define (poller-forget! p fd entry [closing? #f])
  (start-atomic)
  (define entries (poller-entries p))
  (when (and (< fd (vector-length entries)) (eq? (vector-ref entries fd) entry))
    (vector-set! entries fd #f)
    (unless closing? (c-epoll-ctl (poller-epfd p) EPOLL_CTL_DEL fd (poller-ev p))))
  (end-atomic))

;; poller-owner? : poller -> boolean ; is the current thread the loop?
(define (poller-owner? p)
  (eq? (poller-owner p) (current-thread)))

;; poller-hand-over! : poller thread -> void
;; When t is the loop (t is about to block for one connection, or is blocked in a
;; handler): a new thread becomes the loop at once; t finishes what it is doing and then
;; stops being the loop (run-loop sees it is no longer the owner). No-op otherwise.
(define (poller-hand-over! p t)
  (start-atomic)
  (define mine? (and (eq? (poller-owner p) t) (not (poller-stopped? p))))
  (when mine? (set-poller-owner! p 'handing-over))
  (end-atomic)
  (when mine? (spawn-loop! p)))

;; poller-start! : poller -> void
(define (poller-start! p) (spawn-loop! p))

;; poller-stop! : poller -> void
;; The loop ends and the epoll set is closed. Call it once no connection is registered
;; (a server stops it after its connections have ended): later forgets find no entry and
;; make no call on the closed set, whose number may be reused.
(define (poller-stop! p)
  (start-atomic)
  (define first? (not (poller-stopped? p)))
  (set-poller-stopped?! p #t)
  (define t (poller-owner p))
  (set-poller-owner! p #f)
  (set-poller-entries! p (vector))
  (when first?
    (unsafe-socket->semaphore (poller-epfd p) 'remove)
    (c-close (poller-epfd p)))
  (end-atomic)
  (when (thread? t) (kill-thread t)))

;; spawn-loop! : poller -> void
(define (spawn-loop! p)
  (define go (make-semaphore 0))
  (define t (call-with-parameterization (poller-paramz p)
                                        (λ () (thread (λ () (semaphore-wait go) (run-loop p))))))
  (start-atomic)
  (if (poller-stopped? p) (kill-thread t) (set-poller-owner! p t))
  (end-atomic)
  (semaphore-post go))

;; run-events! : poller natural -> void ; each of the n ready fds' steps
(define (run-events! p n)
  (define events (poller-events p))
  (define step (poller-step p))
  (let each ([i 0])
    (when (and (< i n) (poller-owner? p))
      (define fd (ptr-ref events _int32 'abs (+ (* i event-size) 4)))
      (define entries (poller-entries p))
      (define entry (and (< fd (vector-length entries)) (vector-ref entries fd)))
      (when entry (step entry))
      (each (add1 i)))))

;; swaps : poller -> natural ; thread swaps of the place so far
(define (swaps p)
  (define v (poller-stats p))
  (vector-set-performance-stats! v)
  (vector-ref v 4))

;; run-loop : poller -> void
;; While this thread is the loop: take the readable fds (without waiting), run each one's
;; step; when none is readable, wait until one is. Waiting goes through Racket's scheduler,
;; so that the rest of the process runs meanwhile, except during a lease: after a wait in
;; which no other thread ran (the place's thread swaps moved by one), while no handler
;; runs (quiet?), for lease-ms, the loop waits in epoll_wait itself. A wait through the
;; scheduler makes several system calls (it polls its own epoll set and wake-up pipe,
;; then takes our epoll fd out of its set and puts it back) where epoll_wait makes one
;; (bench/OPTIMISATIONS.md, the epoll lease). While
;; the loop waits so, no other thread of the process runs: one that becomes ready then
;; (a timer, a reader of its own) waits at most lease-ms, and a signal ends the wait.
(define (run-loop p)
  (define events (poller-events p))
  (define epfd (poller-epfd p))
  (let loop ()
    (when (poller-owner? p)
      (define n (c-epoll-wait epfd events max-events 0))
      (cond
        [(> n 0) (run-events! p n)]
        [else
         (define left (- (poller-lease-until p) (current-inexact-monotonic-milliseconds)))
         (cond
           [(and (> left 0.0) ((poller-quiet? p)))
            (define n (c-epoll-wait/blocking epfd events max-events (max 1 (inexact->exact (ceiling left)))))
            (if (> n 0) (run-events! p n) (set-poller-lease-until! p 0.0))]
           [else
            (define before (swaps p))
            (sync (unsafe-socket->semaphore epfd 'read))
            (set-poller-lease-until! p (if (= (- (swaps p) before) 1)
                                           (+ (current-inexact-monotonic-milliseconds) lease-ms)
                                           0.0))])])
      (loop))))
