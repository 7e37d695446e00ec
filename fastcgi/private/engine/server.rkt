#lang racket/base
;; One server process: the event loop that accepts and reads the connections (poller.rkt;
;; with shedding on, an accepting thread and a green thread per connection instead), one
;; deadline manager for all connections, and the graceful stop.
(require ffi/unsafe/atomic
         "../util/clock.rkt"
         "connection.rkt"
         "overflow.rkt"
         "../os/handover.rkt"
         (only-in "contain.rkt" install-exit-handler!)
         "../util/limits.rkt"
         "../util/log.rkt"
         "../os/poller.rkt"
         "../protocol/protocol.rkt"
         (only-in "request.rkt" fastcgi-request-start-ms)
         "../util/table.rkt"
         "timer.rkt"
         "../transport/transport.rkt"
         "wire.rkt" (submod "wire.rkt" server)
         "log-limit.rkt"
         "queue-delay.rkt")
(provide start-server
         make-server
         (struct-out running-server))

;; The handle on a running server: stop ends it gracefully; server is the shared state;
;; adopt takes a connection a retiring sibling hands over (fd string handed -> void).
(struct running-server (address stop server adopt))

;; start-server : (fastcgi-request -> any) listener #:roles #:limits #:allowed-clients
;;                -> running-server
;; allowed-clients: #f (everyone) or the value of parse-allowed-clients.
;; observer: #f or (fastcgi-request flonum -> any), told of each answered request.
(define (start-server handler listener
                      #:roles [roles '(responder)]
                      #:limits [lim default-limits]
                      #:allowed-clients [allowed #f]
                      #:observer [observer #f])
  ;; exit called by a handler ends its request (contain.rkt): the server's threads, all
  ;; made from here on, inherit the exit handler
  (install-exit-handler!)
  (define srv (make-server handler #:roles roles #:limits lim #:observer observer))
  (define d (door srv listener allowed
                  (make-semaphore (limits-max-connections lim))
                  (make-semaphore overflow-connections) #f #f))
  ;; the event loop (not with shedding on: see connection.rkt); it also accepts, with the
  ;; listener in its epoll set (entry: the listener itself)
  (unless (limits-max-queue-delay lim)
    (set-door-poller! d (make-poller (λ (e) (if (conn? e) (loop-step! e) (accept-some! d)))
                                     ;; the loop may wait in epoll_wait itself only while
                                     ;; no handler runs
                                     (λ () (eqv? 0 (unbox (server-running srv)))))))
  ;; without the loop, a thread accepts
  (unless (and (door-poller d) (accept-in-loop! d))
    (set-door-acceptor! d (start-acceptor! d)))
  (when (door-poller d) (poller-start! (door-poller d)))
  (start-timer! (server-timer srv) srv)
  (log-fastcgi-info "listening on ~a" (listener-address listener))
  (running-server (listener-address listener)
                  (λ (#:timeout [timeout 30] #:hand-to [hand-to '()]) (stop! d timeout hand-to))
                  srv
                  (λ (fd peer h) (adopt! d fd peer h))))

;; make-server : (fastcgi-request -> any) #:roles #:limits #:observer -> server
;; A server's shared state (wire.rkt), new: no connection, nothing counted yet.
(define (make-server handler
                     #:roles [roles '(responder)]
                     #:limits [lim default-limits]
                     #:observer [observer #f])
  (server handler roles lim (make-table)
          (box 0) (make-hasheq) #f observer (box 0.0)
          (make-notes)
          (make-thread-group) (box 1.0) (make-timer) '()))

;; A running server's intake: its server state, listener, allowed clients, the
;; semaphores of its connection slots (max-connections) and overflow slots, the event
;; loop (#f with shedding on) and the accepting thread (#f when the loop accepts).
(struct door (srv listener allowed slots overflow
                  [poller #:mutable] [acceptor #:mutable]))

;; ended : door conn -> (-> void) ; what the thread that sees c end does
(define ((ended d c))
  (table-remove! (server-connections (door-srv d)) (conn-key c))
  (semaphore-post (door-slots d)))

;; serve! : door fd string [(or/c handed #f)] -> void
;; A connection now owned here: in the event loop (registered, atomically with stop's
;; closing? flag, so that stop sees every connection admitted before it), or read by a
;; thread of its own. h: what a retiring sibling handed over with it (handover.rkt).
(define (serve! d fd peer [h #f])
  (define srv (door-srv d))
  (define conns (server-connections srv))
  (define p (door-poller d))
  (define c (make-fd-conn fd peer srv))
  (cond
    [h                                  ; adopted even while stopping
     (table-set! conns (conn-key c) c)
     (if p
         (serve-connection c (ended d c) #:poller p #:handed-over h)
         (thread (λ () (serve-connection c (ended d c) #:handed-over h))))]
    [p
     (serve-connection c (ended d c) #:poller p)
     (start-atomic)
     (define late? (server-closing? srv))
     (unless late? (table-set! conns (conn-key c) c))
     (end-atomic)
     (when late? (conn-broken! c))]
    [else
     (table-set! conns (conn-key c) c)
     (thread (λ () (serve-connection c (ended d c))))]))

;; take-slot : door -> (or/c semaphore #f)
;; At max-connections, a connection is still accepted on an overflow slot, to be told
;; 503 at once instead of waiting unseen in the kernel's backlog.
(define (take-slot d)
  (cond [(semaphore-try-wait? (door-slots d)) (door-slots d)]
        [(semaphore-try-wait? (door-overflow d)) (door-overflow d)]
        [else #f]))

;; admit! : door fd string semaphore -> void ; a connection just accepted, on slot
(define (admit! d fd peer slot)
  (define srv (door-srv d))
  (define allowed (door-allowed d))
  (cond
    [(and allowed (not (client-allowed? allowed peer)))
     (warn-limited! srv 'denied
                    (λ () (format "refused connection from ~a: not in the allowed clients"
                                  (log-escape peer))))
     (stat-add! srv 'refused)
     (socket-close! fd)
     (semaphore-post slot)]
    [(eq? slot (door-overflow d))
     (stat-add! srv 'overflow)
     (define-values (in out) (fd->ports fd peer))
     (thread (λ ()
               (refuse-overloaded in out peer srv (server-timer srv))
               (semaphore-post (door-overflow d))))]
    [else
     (stat-add! srv 'connections)
     (serve! d fd peer)]))

;; adopt! : door fd string handed -> void
;; A kept connection a retiring sibling hands over (handover.rkt): served as if accepted
;; here, from where the sibling stopped (its deadline too), even while this server stops
;; (its stop then treats it as any kept connection); one that comes while this server
;; hands its own over goes on to a sibling of its, as it came (at once: its deadline has
;; had no time to run). It takes a slot of max-connections here (without a free one it
;; is closed), and counts as adopted, not accepted: the pool's accepted connections count
;; it once.
(define (adopt! d fd peer h)
  (define srv (door-srv d))
  (define to (server-handover srv))
  (cond
    [(and to (hand-over! fd peer h to)) (socket-close! fd)]
    [(semaphore-try-wait? (door-slots d))
     (stat-add! srv 'adopted)
     (serve! d fd peer h)]
    [else
     (log-fastcgi-warning "no connection slot for one handed over by a retiring worker: closing it")
     (socket-close! fd)]))

;; accept-some! : door -> void
;; The loop's step for a readable listener: accept up to accepts-per-turn connections
;; (epoll reports the listener again if more wait). With no slot free, or out of fds, the
;; listener leaves the epoll set until a slot frees, or for a while.
(define (accept-some! d)
  (let loop ([n 0])
    (when (< n accepts-per-turn)
      (define slot (take-slot d))
      (cond
        [(not slot)
         (pause-accepting! d (choice-evt (semaphore-peek-evt (door-slots d))
                                         (semaphore-peek-evt (door-overflow d))))]
        [else
         (define-values (fd why) (listener-try-accept (door-listener d)))
         (cond
           [fd (admit! d fd why slot) (loop (add1 n))]
           [else
            (semaphore-post slot)
            (cond
              [(eq? why 'scarce) (pause-accepting! d (alarm-at-evt (+ (now-ms) 100)))]
              [(exn? why)
               (log-fastcgi-error "~a; retrying in 1 s" (log-escape (exn-message why)))
               (pause-accepting! d (alarm-at-evt (+ (now-ms) 1000)))])])]))))

;; pause-accepting! : door evt -> void
(define (pause-accepting! d evt)
  (define l (door-listener d))
  (poller-forget! (door-poller d) (listener-fd l) l)
  (thread (λ () (sync evt) (accept-in-loop! d))))

;; accept-in-loop! : door -> boolean ; #f when epoll refuses the listener
(define (accept-in-loop! d)
  (define l (door-listener d))
  (start-atomic)
  (define ok? (or (server-closing? (door-srv d)) (poller-add! (door-poller d) (listener-fd l) l)))
  (end-atomic)
  ok?)

;; start-acceptor! : door -> thread ; without the loop, a thread accepts
(define (start-acceptor! d)
  (define slots (door-slots d))
  (define overflow (door-overflow d))
  (thread
   (λ ()
     (let loop ()
       (define slot (or (take-slot d)
                        (sync (wrap-evt slots (λ (_) slots))
                              (wrap-evt overflow (λ (_) overflow)))))
       (define-values (fd peer)
         (with-handlers ([exn:fail:fastcgi:transport? (λ (e) (values #f #f))])
           (listener-accept-fd (door-listener d))))
       ;; a slot may have freed while accept waited
       (define slot*
         (if (and fd (eq? slot overflow) (semaphore-try-wait? slots))
             (begin (semaphore-post overflow) slots)
             slot))
       (cond
         [fd (admit! d fd peer slot*)
             ;; one connection a turn, as the loop accepts (accepts-per-turn): the new
             ;; connection's thread runs before the next accept, so that in a burst of
             ;; connections a busy worker leaves the rest to idle siblings. Accepting them
             ;; all at once, one worker took nearly every connection nginx opened and kept
             ;; (accept-balance-nginx-test) and the pool served on one core.
             (sleep 0)
             (loop)]
         [else (semaphore-post slot*)])))))   ; the listener was closed: stop accepting

;; stop! : door real (listof bytes) -> void
;; hand-to: the handover addresses of siblings that go on serving (a worker replaced by
;; a reload or a recycle): each kept connection goes to one of them once it is idle
;; (connection.rkt's hand-over-idle!), rather than be closed under a front that may be
;; sending on it. Without any (a stop of the pool), a kept connection is closed right
;; after its next answer, so that the front reads the end with the answer and does not
;; reuse it; one still idle after drain-timeout is closed then. (Any close of an idle
;; connection may meet a request the front is sending at that moment: this leaves that
;; to connections that stayed idle the whole time, which a front under load has none of.)
(define (stop! d timeout hand-to)
  (define srv (door-srv d))
  (define lim (server-limits srv))
  (define conns (server-connections srv))
  (define listener (door-listener d))
  (define poller (door-poller d))
  (unless (server-closing? srv)
    (when (pair? hand-to) (set-server-handover! srv hand-to))
    (set-server-closing?! srv #t)
    (when poller (poller-forget! poller (listener-fd listener) listener))
    (listener-close! listener)
    (when (door-acceptor d) (thread-wait (door-acceptor d)))
    (define linger-until (+ (now-ms) (* 1000 (min timeout (limits-drain-timeout lim)))))
    (define (sweep!)
      (for ([c (in-list (table-values conns))])
        (cond [(pair? hand-to) (hand-over-idle! c)]
              [(and (zero? (table-count (conn-requests c))) (>= (now-ms) linger-until))
               (conn-close! c)])))
    (sweep!)
    (define deadline (+ (now-ms) (* 1000 timeout)))
    (let wait ()
      (when (and (positive? (table-count conns)) (< (now-ms) deadline))
        (sleep 0.05)
        (sweep!)
        (wait)))
    (when (pair? hand-to)
      (log-fastcgi-info "handed ~a kept connection(s) over to the workers that go on"
                        (hash-ref (server-stats srv) 'handed-over 0)))
    (for ([c (in-list (table-values conns))])
      (log-fastcgi-warning "stop: cutting the connection from ~a after ~a s"
                           (log-escape (conn-peer c)) timeout)
      (conn-broken! c))
    (timer-stop! (server-timer srv))
    (when poller (poller-stop! poller))
    (log-fastcgi-info "stopped listening on ~a" (listener-address listener))))

;; Connections the loop accepts at most before it reads the others again. One: workers of
;; a manager share the listening socket, and a loop that took every pending connection at
;; once kept a burst of a front's connections, and their requests for as long as the front
;; keeps them, on one worker (the bench saw a second worker add nothing on CPU-bound requests).
;; Taking one, then serving what is ready, leaves the next to a worker with less to do.
(define accepts-per-turn 1)

;; Connections accepted past max-connections at one time, only to be answered 503.
(define overflow-connections 64)

;; start-timer! : timer server -> void
;; The server's periodic work, all on its one timer: the deadline sweep, the inline
;; take-over watch and, with shedding on, the queue-delay estimate.
(define (start-timer! tm srv)
  (define lim (server-limits srv))
  (define running (server-running srv))
  (timer-every! tm deadline-sweep-ms (λ () (sweep-deadlines! (server-connections srv) lim)))
  (timer-every! tm inline-takeover-ms (λ () (take-over-inline! srv))
                #:quiet-limit inline-quiet-ticks
                ;; a request that comes after this check wakes it (before its handler runs)
                #:sleep (λ (wake) (server-on-next-request! srv wake (λ () (zero? (unbox running))))))
  (when (limits-max-queue-delay lim)
    (timer-every! tm estimate-period-ms (queue-delay-estimator srv)))
  (timer-start! tm))

(define deadline-sweep-ms 250)
(define estimate-period-ms 100)

;; take-over-inline! : server -> boolean
;; A handler run inline by its connection's reader (connection.rkt) that has run for
;; inline-takeover-ms gets a new reader thread, so the connection is read again soon:
;; ABORT_REQUEST, a closed connection, a second request. #t while handlers run; after
;; inline-quiet-ticks runs in a row that found none, the timer puts this task to sleep
;; until the next request (a pending short timer keeps Racket CS's scheduler polling
;; instead of waiting).
(define (take-over-inline! srv)
  (define busy? (positive? (unbox (server-running srv))))
  (when busy?
    (define now (now-ms))
    (for ([c (in-list (table-values (server-connections srv)))])
      (define r (conn-inline c))
      (when (and r (> (- now (fastcgi-request-start-ms r)) inline-takeover-ms))
        (ensure-reader! c))))
  busy?)

(define inline-takeover-ms 10.0)
(define inline-quiet-ticks 100)

;; sweep-deadlines! : table limits -> void
;; Cuts the connections whose read or write deadline has passed (closing the socket wakes
;; the blocked reader or writer), and stops the handlers past the request timeout.
(define (sweep-deadlines! conns lim)
  (define now (now-ms))
  (for ([c (in-list (table-values conns))])
    (define rd (conn-deadline c))
    (define wd (conn-write-deadline c))
    (cond
      [(and wd (> now wd))
       (log-fastcgi-warning "write timeout: ~a stopped reading; closing" (log-escape (conn-peer c)))
       (conn-broken! c)]
      [(and rd (> now rd))
       (unless (conn-closing? c)
         (log-fastcgi-warning "read timeout: nothing from ~a in time; closing" (log-escape (conn-peer c))))
       (conn-broken! c)]
      [else (check-request-timeouts! c lim now)])))
