#lang racket/base
;; One connection from a front: a single reader loop that decodes records and routes them
;; to the live requests (many at once: multiplexing), management answers (GET_VALUES,
;; UNKNOWN_TYPE), limits, and the handler threads. Knows nothing of HTTP.
;;
;; Body flow rule. Each request has its own stdin buffer (limits-stdin-buffer bytes).
;; While it is the only live request on its connection, a full buffer pauses the reader,
;; so TCP pushes back on the front and an upload of any size streams through a small buffer.
;; When other requests are live on the same connection, the reader never waits on one
;; handler: a request whose buffer overflows is ended at once (the empty STDOUT if any
;; STDOUT left, then END_REQUEST with application status 1; its handler's reads and writes
;; fail from then on), and the others go on. A handler that reads nothing of a pending body
;; for read-timeout seconds is ended the same way; so is a request whose body would take
;; what a multiplexed connection's live requests hold past connection-buffer (and a
;; PARAMS record that would is answered OVERLOADED): see over-connection-buffer?.
;; (the modules below it first, then the two it is made of)
(require ffi/unsafe/atomic
         "../util/catch.rkt" "../util/log.rkt" "log-limit.rkt" "../util/limits.rkt" "../util/table.rkt"
         "../protocol/protocol.rkt" "wire.rkt" (submod "wire.rkt" connection) "owner.rkt" "../os/handover.rkt" "request.rkt"
         "dispatch.rkt" "handler-run.rkt")
(provide serve-connection
         loop-step!
         hand-over-idle!
         conn-close!
         check-request-timeouts!
         stat-add!
         note-shed!
         queue-delay-ms)

;; Inline handlers. Most fronts (nginx, Apache, lighttpd) never multiplex: a kept
;; connection carries one request at a time, and the reader would only wait while a
;; handler thread of its own answers it. So a request whose input has all arrived, alone
;; on a connection that never had two live requests at once, runs in the reader's own
;; thread: no thread to make and two thread switches fewer per request (see
;; bench/OPTIMISATIONS.md, inline handlers). Nothing reads the connection meanwhile;
;; whoever needs a reader asks for one (ensure-reader! in wire.rkt: owner.rkt's
;; take-over), and a new reader thread goes on from where this one stopped: the handler
;; waiting on its abort-evt, and the server's watcher once the handler has run for a
;; while (so ABORT_REQUEST, a closed connection and a second request are still seen).
;; Everything else is as with a thread: the same limits, timeouts (a break), log and
;; answer. Requests with a body still arriving, Filters, multiplexed connections, every
;; request when shedding is on (its handlers have a thread group) and every request under
;; a request-memory limit (its handler runs in a thread of its own: contain.rkt) get a
;; thread.
;; One difference a handler can see: a parameter it sets directly (not parameterize)
;; stays set for the later requests of the same connection, as in Racket's web-server
;; (and, with the event loop below, of the other connections the loop thread reads).

;; The event loop. A connection served by a server's poller (poller.rkt) has no thread of
;; its own while it waits for input: the loop thread runs its reader (run-reader) when
;; the socket is readable, and the reader returns, "parked", where it would have waited.
;; The loop must never block for one connection: before the reader or an inline handler
;; would block, the connection leaves the loop for good and a new thread becomes the
;; loop. Who reads a connection at each moment (parked, the loop, an inline handler, a
;; thread of its own, taken over, ended) and every hand-over between them is owner.rkt's
;; state machine, with its table of transitions. Not with shedding on (its handlers and
;; readers need a thread group) nor for connections not on a socket.


;; Reads a connection gets in one turn of the loop, so that a peer that sends without
;; pause cannot keep the loop from the others.
(define reads-per-turn 8)


