#lang racket/base
;; A request's run and end on its connection: its handler in a thread of its own or in the
;; reader's (inline: connection.rkt, which runs the connection's pending request, the one
;; admitted to run inline once its input has ended), the answer when the handler fails or
;; runs past the request timeout, and retire!, which frees the request's id and closes the
;; connection when the front asked for that. The only writer of a connection's pending.
(require ffi/unsafe/atomic
         "../util/catch.rkt" "../util/limits.rkt" "../util/log.rkt" "../util/table.rkt"
         "../protocol/protocol.rkt"
         "wire.rkt" (submod "wire.rkt" handler-run) "owner.rkt" "request.rkt" "contain.rkt"
         (only-in "queue-delay.rkt" handler-cpu-done!))
(provide observe!
         abort-all!
         retire!
         pend!
         unpend!
         start-pending!
         start-handler!
         run-handler!
         check-request-timeouts!)

;; abort-all! : conn -> void ; the connection is gone: every live request learns it
(define (abort-all! c)
  (for ([r (in-list (table-values (conn-requests c)))])
    (request-abort! r))
  (table-clear! (conn-requests c)))

;; pend! : conn request -> void
;; r, admitted, runs inline in the reader's thread once its input has ended (read-loop).
(define (pend! c r)
  (set-conn-pending! c r))

;; unpend! : conn -> void ; the pending request runs inline now (connection.rkt's run-inline!)
(define (unpend! c)
  (set-conn-pending! c #f))

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
  (request-handler-started! r (thread (λ () (run-handler! c r)))))

;; run-handler! : conn request -> void
;; Runs the handler in the current thread (its own, or the reader's: run-inline!; under a
;; request-memory limit, in one more of its own: contain.rkt), then ends the request: its
;; answer, the connection's bookkeeping, the observer.
(define (run-handler! c r)
  (define srv (conn-server c))
  (current-error-port handler-error-port)
  (define failure
    (if (fastcgi-request-rejected r)
        ;; its body already went over max-body or its CONTENT_LENGTH (body!): a handler
        ;; that would not read it could still answer as if it fit, so none runs
        (box (exn:fail:fastcgi:body "body over the limit before the handler ran"
                                    (current-continuation-marks)))
        (call-as-handler-of
         r (λ () (call-handler (server-handler srv) r (limits-request-memory (server-limits srv)))))))
  (parameterize-break #f
    ;; what it cost, counted before it stops running: the estimate that reads both
    ;; (queue-delay.rkt) never sees it ended without its cost
    (when (limits-max-queue-delay (server-limits srv))
      ;; (#f only if it ended before its starter noted its thread: this one)
      (handler-cpu-done! srv (or (fastcgi-request-handler r) (current-thread))))
    ;; the handler is done: its slot is free before the answer leaves, so a front that
    ;; sends the next request at once never finds a stale count (a false 503)
    (counter-add! (server-running srv) -1)
    (if failure
        (handler-failed! c r (unbox failure))
        ;; no flush before: the buffered tail leaves with END_REQUEST in one write
        (request-finish! r 0 'request-complete))
    (retire! c r)
    (observe! c r)))

;; handler-error-reason : any -> symbol
;; Why a handler that raised v gets the server's answer (a refusal reason: cgi.rkt).
(define (handler-error-reason v)
  (cond
    [(exn:fail:fastcgi:body? v) 'body-over]
    [(exn:break? v) 'handler-timeout]
    [else 'handler-raised]))

;; handler-failed! : conn request any -> void
(define (handler-failed! c r v)
  (unless (or (exn:fail:fastcgi:aborted? v) (eq? (fastcgi-request-state r) 'done))
    (define reason (handler-error-reason v))
    (unless (or (eq? reason 'body-over) (exn:break? v) (handler-ended? v)) ; logged where they were decided
      (stat-add! (conn-server c) 'handler-errors)
      (log-fastcgi-error "request ~a from ~a ~a: handler raised: ~a"
                         (fastcgi-request-id r) (log-escape (conn-peer c))
                         (log-escape (or (request-param r #"REQUEST_URI") #""))
                         (log-escape (if (exn? v) (exn-message v) (format "~e" v)))))
    (request-refuse! r reason)))

;; check-request-timeouts! : conn limits flonum -> void
;; A handler past request-timeout gets a break (its request answers 503 if nothing left
;; yet); one that ignores the break for broken-grace-ms more is ended from outside (its
;; writes fail).
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
         (request-broken! r now)
         ;; only while r is live: a reader thread that ran r inline may have gone on to
         ;; other work (see run-inline!, which drops a break that came just too late)
         (start-atomic)
         (when (eq? (table-ref (conn-requests c) (fastcgi-request-id r) #f) r) (break-thread t))
         (end-atomic)]
        [(and broken (> (- now broken) broken-grace-ms))
         ;; In a thread of its own: ending takes the connection's lock, which the handler
         ;; may hold in a write blocked on a peer that stopped reading; this loop is the
         ;; deadline manager that must go on to cut that write. +inf.0: ended once.
         (request-broken! r +inf.0)
         ;; with nothing of its answer out yet, the front still gets a 503 page (an
         ;; END_REQUEST with no STDOUT is a 502 for nginx)
         (thread (λ ()
                   (if (request-output-started? r)
                       (request-end-now! r 1)
                       (request-refuse! r 'handler-timeout))
                   (retire! c r)))]))))

;; retire! : conn request -> void
;; The request has ended: free its id; close the connection if the front asked for that.
(define (retire! c r)
  (define reqs (conn-requests c))
  (define id (fastcgi-request-id r))
  ;; The reader sets no deadline while a handler runs and then blocks in a read, so it
  ;; never got to start the idle clock: the last request to end starts it here (keeping an
  ;; earlier deadline, such as the read timeout of a partial record), or a kept connection
  ;; would stay open forever once its requests were done. Atomic, like set-read-deadline!,
  ;; so that neither overwrites the other with a stale decision.
  (start-atomic)
  (table-remove-if-eq! reqs id r)
  (when (and (zero? (table-count reqs)) (not (conn-closing? c)))
    (conn-await-idle-unless-sooner! c))
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

;; How long a handler that ignored its request-timeout break may run on before its
;; request is ended from outside.
(define broken-grace-ms 5000)
