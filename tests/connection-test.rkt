#lang racket/base
;; The connection engine end to end: a raw peer (tests/lib/raw-peer.rkt) against an
;; in-process server on a unix socket. Roles, multiplexing, aborts, management records,
;; keep-conn, errors, large bodies both ways, every limit with its documented answer,
;; and the framing items of HOSTILE.md (each followed by a good request on a new connection).
(require racket/async-channel
         racket/list
         racket/port
         racket/string
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol.rkt"
         "lib/raw-peer.rkt")

;; -- the handler --------------------------------------------------------------------------
;; Its behaviour is picked by the MODE param; it reports to the test through `events`
;; (never blocking) and waits on named gates.
(define events (make-async-channel))
(define gates (make-hash))
(define handler-runs (box 0))

;; gate : string -> semaphore
(define (gate name) (hash-ref! gates name (λ () (make-semaphore 0))))

;; next-event : [seconds] -> any ; what a handler reported, or 'no-event
(define (next-event [timeout 5]) (or (sync/timeout timeout events) 'no-event))

(define ok-head #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n")

(define (handler r)
  (set-box! handler-runs (add1 (unbox handler-runs)))
  (define out (fastcgi-request-stdout r))
  (define mode (bytes->string/utf-8 (fastcgi-param r "MODE" #"echo")))
  (define (report v) (async-channel-put events v))
  (define (try thunk) (with-handlers ([(λ (e) #t) values]) (thunk)))
  (case mode
    [("echo")
     (define body (port->bytes (fastcgi-request-stdin r)))
     (write-bytes ok-head out)
     (fprintf out "id=~a role=~a keep=~a\n" (fastcgi-request-id r) (fastcgi-request-role r)
              (fastcgi-request-keep-conn? r))
     (for ([p (fastcgi-request-params r)]) (fprintf out "~a=~a\n" (car p) (cdr p)))
     (fprintf out "body=~a" body)]
    [("auth")
     (if (equal? (fastcgi-param r "AUTH") #"ok")
         (write-bytes #"Status: 200\r\nVariable-USER: bob\r\n\r\n" out)
         (write-bytes #"Status: 403 Forbidden\r\nContent-Type: text/plain\r\n\r\ndenied" out))]
    [("filter")
     (define in (port->bytes (fastcgi-request-stdin r)))
     (define data (port->bytes (fastcgi-request-data r)))
     (define declared (string->number (bytes->string/utf-8 (fastcgi-param r "FCGI_DATA_LENGTH"))))
     (write-bytes ok-head out)
     (fprintf out "stdin=~a data=~a length-ok=~a" in (bytes-length data)
              (= declared (bytes-length data)))]
    [("wait")
     (report (list 'started (fastcgi-request-id r)))
     (sync/timeout 5 (gate (bytes->string/utf-8 (fastcgi-param r "GATE"))))
     (write-bytes ok-head out)
     (fprintf out "waited ~a" (fastcgi-request-id r))]
    [("read-body")
     (report 'started)
     (report (try (λ () (port->bytes (fastcgi-request-stdin r)))))]
    [("abort-evt")
     (report 'started)
     (report (if (sync/timeout 5 (fastcgi-request-abort-evt r)) 'aborted 'not-aborted))]
    [("stderr")
     (write-string "oops: something went wrong" (current-error-port))
     (write-bytes ok-head out)
     (write-bytes #"fine" out)]
    [("raise") (write-bytes #"Status: 200 OK\r\n" out) (error 'handler "boom")]
    [("big")
     (write-bytes ok-head out)
     (for ([i 48]) (write-bytes (make-bytes 65536 (+ 65 (modulo i 26))) out))]
    [("count")
     (define buf (make-bytes 4096))
     (define n (let loop ([n 0])
                 (define k (read-bytes-avail! buf (fastcgi-request-stdin r)))
                 (if (eof-object? k) n (loop (+ n k)))))
     (write-bytes ok-head out)
     (fprintf out "count=~a" n)]
    [("flood")
     (report (try (λ () (for ([i 4096]) (write-bytes (make-bytes 65536 120) out)) 'wrote-all)))]
    [else (error 'handler "unknown mode ~a" mode)]))

;; -- helpers ------------------------------------------------------------------------------
(define all-roles '(responder authorizer filter))

;; with-server : [limits] (path -> any) -> any
(define (with-server proc #:limits [lim (make-limits)]) 
  (call-with-server handler proc #:roles all-roles #:limits lim))

;; with-peer : path (peer -> any) -> any ; the peer is closed afterwards
(define (with-peer path proc)
  (define p (peer-connect path))
  (dynamic-wind void (λ () (proc p)) (λ () (peer-close! p))))

;; echo-params : natural keyword... -> list of pairs for an echo request
(define (params . kvs)
  (let loop ([kvs kvs])
    (if (null? kvs) '() (cons (cons (car kvs) (cadr kvs)) (loop (cddr kvs))))))

;; check-good-request : path -> void ; a fresh connection still gets an answer
(define (check-good-request path)
  (with-peer path
    (λ (p)
      (peer-send! p (request-bytes 1 #:params (params "X" "still-alive") #:stdin #"b"))
      (define a (peer-answer p 1))
      (check-equal? (cgi-status (answer-stdout a)) 200)
      (check-has #rx#"X=still-alive" (answer-stdout a)))))

;; check-has : regexp bytes -> void
(define-check (check-has rx bs)
  (unless (regexp-match? rx bs) (fail-check (format "~s not in ~s" rx bs))))

;; check-status : answer natural -> void ; a CGI status and a complete END_REQUEST
(define (check-status a code)
  (check-equal? (cgi-status (answer-stdout a)) code (format "~s" (answer-stdout a)))
  (check-equal? (answer-protocol-status a) 'request-complete))

;; -- roles --------------------------------------------------------------------------------
(with-server
  (λ (path)
    (test-case "responder: params and body echoed"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "REQUEST_METHOD" "POST" "CONTENT_LENGTH" "5")
                                       #:stdin #"hello"))
          (define a (peer-answer p 1))
          (check-equal? (answer-app-status a) 0)
          (check-status a 200)
          (check-equal? (cgi-body (answer-stdout a))
                        #"id=1 role=responder keep=#t\nREQUEST_METHOD=POST\nCONTENT_LENGTH=5\nbody=hello"))))

    (test-case "authorizer: 200 with Variable- headers, and a 403 denial"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 'authorizer #:params (params "MODE" "auth" "AUTH" "ok")))
          (define a (peer-answer p 1))
          (check-equal? (answer-stdout a) #"Status: 200\r\nVariable-USER: bob\r\n\r\n")
          (peer-send! p (request-bytes 2 #:role 'authorizer #:params (params "MODE" "auth")))
          (define b (peer-answer p 2))
          (check-status b 403)
          (check-equal? (cgi-body (answer-stdout b)) #"denied"))))

    (test-case "filter: all of STDIN, then DATA of FCGI_DATA_LENGTH bytes"
      (with-peer path
        (λ (p)
          (define data (make-bytes 200000 7))
          (peer-send! p (request-bytes 1 #:role 'filter #:stdin #"in"
                                       #:params (params "MODE" "filter" "FCGI_DATA_LENGTH" "200000"
                                                        "FCGI_DATA_LAST_MOD" "1700000000")
                                       #:data data))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1)))
                        #"stdin=in data=200000 length-ok=#t"))))

    (test-case "unknown role: UNKNOWN_ROLE; with keep-conn the connection goes on"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 99))
          (define a (peer-answer p 1))
          (check-equal? (answer-protocol-status a) 'unknown-role)
          (check-equal? (answer-stdout a) #"")
          (peer-send! p (request-bytes 2 #:params (params "N" "2")))
          (check-has #rx#"N=2" (answer-stdout (peer-answer p 2)))))
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 99 #:keep? #f))
          (check-equal? (answer-protocol-status (peer-answer p 1)) 'unknown-role)
          (check-true (peer-eof? p)))))))

;; -- one connection, many requests --------------------------------------------------------
;; interleave : (listof (listof bytes)) -> bytes ; round robin over per-request record lists
(define (interleave lists)
  (let loop ([lists lists] [acc '()])
    (define live (filter pair? lists))
    (if (null? live)
        (apply bytes-append (reverse acc))
        (loop (map cdr live) (append (reverse (map car live)) acc)))))

;; split-records : bytes -> (listof bytes) ; a byte stream of records, one per element
(define (split-records bs)
  (let loop ([i 0] [acc '()])
    (if (= i (bytes-length bs))
        (reverse acc)
        (let ([n (+ 8 (* 256 (bytes-ref bs (+ i 4))) (bytes-ref bs (+ i 5)) (bytes-ref bs (+ i 6)))])
          (loop (+ i n) (cons (subbytes bs i (+ i n)) acc))))))

(with-server
  #:limits (make-limits #:max-connections 50 #:max-concurrent 40)
  (λ (path)
    (test-case "multiplexing: ids 1, 300, 65535 with interleaved records"
      (with-peer path
        (λ (p)
          (define ids '(1 300 65535))
          (define per-id
            (for/list ([id ids])
              (define body (make-bytes (* id 3) (modulo id 251)))
              (split-records
               (bytes-append (begin-bytes id)
                             (stream->bytes 'params id (pairs->bytes (params "WHO" (format "r~a" id))) 5)
                             (stream->bytes 'stdin id body 1000)))))
          (peer-send! p (interleave per-id))
          (for ([id ids] [a (peer-answers p ids)])
            (check-has (regexp (format "^id=~a .*WHO=r~a\nbody=" id id))
                                (cgi-body (answer-stdout a)))
            (check-equal? (bytes-length (cgi-body (answer-stdout a)))
                          (+ (bytes-length (string->bytes/utf-8
                                            (format "id=~a role=responder keep=#t\nWHO=r~a\nbody=" id id)))
                             (* id 3))))
          (check-equal? (peer-extras p) '()))))

    (test-case "multiplexing: a slow handler does not stall another id"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "wait" "GATE" "slow")))
          (check-equal? (next-event) '(started 1))
          (peer-send! p (request-bytes 2 #:params (params "N" "fast")))
          (check-has #rx#"N=fast" (answer-stdout (peer-answer p 2)))
          (semaphore-post (gate "slow"))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"waited 1"))))

    (test-case "abort in the middle of the body: the read fails, one END_REQUEST"
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1)
                      (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                      (record->bytes 'stdin 1 (make-bytes 10 1)))
          (check-equal? (next-event) 'started)
          (peer-send! p (abort-bytes 1))
          (peer-answer p 1)
          (check-pred exn:fail:fastcgi:aborted? (next-event))
          (peer-send! p (request-bytes 2))
          (peer-answer p 2)
          (check-equal? (peer-extras p) '()))))

    (test-case "abort in the middle of the handler: abort-evt fires, one END_REQUEST"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "abort-evt")))
          (check-equal? (next-event) 'started)
          (peer-send! p (abort-bytes 1))
          (peer-answer p 1)
          (check-equal? (next-event) 'aborted)
          (peer-send! p (request-bytes 1))
          (check-has #rx#"id=1" (answer-stdout (peer-answer p 1)))
          (check-equal? (peer-extras p) '()))))

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
          (check-equal? (peer-extras p) '()))))

    (test-case "keep-conn: off closes after END_REQUEST; on serves two in a row"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:keep? #f))
          (check-has #rx#"keep=#f" (answer-stdout (peer-answer p 1)))
          (check-true (peer-eof? p))))
      (with-peer path
        (λ (p)
          (for ([i 2])
            (peer-send! p (request-bytes 1 #:params (params "I" (number->string i))))
            (check-has (regexp (format "I=~a" i)) (answer-stdout (peer-answer p 1)))))))

    (test-case "STDERR records carry what the handler writes to current-error-port"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "stderr")))
          (define a (peer-answer p 1))
          (check-equal? (answer-stderr a) #"oops: something went wrong")
          (check-equal? (cgi-body (answer-stdout a)) #"fine"))))

    (test-case "a handler that raises: 500 on STDOUT, END_REQUEST, connection usable"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "raise")))
          (check-status (peer-answer p 1) 500)
          (peer-send! p (request-bytes 2))
          (check-status (peer-answer p 2) 200))))

    (test-case "a 3 MiB response arrives whole in records of at most 65535 bytes"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "big")))
          (define a (peer-answer p 1 10))
          (define body (cgi-body (answer-stdout a)))
          (check-equal? (bytes-length body) (* 48 65536))
          (check-equal? (subbytes body (* 47 65536) (+ 3 (* 47 65536))) #"VVV")
          (check-equal? (last (answer-stdout-sizes a)) 0 "the empty STDOUT record")
          (check-true (andmap (λ (n) (<= 1 n 65535)) (drop-right (answer-stdout-sizes a) 1))))))))

(with-server
  #:limits (make-limits #:stdin-buffer (* 64 1024))
  (λ (path)
    (test-case "a 5 MiB body streams through a 64 KiB buffer"
      (with-peer path
        (λ (p)
          (define n (* 5 1024 1024))
          (define writer
            (thread (λ () (peer-send! p (request-bytes 1 #:params (params "MODE" "count"
                                                                          "CONTENT_LENGTH" (number->string n))
                                                       #:stdin (make-bytes n 1))))))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1 20)))
                        (string->bytes/utf-8 (format "count=~a" n)))
          (check-true (thread? (sync/timeout 5 writer))))))))
