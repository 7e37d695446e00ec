#lang racket/base
;; Records to requests: what the connection's reader does with each record it decoded.
;; BEGIN_REQUEST makes a request live (or refuses it in FastCGI terms: UNKNOWN_ROLE,
;; OVERLOADED), PARAMS are gathered and checked, a request is admitted or refused before
;; any handler runs (limits, shedding, a stopping server), STDIN and DATA go to the
;; handler under the body flow rule (see connection.rkt), GET_VALUES is answered.
(require "../util/clock.rkt" "../util/limits.rkt" "../util/log.rkt" "../util/table.rkt"
         "../protocol/protocol.rkt"
         "wire.rkt" (submod "wire.rkt" dispatch) "request.rkt" "log-limit.rkt" "handler-run.rkt"
         (only-in (submod "../protocol/cgi.rkt" private) refusal-status))
(provide dispatch!
         note-shed!
         queue-delay-ms)

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
     (request-params-chunk! r (decoder-content d) len (limits-max-params-bytes lim))
     #f]
    [(> (fastcgi-request-params-size r) (limits-max-params-bytes lim))
     (reject! c r 'params-over-bytes
              (format "params of ~a bytes over the limit of ~a"
                      (fastcgi-request-params-size r) (limits-max-params-bytes lim)))]
    [else
     (define all (request-params-take! r))
     ;; checked now, made into pairs when asked for (fastcgi-request-params)
     (define problem (check-params all (limits-max-params-pairs lim)))
     (cond
       [(string? problem)
        (define too-many? (regexp-match? #rx"more than" problem))
        (reject! c r (if too-many? 'params-over-pairs 'params-malformed) problem)]
       [else
        (request-params-accepted! r all)
        (params-done! c r)])]))