;; serve-connection : conn [(-> any)] #:poller (or/c #f poller) -> void
;; Without a poller: reads the connection in the calling thread until it ends or an
;; inline handler's reading is taken over by a new thread. With one: registers the
;; connection with it and returns at once. Whichever thread sees the end calls done.
;; handed-over: #f, or what a retiring sibling handed over with the connection (handover.rkt).
(define (serve-connection c [done void] #:poller [p #f] #:handed-over [h #f])
  (define lim (server-limits (conn-server c)))
  (define st (rd (make-decoder) #f #f 0 done (current-parameterization) 0 #f))
  (cond
    [h
     ;; served from where the sibling stopped: the bytes it read, the deadline with what
     ;; it had left (a handover renews none: a peer that never sends a byte is closed at
     ;; its first-byte deadline however often workers recycle), and whether it had records
     ;; and requests (a late record of one its sibling ended, a STDIN, an ABORT_REQUEST, is
     ;; skipped as here, not taken for one before any BEGIN_REQUEST). It has no live
     ;; request, so it awaits something: one sent awaiting nothing gets its deadline here.
     (conn-await-left! c (or (handed-awaiting h) (if (handed-served? h) 'idle 'first-byte))
                       (handed-left-ms h))
     (decoder-feed! (rd-decoder st) (handed-pending h))
     (set-rd-begun?! st (handed-begun? h))
     (set-rd-served! st (if (handed-served? h) 1 0))]
    [else (conn-await! c 'first-byte)])
  (define loop? (and p (conn-fd c) (not (limits-max-queue-delay lim))))
  (define o (make-owner #:poller (and loop? p) #:fd (conn-fd c) #:entry c
                        #:resume resume-reading! #:lose connection-lost!))
  (set-conn-reader! c st)
  (set-conn-owner! c o)
  (unless (and loop? (owner-join-loop! o))
    (if loop? (start-reader! c st) (run-reader c st))))

;; connection-lost! : conn -> void
;; The connection was cut (conn-broken!): every live request learns it; nobody is in the
;; reader of a parked connection to see it end, so this ends it. (Its owner's lose action.)
(define (connection-lost! c)
  (abort-all! c)
  (when (owner-parked? (conn-owner c)) (end-connection! c (conn-reader c))))

;; resume-reading! : conn -> void ; a new thread reads on (its owner's resume action)
(define (resume-reading! c)
  (start-reader! c (conn-reader c)))

;; loop-step! : conn -> void ; the loop's step for a readable connection (server.rkt)
(define (loop-step! c)
  (define o (conn-owner c))
  (when (and (not (conn-broken? c)) (owner-step! o 'step))
    (define st (conn-reader c))
    (set-rd-short?! st #f)
    (set-rd-reads! st 0)
    (run-reader c st)))

;; end-connection! : conn rd -> void ; once per connection
(define (end-connection! c st)
  (when (owner-end! (conn-owner c))
    (conn-broken! c)
    ;; a request admitted but still pending is aborted by now: it gives back its slot
    (start-pending! c)
    ((rd-done st))))

;; run-reader : conn rd -> void
(define (run-reader c st)
  ;; With shedding on, the handlers this reader starts go into one thread group: Racket
  ;; shares the CPU between the group as a whole and each other thread, so however many
  ;; handlers compute, a reader still gets its turn at once and reads its request, and a
  ;; request to be shed gets its 503 in milliseconds, not after the queue it is refused
  ;; from. (Off, every thread gets its own share, as Racket's scheduler gives it.)
  (when (limits-max-queue-delay (server-limits (conn-server c)))
    (current-thread-group (server-handler-group (conn-server c))))
  (define result
    (catch-all (λ (e) (log-fastcgi-error "connection from ~a: ~a" (log-escape (conn-peer c))
                                         (log-escape (if (exn? e) (exn-message e) e)))
                 #t)
      ;; breaks are for handlers (the request timeout), enabled only around them
      (parameterize-break #f (read-loop c st))))
  (cond
    [(eq? result 'parked) (park! c st)]
    [result (end-connection! c st)]))

;; park! : conn rd -> void ; the loop's reader would wait: it waits in the loop (park)
(define (park! c st)
  (owner-step! (conn-owner c) 'park)
  ;; broken meanwhile: whoever broke it (conn-broken!: broken?, then the owner's lose
  ;; action, which ends a parked one) may have looked before it was parked
  (when (conn-broken? c) (end-connection! c st)))

;; start-reader! : conn rd -> thread
;; A new thread takes over reading, under the parameterization the connection was served
;; with (its custodian among them): not that of whoever asks, which may be a handler
;; running inline (ensure-reader!), whose parameterize (current-fastcgi-request's too)
;; must not outlive its request in the connection's later readers.
(define (start-reader! c st)
  (call-with-parameterization (rd-paramz st) (λ () (thread (λ () (run-reader c st))))))

;; read-loop : conn rd -> (or/c boolean 'parked)
;; #t when the connection has ended, #f when handed over, 'parked when the loop reads it
;; and it has nothing more to read now.
(define (read-loop c st)
  (define lim (server-limits (conn-server c)))
  (define d (rd-decoder st))
  ;; read! : bytes natural natural -> (or/c natural eof 'would-block 'wake)
  (define (read! bs start end)
    (define loop? (eq? (owner-state (conn-owner c)) 'loop))
    (cond
      ;; the last read filled less than the space it had, so the socket is most likely
      ;; empty: the loop parks without a read() that would only say EAGAIN (epoll reports
      ;; the socket again if it is not); a thread of its own waits before reading (see
      ;; conn-read!)
      [(and loop? (or (rd-short? st) (>= (rd-reads st) reads-per-turn))) 'would-block]
      [else
       (when loop? (set-rd-reads! st (add1 (rd-reads st))))
       (define n (if loop?
                     (conn-try-read! c bs start end)
                     (conn-read! c bs start end (rd-short? st))))
       (set-rd-short?! st (and (exact-integer? n) (< n (- end start))))
       (cond [(eqv? n 0) 'would-block]
             [(exn? n) eof]               ; a socket error ends the connection
             [else n])]))
  (let loop ()
    (define type (decoder-view! d))
    (cond
      [(string? type) (protocol-close! c (string-append "decoder: " type)) #t]
      [type
       (cond
         [(conn-closing? c) (loop)]
         [else
          (when (and (not (rd-begun? st)) (eq? type 'begin-request)) (set-rd-begun?! st #t))
          (define problem (dispatch! c d type (rd-begun? st)))
          (set-rd-served! st (add1 (rd-served st)))
          (define r (conn-pending c))
          (cond
            [problem (protocol-close! c problem) #t]
            [(and r (eq? (fastcgi-request-state r) 'done)) ; ended before it ran
             (start-pending! c)         ; gives back its slot
             (loop)]
            [(and r (request-input-done? r))
             (if (run-inline! c st r) (loop) #f)]
            [else (loop)])])]
      [(and (not (conn-closing? c)) (decoder-header-problem d (rd-begun? st)))
       => (λ (problem) (protocol-close! c problem) #t)]
      ;; a retiring server: an idle connection goes to a sibling (see handover.rkt)
      [(and (server-handover (conn-server c)) (handover-ready? c) (hand-over-or-close! c st))
       #t]
      [else
       ;; the pending request's input goes on: its handler needs the reader
       (start-pending! c)
       ;; A thread of its own sets the deadline before the read that may wait; the loop,
       ;; whose reads never wait, only when it parks.
       (unless (eq? (owner-state (conn-owner c)) 'loop) (next-deadline! c st))
       ;; an idle connection gives back a decoder buffer that grew for a big record
       (when (zero? (table-count (conn-requests c))) (decoder-shrink! d))
       (define-values (buf start end) (decoder-room! d))
       (define n (read! buf start end))
       (when (exact-integer? n)
         (decoder-filled! d n)
         (set-rd-fresh?! st #t))
       (cond
         [(eof-object? n) #t]
         [(eq? n 'would-block) (next-deadline! c st) 'parked]
         [else (loop)])])))

;; next-deadline! : conn rd -> void
;; The read deadline for what comes next, once bytes came since it was last chosen: a
;; wait that got none (a wake, a new reader thread, a connection just handed over) goes
;; on with the deadline it had. Before the first whole record the deadline set at accept
;; stands, so a peer that trickles a header byte by byte cannot hold the connection past
;; first-byte-timeout.
(define (next-deadline! c st)
  (when (rd-fresh? st)
    (set-rd-fresh?! st #f)
    (unless (or (conn-closing? c) (zero? (rd-served st)))
      (set-read-deadline! c (> (decoder-buffered (rd-decoder st)) 0)))))

;; run-inline! : conn rd request -> boolean
;; Runs r's handler in this, the reader's, thread. #t: this thread is still the reader;
;; #f: a new reader took over meanwhile (this thread is done with the connection).
(define (run-inline! c st r)
  (unpend! c)
  ;; its input has ended and it is the only live request (see params-done!): no read
  ;; deadline while it runs; retire! starts the idle clock
  (conn-await! c #f)
  (set-conn-inline! c r)
  (owner-run-inline! (conn-owner c))
  (define err (current-error-port))
  (request-handler-started! r (current-thread))
  (run-handler! c r)
  (current-error-port err)
  (define still-reader? (owner-return! (conn-owner c)))
  (set-conn-inline! c #f)
  ;; a request timeout that broke r just as it ended left a break pending: drop it, so
  ;; that it cannot hit the next request's handler (broken-ms is set before any break)
  (when (fastcgi-request-broken-ms r)
    (with-handlers ([exn:break? void]) (parameterize-break #t (void))))
  still-reader?)

;; set-read-deadline! : conn boolean -> void
;; Atomic: retire! (in a handler's thread) also sets the deadline from the live requests.
(define (set-read-deadline! c partial?)
  (define reqs (conn-requests c))
  (start-atomic)
  (conn-await! c (cond
                   [(or partial? (table-ormap reqs (λ (r) (not (request-input-done? r))))) 'read]
                   [(> (table-count reqs) 0) #f]
                   [else 'idle]))
  (end-atomic))

;; protocol-close! : conn string -> void
(define (protocol-close! c why)
  (warn-limited! (conn-server c) 'protocol
                 (λ () (format "protocol error from ~a: ~a; closing the connection"
                               (log-escape (conn-peer c)) (log-escape why))))
  (conn-broken! c))


;; handover-ready? : conn -> boolean ; nothing live: the connection may change owner
(define (handover-ready? c)
  (and (conn-fd c)
       (zero? (table-count (conn-requests c)))
       (not (conn-closing? c))
       (not (conn-broken? c))))

;; hand-over-or-close! : conn rd -> boolean
;; Called by the connection's reader (or whoever holds its parked loop state): #t when a
;; sibling took the socket (the caller ends the connection here, which closes only this
;; process's copy); #f when none did, and then it closes gracefully (conn-close!).
;; Nothing else that bounds the connection needs to go with it: it has no live request
;; (handover-ready?), the sibling counts it against its own max-connections (adopt! in
;; server.rkt takes a slot, and this one's slot frees as it ends here), and a closing
;; one, whose deadline is the drain's, is never handed over.
(define (hand-over-or-close! c st)
  (define to (server-handover (conn-server c)))
  ;; the deadline as this reader would wait with it now (bytes just read count)
  (next-deadline! c st)
  (define-values (awaiting left) (conn-deadline-left c))
  (cond
    [(and to (hand-over! (conn-fd c) (conn-peer c)
                         (handed (decoder-pending (rd-decoder st)) awaiting left
                                 (positive? (rd-served st)) (rd-begun? st))
                         to))
     (stat-add! (conn-server c) 'handed-over)
     #t]
    [else
     (warn-limited! (conn-server c) 'handover
                    (λ () (format "no other worker took the connection from ~a: closing it"
                                  (log-escape (conn-peer c)))))
     (conn-close! c)
     #f]))

;; hand-over-idle! : conn -> void
;; While the server hands its connections over (server-handover), for its sweeper: a
;; connection idle in the event loop is handed over here, its parked state claimed as
;; loop-step! claims it; a reader thread waiting for input is woken to do it itself.
(define (hand-over-idle! c)
  (define o (conn-owner c))
  (cond
    [(not o) (void)]
    [(owner-loop? o)
     (when (and (handover-ready? c) (owner-step! o 'step))
       (define st (conn-reader c))
       (if (hand-over-or-close! c st) (end-connection! c st) (park! c st)))]
    [(handover-ready? c) (semaphore-post (conn-wake c))]))

