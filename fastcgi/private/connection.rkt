#lang racket/base
;; One connection from a front: a single reader loop that decodes records and routes them
;; to the live requests (many at once: multiplexing), management answers (GET_VALUES,
;; UNKNOWN_TYPE), limits, and the handler threads. Knows nothing of HTTP.
;;
;; Body flow rule. Each request has its own stdin buffer (limits-stdin-buffer bytes).
;; While it is the only live request on its connection, a full buffer pauses the reader,
;; so TCP pushes back on the front and a 1 GiB upload streams through a small buffer.
;; When other requests are live on the same connection, the reader never waits on one
;; handler: a request whose buffer overflows is ended at once (the empty STDOUT if any
;; STDOUT left, then END_REQUEST with application status 1; its handler's reads and writes
;; fail from then on), and the others go on. A handler that reads nothing of a pending body
;; for read-timeout seconds is ended the same way; so is a request whose body would take
;; what a multiplexed connection's live requests hold past connection-buffer (and a
;; PARAMS record that would is answered OVERLOADED): see over-connection-buffer?.
(require ffi/unsafe/atomic
         "catch.rkt"
         "contain.rkt"
         "limits.rkt"
         "log.rkt"
         "protocol.rkt"
         "request.rkt"
         "table.rkt"
         "wire.rkt"
         "handover.rkt"
         "owner.rkt"
         "log-limit.rkt")
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