;; reject! : conn request symbol string -> #f
;; Answers before any handler ran, for reason (a refusal reason: cgi.rkt turns it into the
;; status and page); the request's remaining records are skipped.
(define (reject! c r reason why)
  (define code (refusal-status reason))
  (warn-limited! (conn-server c) 'rejected
                 (λ () (format "request ~a from ~a: ~a: answered ~a"
                               (fastcgi-request-id r) (log-escape (conn-peer c)) (log-escape why) code)))
  (stat-add! (conn-server c) (string->symbol (format "rejected-~a" code)))
  (request-refuse! r reason)
  (retire! c r)
  (observe! c r)
  #f)

;; queue-delay-ms : server -> flonum
;; The CPU work ahead of a request admitted now: handlers running x the recent CPU cost of
;; a request (see queue-delay-estimator in queue-delay.rkt). Under processor sharing that is about
;; how much later than alone the newcomer finishes.
(define (queue-delay-ms srv)
  (* (unbox (server-running srv)) (unbox (server-request-cost srv)) (unbox (server-stretch srv))))

;; shed? : server limits -> boolean
;; A request whose work ahead is over max-queue-delay is refused. This is a concurrency
;; limit that follows what requests cost: the costlier the handlers, the fewer at a time; I/O
;; waits get max-concurrent. With at least one admitted at any time, the served requests
;; keep a bounded latency under any overload, and the rest get a fast 503.
(define (shed? srv lim)
  (define max-delay (limits-max-queue-delay lim))
  (and max-delay (> (queue-delay-ms srv) (* 1000.0 max-delay))))

;; waited-past? : request limits -> (or/c real #f)
;; With shedding on, the queue time (queue-time.rkt) of a request that has already waited
;; past max-queue-delay before it arrived: its answer would come too late to matter.
(define (waited-past? r lim)
  (define max-delay (limits-max-queue-delay lim))
  (define waited (and max-delay (request-queue-time-ms r)))
  (and waited (> waited (* 1000.0 max-delay)) waited))

;; shed! : conn request (-> string) -> #f ; why is made only for the log line
;; Answers 503 before any handler ran, as reject! does, but logs at most one line a
;; second for all the requests shed in it: an overload must not also flood the log.
(define (shed! c r why)
  (note-shed! (conn-server c) why)
  (request-refuse! r 'shed)
  (retire! c r)
  (observe! c r)
  #f)

;; note-shed! : server (-> string) -> void ; counts a shed request, logs once a second
(define (note-shed! srv why)
  (stat-add! srv 'shed)
  (warn-once-a-second! srv 'shed "shed" (λ () (format "overloaded: answered 503 (~a)" (why)))))

;; note-overloaded! : server (-> string) -> void
;; Counts a request refused with END_REQUEST OVERLOADED, and logs at most one line a
;; second for all of them: a peer can make very many a second with header-only records.
(define (note-overloaded! srv why)
  (stat-add! srv 'overloaded)
  (warn-once-a-second! srv 'overloaded "refused so" (λ () (format "~a: OVERLOADED" (why)))))

;; params-done! : conn request -> #f ; checks, then starts the handler
(define (params-done! c r)
  (define srv (conn-server c))
  (define lim (server-limits srv))
  ;; the server's periodic threads that wait while no request comes go on
  (server-wake-sleepers! srv)
  (define declared (request-declared-length r #f))
  (cond
    ;; ended already, from another thread (its connection broke: abort-all!): nothing to do
    [(eq? (fastcgi-request-state r) 'done) #f]
    [(eq? declared 'bad)
     (reject! c r 'content-length-malformed "CONTENT_LENGTH is not a number")]
    [(and declared (> declared (limits-max-body lim)))
     (reject! c r 'content-length-over
              (format "CONTENT_LENGTH ~a over the limit of ~a" declared (limits-max-body lim)))]
    ;; While stopping, a request that arrives on a connection with nothing else live is
    ;; served, and the connection closes after it (retire!): a front that sent it on a kept
    ;; connection at the moment the stop began (nginx does, between two requests) gets an
    ;; answer, not a 503. A newcomer on a multiplexed connection is refused, so a stream of
    ;; them cannot hold the stop open; not while the server hands its connections over
    ;; (a retiring worker): the connection goes to a sibling at its first idle moment.
    [(and (server-closing? srv) (not (server-handover srv)) (> (table-count (conn-requests c)) 1))
     (reject! c r 'stopping "server stopping")]
    [(>= (unbox (server-running srv)) (limits-max-concurrent lim))
     (shed! c r (λ () (format "over ~a handlers running (max-concurrent)" (limits-max-concurrent lim))))]
    [(shed? srv lim)
     (shed! c r (λ () (format "~a ms of CPU work ahead (~a handlers running x ~a ms a request x ~a for its share of a core), over the ~a ms allowed (max-queue-delay)"
                        (inexact->exact (round (queue-delay-ms srv)))
                        (unbox (server-running srv))
                        (/ (round (* 10 (unbox (server-request-cost srv)))) 10.0)
                        (/ (round (* 100 (unbox (server-stretch srv)))) 100.0)
                        (inexact->exact (round (* 1000 (limits-max-queue-delay lim)))))))]
    [(waited-past? r lim)
     => (λ (waited)
          (shed! c r (λ () (format "waited ~a ms before a worker took it (HTTP_X_REQUEST_START), over the ~a ms allowed (max-queue-delay)"
                             (inexact->exact (round waited))
                             (inexact->exact (round (* 1000 (limits-max-queue-delay lim))))))))]
    ;; the same, between the check above and now
    [(not (request-admit! r)) #f]
    [else
     ;; admitted: counted as running from now (max-concurrent), whichever way it runs
     (counter-add! (server-running srv) 1)
     (stat-add! srv 'requests)
     (if (and (not (conn-mpx? c)) (not (conn-inline c)) (not (limits-max-queue-delay lim))
              (not (eq? (fastcgi-request-role r) 'filter)) (not (limits-request-memory lim))
              (= 1 (table-count (conn-requests c))))
         (pend! c r)                    ; runs inline once its input has ended (read-loop)
         (start-handler! c r))
     #f]))

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
     (request-stream-ended! r data?)
     #f]
    [(fastcgi-request-rejected r) #f]
    [else
     (define total (request-body-received! r len data?))
     (define cap
       (let ([declared (request-declared-length r data?)])
         (if (exact-integer? declared) (min declared (limits-max-body lim)) (limits-max-body lim))))
     (cond
       [(> total cap)
        (warn-limited! (conn-server c) 'body-over
                       (λ () (format "request ~a from ~a: ~a over ~a bytes: answered 413"
                                     (fastcgi-request-id r) (log-escape (conn-peer c)) type cap)))
        (request-body-rejected! r cap)
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
;; of connection.rkt). bs is the decoder's buffer, which nothing refills meanwhile: this
;; thread is the connection's reader.
(define (feed! c r out bs start end lim)
  ;; put! : natural -> natural ; queue bs[i, end), return the new position.
  ;; A Racket CS pipe's write-bytes-avail* stops where its buffer has to grow (a few dozen
  ;; bytes into an empty pipe), so it is repeated while it makes progress: only 0 means full
  ;; (a short write is not a full pipe, and taking it for one would end a multiplexed
  ;; request at its first large STDIN record). A closed pipe (request ended) takes everything.
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
         (conn-await! c #f)
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
;; max-requests-per-connection of them could hold that many times as much. A
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

