#lang racket/base
;; fastcgi/private/engine/dispatch.rkt: what the reader does with each record it decoded, on a
;; connection over pipes (tests/lib/pipe-conn.rkt) with no reader thread: dispatch! is
;; called here on each record, as the reader calls it. BEGIN_REQUEST (live, refused in
;; FastCGI terms, or a protocol error), PARAMS (admitted, or refused with a CGI status
;; before any handler), STDIN, ABORT_REQUEST, GET_VALUES and unknown types; and, end to
;; end through an in-process server, GET_VALUES and UNKNOWN_TYPE.
(require racket/port
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         (only-in "../fastcgi/private/engine/dispatch.rkt" dispatch! queue-delay-ms note-shed!)
         (only-in "../fastcgi/private/engine/request.rkt" fastcgi-request-state fastcgi-request-rejected
                  request-param)
         (only-in "../fastcgi/private/engine/request-state.rkt" request-abort! request-admit!)
         "../fastcgi/private/util/table.rkt"
         "../fastcgi/private/engine/wire.rkt"
         "lib/connection-handler.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; dispatch-bytes! : conn decoder bytes [boolean] -> (listof (or/c #f string))
;; Feeds bs to the decoder and dispatches each whole record in it, as the reader does;
;; dispatch!'s result for each (a string: a protocol error that closes the connection).
(define (dispatch-bytes! c d bs [begun? #t])
  (decoder-feed! d bs)
  (let loop ([acc '()])
    (define type (decoder-view! d))
    (if type
        (loop (cons (dispatch! c d type begun?) acc))
        (reverse acc))))

;; end-status : peer natural -> (values app-status protocol-status) ; of the next END_REQUEST
(define (end-status p id)
  (define r (peer-read-record p 5))
  (check-equal? (and (record? r) (list (record-type r) (record-id r))) (list 'end-request id))
  (parse-end-request (record-content r)))

(test-case "BEGIN_REQUEST: a live request; id 0, a wrong length, a second for a live id: protocol errors"
  (define-values (c p) (make-pipe-conn))
  (define d (make-decoder))
  (check-equal? (dispatch-bytes! c d (begin-bytes 1)) '(#f))
  (define r (table-ref (conn-requests c) 1 #f))
  (check-true (fastcgi-request? r))
  (check-equal? (list (fastcgi-request-id r) (fastcgi-request-role r) (fastcgi-request-keep-conn? r))
                '(1 responder #t))
  (check-equal? (fastcgi-request-state r) 'params)
  (check-equal? (dispatch-bytes! c d (begin-bytes 0)) '("BEGIN_REQUEST with request id 0"))
  (check-equal? (dispatch-bytes! c d (record->bytes 'begin-request 2 #"\0\1\0\0\0\0\0"))
                '("BEGIN_REQUEST with content length 7"))
  (check-equal? (dispatch-bytes! c d (begin-bytes 1)) '("second BEGIN_REQUEST for live request 1"))
  (check-equal? (dispatch-bytes! c d (record->bytes 'params 3 #"") #f)
                '("params record before any BEGIN_REQUEST"))
  (check-equal? (dispatch-bytes! c d (bytes-append (record->bytes 'params 9 #"\1\1ab") (record->bytes 'stdin 9 #"x")))
                '(#f #f) "records of an id that is not live: skipped")
  (check-equal? (table-count (conn-requests c)) 1))

(test-case "BEGIN_REQUEST for a role not served: UNKNOWN_ROLE; without keep-conn the connection closes"
  (define-values (c p) (make-pipe-conn #:roles '(responder)))
  (define d (make-decoder))
  (check-equal? (dispatch-bytes! c d (begin-bytes 1 'filter #t)) '(#f))
  (define-values (app proto) (end-status p 1))
  (check-equal? (list app proto) '(0 unknown-role))
  (check-false (conn-closing? c) "keep-conn: the connection goes on")
  (check-equal? (table-count (conn-requests c)) 0)
  (dispatch-bytes! c d (begin-bytes 2 'authorizer #f))
  (define-values (app2 proto2) (end-status p 2))
  (check-equal? proto2 'unknown-role)
  (check-true (conn-closing? c) "no keep-conn: closed gracefully"))

(test-case "BEGIN_REQUEST past max-requests-per-connection: OVERLOADED, counted"
  (define-values (c p) (make-pipe-conn #:limits (make-limits #:max-requests-per-connection 1)))
  (define d (make-decoder))
  (dispatch-bytes! c d (bytes-append (begin-bytes 1) (begin-bytes 2)))
  (define-values (app proto) (end-status p 2))
  (check-equal? proto 'overloaded)
  (check-equal? (table-count (conn-requests c)) 1 "the first stays live")
  (check-equal? (hash-ref (server-stats (conn-server c)) 'overloaded #f) 1))

(test-case "PARAMS: once they end the request is admitted: counted running, pending to run inline"
  (define-values (c p) (make-pipe-conn))
  (define d (make-decoder))
  (define srv (conn-server c))
  (dispatch-bytes! c d (bytes-append (begin-bytes 1) (record->bytes 'params 1 (pairs->bytes (params "X" "y")))))
  (define r (table-ref (conn-requests c) 1 #f))
  (check-equal? (fastcgi-request-state r) 'params "not ended yet")
  (check-equal? (unbox (server-running srv)) 0)
  (dispatch-bytes! c d (record->bytes 'params 1 #""))
  (check-equal? (fastcgi-request-state r) 'stdin)
  (check-equal? (request-param r "X") #"y")
  (check-equal? (unbox (server-running srv)) 1)
  (check-equal? (hash-ref (server-stats srv) 'requests #f) 1)
  (check-eq? (conn-pending c) r "one request, not multiplexed: it will run inline")
  (check-equal? (dispatch-bytes! c d (stream->bytes 'stdin 1 #"abc")) '(#f #f))
  (check-equal? (fastcgi-request-state r) 'running)
  (check-equal? (port->bytes (fastcgi-request-stdin r)) #"abc" "the body, queued for the handler"))

(test-case "a request another thread ended before its PARAMS ended: nothing runs, and admitting it is refused, not an error"
  ;; abort-all! (the connection broke, seen by another request's thread) ends every live
  ;; request while the reader may hold one between its lookup and its admission
  ;; (params-done!): in clean-clone run 11 the fuzzer saw "request-state: request 3: no
  ;; admit in state done". The reader's own steps cannot be interleaved here: the first
  ;; part checks the end of PARAMS after the abort, the second the admission itself.
  (define ran? #f)
  (define-values (c p) (make-pipe-conn #:handler (λ (r) (set! ran? #t))))
  (define d (make-decoder))
  (define srv (conn-server c))
  (dispatch-bytes! c d (bytes-append (begin-bytes 1) (record->bytes 'params 1 (pairs->bytes (params "X" "y")))))
  (define r (table-ref (conn-requests c) 1 #f))
  (request-abort! r)
  (check-equal? (dispatch-bytes! c d (record->bytes 'params 1 #"")) '(#f))
  (check-equal? (fastcgi-request-state r) 'done)
  (check-equal? (unbox (server-running srv)) 0 "not counted as running")
  (check-false (hash-ref (server-stats srv) 'requests #f) "not counted as a request")
  (check-false (conn-pending c))
  (check-false ran?)
  ;; and admission itself, should the request end between that check and it
  (define r2 (make-live-request c 2 #:state 'params))
  (request-abort! r2)
  (check-false (request-admit! r2))
  (check-equal? (fastcgi-request-state r2) 'done))

(test-case "a second live request makes the connection multiplexed: the pending one gets a thread"
  (define ran (make-semaphore 0))
  (define-values (c p) (make-pipe-conn #:handler (λ (r) (semaphore-post ran))))
  (define d (make-decoder))
  (dispatch-bytes! c d (bytes-append (begin-bytes 1) (record->bytes 'params 1 #"")))
  (check-true (fastcgi-request? (conn-pending c)))
  (check-false (conn-mpx? c))
  (dispatch-bytes! c d (begin-bytes 2))
  (check-true (conn-mpx? c))
  (check-false (conn-pending c))
  (check-not-false (sync/timeout 5 ran) "request 1's handler started in a thread"))

(test-case "STDIN before PARAMS ended: a protocol error; past CONTENT_LENGTH: the request is rejected"
  (define-values (c p) (make-pipe-conn))
  (define d (make-decoder))
  (check-equal? (dispatch-bytes! c d (bytes-append (begin-bytes 1) (record->bytes 'stdin 1 #"x")))
                '(#f "stdin for request 1 before its PARAMS ended"))
  (define-values (c2 p2) (make-pipe-conn))
  (define d2 (make-decoder))
  (dispatch-bytes! c2 d2 (bytes-append (begin-bytes 1) (stream->bytes 'params 1 (pairs->bytes (params "CONTENT_LENGTH" "2")))
                                       (record->bytes 'stdin 1 #"abcd")))
  (check-equal? (fastcgi-request-rejected (table-ref (conn-requests c2) 1 #f)) 2
                "the body's cap, for the 413 its handler's read gets"))

;; refused : limits (listof (cons string string)) [(server -> any)] -> (values natural server)
;; The CGI status of the answer to one request with these params, and the server.
(define (refused lim ps [prepare void])
  (define-values (c p) (make-pipe-conn #:limits lim))
  (prepare (conn-server c))
  (dispatch-bytes! c (make-decoder) (bytes-append (begin-bytes 1) (stream->bytes 'params 1 (pairs->bytes ps))))
  (define a (peer-answer p 1))
  (check-equal? (answer-protocol-status a) 'request-complete)
  (check-equal? (table-count (conn-requests c)) 0 "the request left the table")
  (values (cgi-status (answer-stdout a)) (conn-server c)))

(test-case "refused before any handler: 431, 400, 413, 503, each counted"
  (for ([row (in-list
              (list (list "params over max-params-bytes" (make-limits #:max-params-bytes 10)
                          (params "LONGNAME" "a long value") void 431 'rejected-431)
                    (list "params over max-params-pairs" (make-limits #:max-params-pairs 1)
                          (params "A" "1" "B" "2") void 431 'rejected-431)
                    (list "CONTENT_LENGTH not a number" (make-limits) (params "CONTENT_LENGTH" "12x")
                          void 400 'rejected-400)
                    (list "CONTENT_LENGTH over max-body" (make-limits #:max-body 10)
                          (params "CONTENT_LENGTH" "11") void 413 'rejected-413)
                    (list "max-concurrent handlers running" (make-limits #:max-concurrent 1) '()
                          (λ (srv) (set-box! (server-running srv) 1)) 503 'shed)
                    (list "max-queue-delay: the CPU work ahead" (make-limits #:max-queue-delay 0.01) '()
                          (λ (srv) (set-box! (server-running srv) 2) (set-box! (server-request-cost srv) 10.0))
                          503 'shed)))])
    (define-values (name lim ps prepare code stat) (apply values row))
    (define-values (status srv) (refused lim ps prepare))
    (check-equal? status code name)
    (check-equal? (hash-ref (server-stats srv) stat #f) 1 (format "~a: ~a counted" name stat))
    (check-equal? (hash-ref (server-stats srv) 'requests 0) 0 (format "~a: not admitted" name))))

(test-case "ABORT_REQUEST: the request ends at once with app status 1, and leaves the table"
  (define-values (c p) (make-pipe-conn))
  (define d (make-decoder))
  (dispatch-bytes! c d (bytes-append (begin-bytes 1) (record->bytes 'params 1 #"")))
  (define r (table-ref (conn-requests c) 1 #f))
  (dispatch-bytes! c d (abort-bytes 1))
  (define-values (app proto) (end-status p 1))
  (check-equal? (list app proto) '(1 request-complete))
  (check-equal? (table-count (conn-requests c)) 0)
  (check-equal? (fastcgi-request-state r) 'done))

(test-case "GET_VALUES on id 0: the known names asked for, once each; elsewhere skipped"
  (define lim (make-limits #:max-connections 7 #:max-concurrent 30 #:max-requests-per-connection 5))
  (define-values (c p) (make-pipe-conn #:limits lim))
  (define d (make-decoder))
  (check-equal? (dispatch-bytes! c d (record->bytes 'get-values 0
                                                    (pairs->bytes (params "FCGI_MAX_REQS" "" "FCGI_MAX_CONNS" ""
                                                                          "FCGI_MAX_REQS" "" "OTHER" ""))))
                '(#f))
  (define r (peer-read-record p))
  (check-equal? (parse-pairs (record-content r))
                '((#"FCGI_MAX_REQS" . #"5") (#"FCGI_MAX_CONNS" . #"7"))
                "FCGI_MAX_REQS: the fewer of max-concurrent and max-requests-per-connection")
  (check-equal? (dispatch-bytes! c d (record->bytes 'get-values 3 #"")) '(#f))
  (check-true (peer-quiet? p 0.05) "GET_VALUES on a request id: no answer")
  (check-true (string? (car (dispatch-bytes! c d (record->bytes 'get-values 0 #"\5")))) "malformed pairs"))

(test-case "other types on id 0: UNKNOWN_TYPE, whatever the type"
  (define-values (c p) (make-pipe-conn))
  (define d (make-decoder))
  (check-equal? (dispatch-bytes! c d (bytes-append (record->bytes 'stdout 0 #"x") (record->bytes 99 0 #""))) '(#f #f))
  (check-equal? (record-content (peer-read-record p)) (unknown-type-content 'stdout))
  (check-equal? (record-content (peer-read-record p)) (unknown-type-content 99)))

(test-case "queue-delay-ms: handlers running x recent CPU cost x stretch; note-shed! counts"
  (define-values (c p) (make-pipe-conn))
  (define srv (conn-server c))
  (check-true (zero? (queue-delay-ms srv)) "no handler running")
  (set-box! (server-running srv) 3)
  (set-box! (server-request-cost srv) 2.0)
  (set-box! (server-stretch srv) 1.5)
  (check-equal? (queue-delay-ms srv) 9.0)
  (note-shed! srv (λ () "test"))
  (check-equal? (hash-ref (server-stats srv) 'shed #f) 1))

;; -- end to end, through an in-process server ---------------------------------------------
(with-server
  #:limits (make-limits #:max-connections 50 #:max-concurrent 40)
  (λ (path)
    (test-case "GET_VALUES: the three known names with the limits' values; then a request"
      (with-peer path
        (λ (p)
          (peer-send! p (record->bytes 'get-values 0
                                       (pairs->bytes (params "FCGI_MAX_CONNS" "" "FCGI_MAX_REQS" ""
                                                             "FCGI_MPXS_CONNS" "" "FCGI_UNKNOWN" ""))))
          (define r (peer-read-record p))
          (check-equal? (record-type r) 'get-values-result)
          (check-equal? (record-id r) 0)
          (check-equal? (parse-pairs (record-content r))
                        '((#"FCGI_MAX_CONNS" . #"50") (#"FCGI_MAX_REQS" . #"40")
                          (#"FCGI_MPXS_CONNS" . #"1")))
          (peer-send! p (request-bytes 1))
          (check-equal? (answer-app-status (peer-answer p 1)) 0))))

    (test-case "unknown type: UNKNOWN_TYPE on id 0, skipped on a live id"
      (with-peer path
        (λ (p)
          (peer-send! p (record->bytes 42 0 #"whatever"))
          (define r (peer-read-record p))
          (check-equal? (record-type r) 'unknown-type)
          (check-equal? (record-content r) #"\52\0\0\0\0\0\0\0")
          (peer-send! p (begin-bytes 1) (record->bytes 42 1 #"junk")
                      (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #""))
          (check-equal? (answer-app-status (peer-answer p 1)) 0)
          (check-equal? (peer-extras p) '()))))))