;; The reader's state, shared by the threads that read one connection in turn (which of
;; them reads it now is its owner's state: owner.rkt). reads: read() calls in this turn of
;; the loop; done: what the thread that sees the end does.
(struct rd (decoder [short? #:mutable] [begun? #:mutable] [served #:mutable] done custodian
                    [reads #:mutable]))

;; Reads a connection gets in one turn of the loop, so that a peer that sends without
;; pause cannot keep the loop from the others.
(define reads-per-turn 8)


;; serve-connection : conn [(-> any)] #:poller (or/c #f poller) -> void
;; Without a poller: reads the connection in the calling thread until it ends or an
;; inline handler's reading is taken over by a new thread. With one: registers the
;; connection with it and returns at once. Whichever thread sees the end calls done.
;; handed-over: #f, or the bytes a retiring sibling had read of the connection (it is
;; between requests: handover.rkt).
(define (serve-connection c [done void] #:poller [p #f] #:handed-over [pending #f])
  (define lim (server-limits (conn-server c)))
  ;; a connection handed over by a retiring sibling is a kept one, between requests
  (set-conn-deadline! c (+ (now-ms) (* 1000 (if pending
                                                 (limits-idle-timeout lim)
                                                 (limits-first-byte-timeout lim)))))
  (define st (rd (make-decoder) #f #f 0 done (current-custodian) 0))
  ;; it has had requests: a late record of one its sibling ended (a STDIN, an
  ;; ABORT_REQUEST) is skipped as here, not taken for one before any BEGIN_REQUEST
  (when pending
    (decoder-feed! (rd-decoder st) pending)
    (set-rd-begun?! st #t)
    (set-rd-served! st 1))
  (define loop? (and p (conn-fd c) (not (limits-max-queue-delay lim))))
  (define o (make-owner #:poller (and loop? p) #:fd (conn-fd c) #:entry c
                        #:resume (λ () (start-reader! c st))
                        #:lose (λ () (connection-lost! c st))))
  (set-conn-reader! c st)
  (set-conn-owner! c o)
  (unless (and loop? (owner-join-loop! o))
    (if loop? (start-reader! c st) (run-reader c st))))

;; connection-lost! : conn rd -> void
;; The connection was cut (conn-broken!): every live request learns it; nobody is in the
;; reader of a parked connection to see it end, so this ends it.
(define (connection-lost! c st)
  (abort-all! c)
  (when (owner-parked? (conn-owner c)) (end-connection! c st)))

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
  ;; from. (Off, scheduling is as it was before shedding existed.)
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
  (start-atomic)
  (owner-step! (conn-owner c) 'park)
  (define broken? (conn-broken? c))
  (end-atomic)
  ;; broken meanwhile: whoever broke it may have looked before it was parked
  (when broken? (end-connection! c st)))

;; start-reader! : conn rd -> thread ; a new thread takes over reading
(define (start-reader! c st)
  (parameterize ([current-custodian (rd-custodian st)])
    (thread (λ () (run-reader c st)))))

;; read-loop : conn rd -> (or/c boolean 'parked)
;; #t when the connection has ended, #f when handed over, 'parked when the loop reads it
;; and it has nothing more to read now.
(define (read-loop c st)
  (define lim (server-limits (conn-server c)))
  (define d (rd-decoder st))
  (define read!
    (if (conn-fd c)
        (λ (bs start end)
          (define loop? (eq? (owner-state (conn-owner c)) 'loop))
          (cond
            ;; the last read from the socket filled less than the space it had, so it is
            ;; most likely empty: the loop parks without a read() that would only say
            ;; EAGAIN (epoll reports the socket again if it is not); a thread of its own
            ;; waits before reading (see conn-read!)
            [(and loop? (or (rd-short? st) (>= (rd-reads st) reads-per-turn))) 'would-block]
            [else
             (when loop? (set-rd-reads! st (add1 (rd-reads st))))
             (define n (if loop?
                           (conn-try-read! c bs start end)
                           (conn-read! c bs start end (rd-short? st))))
             (set-rd-short?! st (and (exact-integer? n) (< n (- end start))))
             (cond [(eqv? n 0) 'would-block]
                   [(exn? n) eof]         ; a socket error ends the connection
                   [else n])]))
        (let ([in (conn-in c)])
          (λ (bs start end)
            (with-handlers ([exn:fail? (λ (e) eof)]) (read-bytes-avail! bs in start end))))))
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
       (unless (eq? (owner-state (conn-owner c)) 'loop) (next-deadline! c st lim))
       ;; an idle connection gives back a decoder buffer that grew for a big record
       (when (zero? (table-count (conn-requests c))) (decoder-shrink! d))
       (define n (decoder-fill! d read!))
       (cond
         [(eof-object? n) #t]
         [(eq? n 'would-block) (next-deadline! c st lim) 'parked]
         [else (loop)])])))

;; next-deadline! : conn rd limits -> void
;; The read deadline for what comes next. Before the first whole record the deadline set
;; at accept stands, so a peer that trickles a header byte by byte cannot hold the
;; connection past first-byte-timeout.
(define (next-deadline! c st lim)
  (unless (or (conn-closing? c) (zero? (rd-served st)))
    (set-read-deadline! c lim (> (decoder-buffered (rd-decoder st)) 0))))

;; run-inline! : conn rd request -> boolean
;; Runs r's handler in this, the reader's, thread. #t: this thread is still the reader;
;; #f: a new reader took over meanwhile (this thread is done with the connection).
(define (run-inline! c st r)
  (set-conn-pending! c #f)
  ;; its input has ended and it is the only live request (see params-done!): no read
  ;; deadline while it runs; retire! starts the idle clock
  (set-conn-deadline! c #f)
  (set-conn-inline! c r)
  (owner-run-inline! (conn-owner c))
  (define err (current-error-port))
  (set-fastcgi-request-handler! r (current-thread))
  (run-handler! c r)
  (current-error-port err)
  (define still-reader? (owner-return! (conn-owner c)))
  (set-conn-inline! c #f)
  ;; a request timeout that broke r just as it ended left a break pending: drop it, so
  ;; that it cannot hit the next request's handler (broken-ms is set before any break)
  (when (fastcgi-request-broken-ms r)
    (with-handlers ([exn:break? void]) (parameterize-break #t (void))))
  still-reader?)

;; set-read-deadline! : conn limits boolean -> void
;; Atomic: retire! (in a handler's thread) also sets the deadline from the live requests.
(define (set-read-deadline! c lim partial?)
  (define reqs (conn-requests c))
  (start-atomic)
  (define secs
    (cond
      [(or partial? (table-ormap reqs (λ (r) (not (request-input-done? r)))))
       (limits-read-timeout lim)]
      [(> (table-count reqs) 0) #f]
      [else (limits-idle-timeout lim)]))
  (set-conn-deadline! c (and secs (+ (now-ms) (* 1000 secs))))
  (end-atomic))

;; protocol-close! : conn string -> void
(define (protocol-close! c why)
  (warn-limited! (conn-server c) 'protocol
                 (λ () (format "protocol error from ~a: ~a; closing the connection"
                               (log-escape (conn-peer c)) (log-escape why))))
  (conn-broken! c))

;; abort-all! : conn -> void ; the connection is gone: every live request learns it
(define (abort-all! c)
  (for ([r (in-list (table-values (conn-requests c)))])
    (request-abort! r))
  (table-clear! (conn-requests c)))

;; conn-close! : conn -> void
;; Graceful close: no new requests, half-close, then the reader drains what the peer still
;; sends until EOF or drain-timeout, and closes.
(define (conn-close! c)
  (unless (or (conn-closing? c) (conn-broken? c))
    (set-conn-closing?! c #t)
    (set-conn-deadline! c (+ (now-ms) (* 1000 (limits-drain-timeout (server-limits (conn-server c))))))
    (conn-lock! c)
    (conn-shutdown-write! c)
    (semaphore-post (conn-lock c))))

;; send-end-request! : conn natural symbol -> void ; END_REQUEST for a request never made live
(define (send-end-request! c id status)
  (conn-send! c (record->bytes 'end-request id (end-request-content 0 status))))

;; dispatch! : conn decoder (or/c symbol byte) boolean -> (or/c #f string)
;; Handles the record decoder-view! took last, of this type (its content is still in the
;; decoder's buffer); a string names a protocol error that closes the connection.
(define (dispatch! c d type begun?)
  (define id (decoder-id d))
  (define reqs (conn-requests c))
  (case type
    [(begin-request) (begin-request! c id (decoder-content d))]
    [(params stdin data abort-request)
     (define r (table-ref reqs id #f))
     (cond
       [(not begun?) (format "~a record before any BEGIN_REQUEST" type)]
       [(zero? id) (unknown-type! c type)]
       [(not r) #f]                     ; not live: skip (its content is already consumed)
       [(eq? type 'params) (params! c r d)]
       [(eq? type 'abort-request)
        (request-end-now! r 1)
        (retire! c r)
        #f]
       [else (body! c r type d)])]
    [(get-values)
     (cond
       [(zero? id) (get-values! c (decoder-content d))]
       [else #f])]
    [else
     (if (zero? id) (unknown-type! c type) #f)]))

;; unknown-type! : conn (or/c symbol byte) -> #f
;; A management record (request id 0) of any type but GET_VALUES, which the application
;; does not understand as one: answered UNKNOWN_TYPE, as libfcgi does (an unknown type
;; number, or one only an application sends, such as STDOUT).
(define (unknown-type! c type)
  (conn-send! c (record->bytes 'unknown-type 0 (unknown-type-content type)))
  #f)

;; begin-request! : conn natural bytes -> (or/c #f string)
(define (begin-request! c id content)
  (define srv (conn-server c))
  (define reqs (conn-requests c))
  (cond
    [(zero? id) "BEGIN_REQUEST with request id 0"]
    [(not (= (bytes-length content) 8))
     (format "BEGIN_REQUEST with content length ~a" (bytes-length content))]
    [(live-request reqs id) (format "second BEGIN_REQUEST for live request ~a" id)]
    [else
     (define-values (role keep?) (parse-begin-request content))
     (cond
       [(not (memq role (server-roles srv)))
        (warn-once-a-second! srv 'unknown-role "refused so"
                             (λ () (format "request ~a from ~a: role ~a not served: UNKNOWN_ROLE"
                                           id (log-escape (conn-peer c)) role)))
        (send-end-request! c id 'unknown-role)
        (unless keep? (conn-close! c))
        #f]
       [(>= (table-count reqs) (limits-max-requests-per-connection (server-limits srv)))
        (note-overloaded! srv (λ () (format "request ~a from ~a: over ~a live requests on one connection"
                                            id (log-escape (conn-peer c))
                                            (limits-max-requests-per-connection (server-limits srv)))))
        (send-end-request! c id 'overloaded)
        #f]
       [else
        (when (positive? (table-count reqs))
          ;; a multiplexing front: from now on every request here gets a thread
          (set-conn-mpx?! c #t)
          (start-pending! c))
        (table-set! reqs id (make-fastcgi-request c id role keep?))
        #f])]))

;; live-request : table natural -> (or/c fastcgi-request #f)
;; The request with this id that has not ended. One that has sent its END_REQUEST (state
;; done) but whose handler thread has not yet taken it out of the table (retire!) is not:
;; the front may reuse its id as soon as it has read that END_REQUEST, and nginx sends its
;; next request on a kept connection at once; a reader thread that saw it before the
;; handler's retire! took it for a second BEGIN_REQUEST and closed the connection. It
;; leaves the table now (retire! removes a request only if it is still the one there).
(define (live-request reqs id)
  (define r (table-ref reqs id #f))
  (cond
    [(and r (eq? (fastcgi-request-state r) 'done))
     (table-remove-if-eq! reqs id r)
     #f]
    [else r]))

;; params! : conn request decoder -> (or/c #f string) ; a PARAMS record, in d
(define (params! c r d)
  (define lim (server-limits (conn-server c)))
  (define len (decoder-content-length d))
  (cond
    [(not (eq? (fastcgi-request-state r) 'params)) #f]
    [(and (positive? len) (over-connection-buffer? c len lim))
     (note-overloaded! (conn-server c)
                       (λ () (format "request ~a from ~a: over ~a bytes of input held on a multiplexed connection"
                                     (fastcgi-request-id r) (log-escape (conn-peer c)) (limits-connection-buffer lim))))
     ;; never admitted: no handler, no answer of its own, its later records skipped
     (request-finish! r 0 'overloaded #:stdout-end? #f)
     (retire! c r)
     #f]
    [(positive? len)
     (define size (+ (fastcgi-request-params-size r) len))
     (set-fastcgi-request-params-size! r size)
     (when (<= size (limits-max-params-bytes lim))
       (set-fastcgi-request-params-acc! r (cons (decoder-content d) (fastcgi-request-params-acc r))))
     #f]
    [(> (fastcgi-request-params-size r) (limits-max-params-bytes lim))
     (reject! c r 431 "Request Header Fields Too Large"
              (format "params of ~a bytes over the limit of ~a"
                      (fastcgi-request-params-size r) (limits-max-params-bytes lim)))]
    [else
     (define acc (fastcgi-request-params-acc r))
     (define all (if (and (pair? acc) (null? (cdr acc))) (car acc) (apply bytes-append (reverse acc))))
     (set-fastcgi-request-params-acc! r '())
     ;; checked now, made into pairs when asked for (fastcgi-request-params)
     (define problem (check-params all (limits-max-params-pairs lim)))
     (cond
       [(string? problem)
        (define too-many? (regexp-match? #rx"more than" problem))
        (reject! c r (if too-many? 431 400)
                 (if too-many? "Request Header Fields Too Large" "Bad Request")
                 problem)]
       [else
        (set-fastcgi-request-pv! r (raw-params all 0 (bytes-length all)))
        (params-done! c r)])]))

;; reject! : conn request natural string string -> #f
;; Answers before any handler ran; the request's remaining records are skipped.
(define (reject! c r code message why)
  (warn-limited! (conn-server c) 'rejected
                 (λ () (format "request ~a from ~a: ~a: answered ~a"
                               (fastcgi-request-id r) (log-escape (conn-peer c)) (log-escape why) code)))
  (stat-add! (conn-server c) (string->symbol (format "rejected-~a" code)))
  (request-respond-status! r code message)
  (retire! c r)
  (observe! c r)
  #f)

;; queue-delay-ms : server -> flonum
;; The CPU work ahead of a request admitted now: handlers running x the recent CPU cost of
;; a request (see watch-queue-delay in server.rkt). Under processor sharing that is about
;; how much later than alone the newcomer finishes.
(define (queue-delay-ms srv)
  (* (unbox (server-running srv)) (unbox (server-request-cost srv)) (unbox (server-stretch srv))))

;; shed? : server limits -> boolean
;; A request whose work ahead is over max-queue-delay is refused. This is a concurrency
;; limit that follows what requests cost: 20 ms handlers get 25 at a time for 0.5 s, I/O
;; waits get max-concurrent. With at least one admitted at any time, the served requests
;; keep a bounded latency under any overload, and the rest get a fast 503.
(define (shed? srv lim)
  (define max-delay (limits-max-queue-delay lim))
  (and max-delay (> (queue-delay-ms srv) (* 1000.0 max-delay))))

;; shed! : conn request (-> string) -> #f ; why is made only for the log line
;; Answers 503 before any handler ran, as reject! does, but logs at most one line a
;; second for all the requests shed in it: an overload must not also flood the log.
(define (shed! c r why)
  (note-shed! (conn-server c) why)
  (request-respond-status! r 503 "Service Unavailable")
  (retire! c r)
  (observe! c r)
  #f)

;; note-shed! : server (-> string) -> void ; counts a shed request, logs once a second
(define (note-shed! srv why)
  (stat-add! srv 'shed)
  (warn-once-a-second! srv 'shed "shed" (λ () (format "overloaded: answered 503 (~a)" (why)))))

;; note-overloaded! : server (-> string) -> void
;; Counts a request refused with END_REQUEST OVERLOADED, and logs at most one line a
;; second for all of them: a peer can make thousands a second with 8-byte records.
(define (note-overloaded! srv why)
  (stat-add! srv 'overloaded)
  (warn-once-a-second! srv 'overloaded "refused so" (λ () (format "~a: OVERLOADED" (why)))))

;; params-done! : conn request -> #f ; checks, then starts the handler
(define (params-done! c r)
  (define srv (conn-server c))
  (define lim (server-limits srv))
  ;; the server's periodic threads that wait while no request comes go on
  (server-wake-sleepers! srv)
  (define declared (parse-length (request-param/scan r #"CONTENT_LENGTH")))
  (cond
    [(eq? declared 'bad)
     (reject! c r 400 "Bad Request" "CONTENT_LENGTH is not a number")]
    [(and declared (> declared (limits-max-body lim)))
     (reject! c r 413 "Content Too Large"
              (format "CONTENT_LENGTH ~a over the limit of ~a" declared (limits-max-body lim)))]
    ;; While stopping, a request that arrives on a connection with nothing else live is
    ;; served, and the connection closes after it (retire!): a front that sent it on a kept
    ;; connection at the moment the stop began (nginx does, between two requests) gets an
    ;; answer, not a 503. A newcomer on a multiplexed connection is refused, so a stream of
    ;; them cannot hold the stop open; not while the server hands its connections over
    ;; (a retiring worker): the connection goes to a sibling at its first idle moment.
    [(and (server-closing? srv) (not (server-handover srv)) (> (table-count (conn-requests c)) 1))
     (reject! c r 503 "Service Unavailable" "server stopping")]
    [(>= (unbox (server-running srv)) (limits-max-concurrent lim))
     (shed! c r (λ () (format "over ~a handlers running (max-concurrent)" (limits-max-concurrent lim))))]
    [(shed? srv lim)
     (shed! c r (λ () (format "~a ms of CPU work ahead, over the ~a ms allowed (max-queue-delay)"
                        (inexact->exact (round (queue-delay-ms srv)))
                        (inexact->exact (round (* 1000 (limits-max-queue-delay lim)))))))]
    [else
     (cond
       [(eq? (fastcgi-request-role r) 'authorizer)
        (close-request-stdin! r)
        (set-fastcgi-request-state! r 'running)]
       [else (set-fastcgi-request-state! r 'stdin)])
     ;; admitted: counted as running from now (max-concurrent), whichever way it runs
     (counter-add! (server-running srv) 1)
     (stat-add! srv 'requests)
     (if (and (not (conn-mpx? c)) (not (conn-inline c)) (not (limits-max-queue-delay lim))
              (not (eq? (fastcgi-request-role r) 'filter)) (not (limits-request-memory lim))
              (= 1 (table-count (conn-requests c))))
         (set-conn-pending! c r)        ; runs inline once its input has ended (read-loop)
         (start-handler! c r))
     #f]))

;; parse-length : (or/c bytes #f) -> (or/c natural #f 'bad)
(define (parse-length v)
  (cond
    [(or (not v) (zero? (bytes-length v))) #f]
    [(regexp-match? #px#"^[0-9]{1,18}$" v) (string->number (bytes->string/latin-1 v))]
    [else 'bad]))

;; body! : conn request symbol decoder -> (or/c #f string)
;; One STDIN or DATA record for a live request, in d.
(define (body! c r type d)
  (define state (fastcgi-request-state r))
  (define lim (server-limits (conn-server c)))
  (define data? (eq? type 'data))
  (define len (decoder-content-length d))
  (cond
    [(eq? state 'params) (format "~a for request ~a before its PARAMS ended" type (fastcgi-request-id r))]
    [(not (eq? state (if data? 'data 'stdin))) #f]   ; a stream already ended: skip
    [(zero? len)
     (if data? (close-request-data! r) (close-request-stdin! r))
     (set-fastcgi-request-state! r (if (and (not data?) (eq? (fastcgi-request-role r) 'filter)) 'data 'running))
     #f]
    [(fastcgi-request-rejected r) #f]
    [else
     (define total (+ len (if data? (fastcgi-request-data-bytes r) (fastcgi-request-body-bytes r))))
     (define cap
       (let ([declared (parse-length (request-param/scan r (if data? #"FCGI_DATA_LENGTH" #"CONTENT_LENGTH")))])
         (if (exact-integer? declared) (min declared (limits-max-body lim)) (limits-max-body lim))))
     (if data? (set-fastcgi-request-data-bytes! r total) (set-fastcgi-request-body-bytes! r total))
     (cond
       [(> total cap)
        (warn-limited! (conn-server c) 'body-over
                       (λ () (format "request ~a from ~a: ~a over ~a bytes: answered 413"
                                     (fastcgi-request-id r) (log-escape (conn-peer c)) type cap)))
        (set-fastcgi-request-rejected! r cap)
        (if data? (close-request-data! r) (close-request-stdin! r))]
       [(over-connection-buffer? c len lim)
        (warn-limited! (conn-server c) 'connection-buffer
                       (λ () (format "request ~a from ~a: over ~a bytes of input held on a multiplexed connection: ended"
                                     (fastcgi-request-id r) (log-escape (conn-peer c)) (limits-connection-buffer lim))))
        (end-stalled! c r)]
       [else (feed! c r (if data? (fastcgi-request-data-out r) (request-stdin-out r))
                    (decoder-buf d) (decoder-content-start d) (decoder-content-end d) lim)])
     #f]))

;; feed! : conn request output-port bytes natural natural limits -> void
;; Queue body bytes bs[start, end) for the handler under the body flow rule (see the top
;; of this file). bs is the decoder's buffer, which nothing refills meanwhile: this
;; thread is the connection's reader.
(define (feed! c r out bs start end lim)
  ;; put! : natural -> natural ; queue bs[i, end), return the new position.
  ;; A Racket CS pipe's write-bytes-avail* stops where its buffer has to grow (62 bytes
  ;; into an empty pipe), so it is repeated while it makes progress: only 0 means full.
  ;; (Treating the first short write as full ended every multiplexed request whose
  ;; STDIN record was over 62 bytes.) A closed pipe (request ended) takes everything.
  (define (put! i)
    (define n (with-handlers ([exn:fail? (λ (e) (- end i))]) (write-bytes-avail* bs out i end)))
    (if (and (positive? n) (< (+ i n) end)) (put! (+ i n)) (+ i n)))
  (let loop ([i (put! start)])
    (when (< i end)
      (cond
        [(> (table-count (conn-requests c)) 1)
         (warn-limited! (conn-server c) 'handler-behind
                        (λ () (format "request ~a from ~a: handler ~a bytes behind on a multiplexed connection: ended"
                                      (fastcgi-request-id r) (log-escape (conn-peer c)) (limits-stdin-buffer lim))))
         (end-stalled! c r)]
        [else
         ;; a handler not started yet (pending, to run inline) must start to read its body
         (start-pending! c)
         ;; the wait below has its own bound; the peer is not the slow one here
         (set-conn-deadline! c #f)
         (before-block! c)
         (define ready (sync/timeout (limits-read-timeout lim) out
                                     (semaphore-peek-evt (fastcgi-request-abort-sema r))))
         (cond
           [(not ready)
            (log-fastcgi-warning "request ~a from ~a: handler read none of its body for ~a s: ended"
                                 (fastcgi-request-id r) (log-escape (conn-peer c)) (limits-read-timeout lim))
            (end-stalled! c r)]
           [(eq? ready out) (loop (put! i))]
           [else (void)])]))))

;; over-connection-buffer? : conn natural limits -> boolean
;; On a multiplexed connection, whether len more bytes of input would take what its live
;; requests hold past connection-buffer: params stored while incomplete, and body bytes
;; queued for handlers that have not read them. Each request alone is bounded by
;; max-params-bytes and stdin-buffer; without this, a connection carrying
;; max-requests-per-connection of them (100) could hold 100 times that, about 38 MiB. A
;; connection with one live request at a time (nginx, Apache, lighttpd) never counts.
(define (over-connection-buffer? c len lim)
  (and (conn-mpx? c)
       (> (+ len (for/sum ([r (in-list (table-values (conn-requests c)))])
                   (+ (if (eq? (fastcgi-request-state r) 'params)
                          (min (fastcgi-request-params-size r) (limits-max-params-bytes lim))
                          0)
                      (queued (fastcgi-request-stdin-out r))
                      (queued (fastcgi-request-data-out r)))))
          (limits-connection-buffer lim))))

;; queued : any -> natural ; bytes waiting in a request's body pipe (none without one)
(define (queued out)
  (if (output-port? out) (pipe-content-length out) 0))

;; end-stalled! : conn request -> void
(define (end-stalled! c r)
  (request-end-now! r 1)
  (retire! c r))

;; get-values! : conn bytes -> (or/c #f string)
(define (get-values! c content)
  (define lim (server-limits (conn-server c)))
  (define asked
    (with-handlers ([exn:fail:fastcgi:protocol? values])
      (parse-pairs content #:max-pairs 64)))
  (cond
    [(exn? asked) (exn-message asked)]
    [else
     (define known
       (hash #"FCGI_MAX_CONNS" (limits-max-connections lim)
             ;; what one connection may carry at once: HAProxy reads it as max-reqs
             #"FCGI_MAX_REQS" (min (limits-max-concurrent lim) (limits-max-requests-per-connection lim))
             #"FCGI_MPXS_CONNS" 1))
     (define answer
       (for*/fold ([acc '()] #:result (reverse acc))
                  ([p (in-list asked)]
                   [v (in-value (hash-ref known (car p) #f))]
                   #:when (and v (not (assoc (car p) acc))))
         (cons (cons (car p) (string->bytes/utf-8 (number->string v))) acc)))
     (conn-send! c (record->bytes 'get-values-result 0 (pairs->bytes answer)))
     #f]))

;; ---------------------------------------------------------------------------------------
;; Handlers.

;; start-pending! : conn -> void
;; The pending request (if any) gets a thread after all, or, if it has ended before it
;; ran, gives back the running slot it was admitted with.
(define (start-pending! c)
  (define r (conn-pending c))
  (when r
    (set-conn-pending! c #f)
    (if (eq? (fastcgi-request-state r) 'done)
        (counter-add! (server-running (conn-server c)) -1)   ; ended before it ran
        (start-handler! c r))))

;; start-handler! : conn request -> void ; runs the handler in a thread of its own
(define (start-handler! c r)
  (set-fastcgi-request-handler! r (thread (λ () (run-handler! c r)))))

;; run-handler! : conn request -> void
;; Runs the handler in the current thread (its own, or the reader's: run-inline!; under a
;; request-memory limit, in one more of its own: contain.rkt), then ends the request: its
;; answer, the connection's bookkeeping, the observer.
(define (run-handler! c r)
  (define srv (conn-server c))
  (set-handler-request! r)
  (current-error-port handler-error-port)
  (define failure
    (if (fastcgi-request-rejected r)
        ;; its body already went over max-body or its CONTENT_LENGTH (body!): a handler
        ;; that would not read it could still answer as if it fit, so none runs
        (box (exn:fail:fastcgi:body "body over the limit before the handler ran"
                                    (current-continuation-marks)))
        (call-handler (server-handler srv) r (limits-request-memory (server-limits srv)))))
  (set-handler-request! #f)
  (parameterize-break #f
    ;; the handler is done: its slot is free before the answer leaves, so a front that
    ;; sends the next request at once never finds a stale count (a false 503)
    (counter-add! (server-running srv) -1)
    (if failure
        (handler-failed! c r (unbox failure))
        ;; no flush before: the buffered tail leaves with END_REQUEST in one write
        (request-finish! r 0 'request-complete))
    (retire! c r)
    (observe! c r)))

;; handler-error-status : any -> (values natural string)
;; The answer for a handler that raised v.
(define (handler-error-status v)
  (cond
    [(exn:fail:fastcgi:body? v) (values 413 "Content Too Large")]
    [(exn:break? v) (values 503 "Service Unavailable")]
    [else (values 500 "Internal Server Error")]))

;; handler-failed! : conn request any -> void
(define (handler-failed! c r v)
  (unless (or (exn:fail:fastcgi:aborted? v) (eq? (fastcgi-request-state r) 'done))
    (define-values (code message) (handler-error-status v))
    (unless (or (= code 413) (exn:break? v) (handler-ended? v)) ; logged where they were decided
      (stat-add! (conn-server c) 'handler-errors)
      (log-fastcgi-error "request ~a from ~a ~a: handler raised: ~a"
                         (fastcgi-request-id r) (log-escape (conn-peer c))
                         (log-escape (or (request-param r #"REQUEST_URI") #""))
                         (log-escape (if (exn? v) (exn-message v) (format "~e" v)))))
    (request-respond-status! r code message)))

;; check-request-timeouts! : conn limits flonum -> void
;; A handler past request-timeout gets a break (its request answers 503 if nothing left
;; yet); one that ignores the break for 5 s more is ended from outside (its writes fail).
(define (check-request-timeouts! c lim now)
  (define secs (limits-request-timeout lim))
  (when secs
    (for ([r (in-list (table-values (conn-requests c)))])
      (define t (fastcgi-request-handler r))
      (define broken (fastcgi-request-broken-ms r))
      (cond
        [(not t) (void)]
        [(and (not broken) (> (- now (fastcgi-request-start-ms r)) (* 1000 secs)))
         (log-fastcgi-warning "request ~a from ~a ~a: handler over the request timeout of ~a s: stopped"
                              (fastcgi-request-id r) (log-escape (conn-peer c))
                              (log-escape (or (request-param r #"REQUEST_URI") #"")) secs)
         (stat-add! (conn-server c) 'timeouts)
         (set-fastcgi-request-broken-ms! r now)
         ;; only while r is live: a reader thread that ran r inline may have gone on to
         ;; other work (see run-inline!, which drops a break that came just too late)
         (start-atomic)
         (when (eq? (table-ref (conn-requests c) (fastcgi-request-id r) #f) r) (break-thread t))
         (end-atomic)]
        [(and broken (> (- now broken) 5000))
         ;; In a thread of its own: ending takes the connection's lock, which the handler
         ;; may hold in a write blocked on a peer that stopped reading; this loop is the
         ;; deadline manager that must go on to cut that write. +inf.0: ended once.
         (set-fastcgi-request-broken-ms! r +inf.0)
         ;; with nothing of its answer out yet, the front still gets a 503 page (an
         ;; END_REQUEST with no STDOUT is a 502 for nginx)
         (thread (λ ()
                   (if (or (fastcgi-request-sent? r) (> (fastcgi-request-fill r) 8))
                       (request-end-now! r 1)
                       (request-respond-status! r 503 "Service Unavailable"))
                   (retire! c r)))]))))

;; handover-ready? : conn -> boolean ; nothing live: the connection may change owner
(define (handover-ready? c)
  (and (conn-fd c)
       (zero? (table-count (conn-requests c)))
       (not (conn-closing? c))
       (not (conn-broken? c))))

;; hand-over-or-close! : conn rd -> boolean
;; Called by the connection's reader (or whoever holds its parked loop state): #t when a
;; sibling took the socket (the caller ends the connection here, which closes only this
;; process's copy); #f when none did, and then it closes gracefully as before.
(define (hand-over-or-close! c st)
  (define to (server-handover (conn-server c)))
  (cond
    [(and to (hand-over! (conn-fd c) (conn-peer c) (decoder-pending (rd-decoder st)) to))
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

;; retire! : conn request -> void
;; The request has ended: free its id; close the connection if the front asked for that.
(define (retire! c r)
  (define reqs (conn-requests c))
  (define id (fastcgi-request-id r))
  ;; The reader sets no deadline while a handler runs and then blocks in a read, so it
  ;; never got to start the idle clock: the last request to end starts it here (keeping an
  ;; earlier deadline, such as the read timeout of a partial record). Atomic, like
  ;; set-read-deadline!, so that neither overwrites the other with a stale decision.
  ;; (Without this a kept connection stayed open forever once its requests were done.)
  (start-atomic)
  (table-remove-if-eq! reqs id r)
  (when (and (zero? (table-count reqs)) (not (conn-closing? c)))
    (define idle (+ (now-ms) (* 1000 (limits-idle-timeout (server-limits (conn-server c))))))
    (define old (conn-deadline c))
    (set-conn-deadline! c (if old (min old idle) idle)))
  (end-atomic)
  ;; (while the server hands connections over, an idle one is handed over, not closed)
  (when (or (not (fastcgi-request-keep-conn? r))
            (and (server-closing? (conn-server c)) (not (server-handover (conn-server c)))
                 (zero? (table-count reqs))))
    (if (quick-close? c r) (conn-broken! c) (conn-close! c))))

;; quick-close? : conn request -> boolean
;; After r, the connection may close at once, without conn-close!'s half-close and drain:
;; r was a Responder whose input had all arrived before its handler ran (inline), this
;; thread is still the connection's only reader (no reader thread took over, which could
;; be sending an answer to a management record), nothing else is live, and no unread
;; byte waits in the decoder or the socket, so the close sends no reset that could cost
;; the front the end of its answer. That is how a front without keep-conn (nginx by
;; default) uses a connection, and it spares a shutdown, the loop's wake-up for the
;; front's EOF and the read of it.
(define (quick-close? c r)
  (define st (conn-reader c))
  (and st
       (eq? (conn-inline c) r)
       (owner-inline? (conn-owner c))
       (eq? (fastcgi-request-role r) 'responder)
       (not (conn-closing? c))
       (zero? (table-count (conn-requests c)))
       (zero? (decoder-buffered (rd-decoder st)))
       (not (conn-input-pending? c))))

;; observe! : conn request -> void ; tell the server's observer (access log, counters)
(define (observe! c r)
  (define observer (server-observer (conn-server c)))
  (when observer
    (catching exn:fail? (λ (e) (log-fastcgi-error "request observer failed: ~a"
                                                  (log-escape (exn-message e))))
      (observer r (- (now-ms) (fastcgi-request-start-ms r))))))

;; stat-add! : server symbol -> void ; atomic: request threads and the reader all count
(define (stat-add! srv key)
  (define stats (server-stats srv))
  (start-atomic)
  (hash-set! stats key (add1 (hash-ref stats key 0)))
  (end-atomic))
