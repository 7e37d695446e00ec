#lang racket/base
;; A raw FastCGI peer for tests: an in-process server on a unix socket in a temp dir, and a
;; "front" that writes records byte by byte as a test wants them (good or hostile) and
;; reads the replies with a deadline, so no test can hang.
(require racket/async-channel
         racket/file
         racket/list
         racket/string
         racket/unix-socket
         rackunit
         "../../fastcgi/main.rkt"
         "../../fastcgi/private/protocol/protocol.rkt")
(provide call-with-server
         call-with-tcp-server
         (struct-out answer)
         peer? peer-connect ports->peer peer-send! peer-close! peer-shutdown-write! peer-extras
         peer-read-record peer-answers peer-answer peer-eof? peer-quiet?
         request-bytes stream->bytes begin-bytes abort-bytes
         cgi-status cgi-header cgi-body
         with-peer params split-records interleave check-has check-status
         ok-head make-event-log)

;; call-with-server : handler (path-string -> any) #:roles #:limits -> any
;; Runs a server for the duration of proc, which gets the socket path; stops it after.
(define (call-with-server handler proc
                          #:roles [roles '(responder)]
                          #:limits [lim (make-limits)])
  (define dir (make-temporary-file "fcgi-conn-~a" 'directory))
  (define path (path->string (build-path dir "app.sock")))
  (define stop (serve/fastcgi-raw handler #:roles roles #:limits lim #:allowed-clients #f
                                  #:listen (string-append "unix:" path)))
  (dynamic-wind
   void
   (λ () (proc path))
   (λ () (stop #:timeout 1) (delete-directory/files dir #:must-exist? #f))))

;; call-with-tcp-server : handler (port-number -> any) #:listen #:allowed-clients -> any
;; As call-with-server, on TCP (by default 127.0.0.1 on a free port): proc gets the port.
(define (call-with-tcp-server handler proc
                              #:listen [listen "127.0.0.1:0"]
                              #:allowed-clients [allowed #f])
  (define address #f)
  (define stop (serve/fastcgi-raw handler #:listen listen #:allowed-clients allowed
                                  #:on-ready (λ (a) (set! address a))))
  (dynamic-wind
   void
   (λ () (proc (string->number (cadr (regexp-match #rx":([0-9]+)$" address)))))
   (λ () (stop #:timeout 1))))

;; ok-head : bytes ; the CGI head of a plain 200 answer, for test handlers
(define ok-head #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n")

;; make-event-log : -> (values (any -> void) ([seconds] -> any))
;; What handlers report to a test: report! never blocks; next-event returns the oldest
;; report not yet taken, or 'no-event after seconds (default 5).
(define (make-event-log)
  (define events (make-async-channel))
  (values (λ (v) (async-channel-put events v))
          (λ ([timeout 5]) (or (sync/timeout timeout events) 'no-event))))

;; ---------------------------------------------------------------------------------------
;; The peer.

;; extras: records read that no peer-answers call asked for (newest first)
(struct peer (in out dec [extras #:mutable]))

;; peer-connect : path-string -> peer
(define (peer-connect path)
  (define-values (in out) (unix-socket-connect path))
  (ports->peer in out))

;; ports->peer : input-port output-port -> peer ; a front over ports of the test's own
;; (a connection over pipes: tests/lib/pipe-conn.rkt)
(define (ports->peer in out)
  (peer in out (make-decoder) '()))

;; peer-send! : peer bytes ... -> void ; a failed write (server gone) is ignored
(define (peer-send! p . bss)
  (with-handlers ([exn:fail? void])
    (for ([bs (in-list bss)]) (write-bytes bs (peer-out p)))
    (flush-output (peer-out p))))

;; peer-shutdown-write! : peer -> void ; half-close: the server reads EOF
(define (peer-shutdown-write! p)
  (with-handlers ([exn:fail? void]) (close-output-port (peer-out p))))

;; peer-close! : peer -> void
(define (peer-close! p)
  (peer-shutdown-write! p)
  (close-input-port (peer-in p)))

;; peer-read-record : peer [seconds] -> (or/c record 'eof 'timeout)
;; A reset connection counts as 'eof.
(define (peer-read-record p [timeout 5])
  (define deadline (+ (current-inexact-milliseconds) (* 1000 timeout)))
  (let loop ()
    (define r (decoder-next! (peer-dec p)))
    (cond
      [r r]
      [else
       (define left (/ (max 0 (- deadline (current-inexact-milliseconds))) 1000))
       (cond
         [(not (sync/timeout left (peer-in p))) 'timeout]
         [(eof-object? (with-handlers ([exn:fail? (λ (e) eof)])
                         (decoder-read! (peer-dec p) (peer-in p))))
          'eof]
         [else (loop)])])))

;; One request's reply: its STDOUT and STDERR streams joined, the END_REQUEST fields, and
;; the sizes of its STDOUT records (to check record bounds).
(struct answer (stdout stderr app-status protocol-status stdout-sizes) #:transparent)

;; peer-answers : peer (listof natural) [seconds] -> (listof answer)
;; Reads until every id has its END_REQUEST; records for other ids, and anything after an
;; id's END_REQUEST, go to the extras. Raises on EOF or timeout, saying what was missing.
(define (peer-answers p ids [timeout 5])
  (define deadline (+ (current-inexact-milliseconds) (* 1000 timeout)))
  (define outs (make-hasheqv))   ; id -> list of stdout chunks, newest first
  (define errs (make-hasheqv))
  (define ends (make-hasheqv))   ; id -> (cons app-status protocol-status)
  (let loop ()
    (unless (for/and ([id ids]) (hash-has-key? ends id))
      (define r (peer-read-record p (/ (max 0 (- deadline (current-inexact-milliseconds))) 1000)))
      (unless (record? r)
        (error 'peer-answers "~a before END_REQUEST for ~a; got ~a" r
               (filter (λ (id) (not (hash-has-key? ends id))) ids)
               (for/list ([(id o) outs]) (cons id (apply bytes-append (reverse o))))))
      (define id (record-id r))
      (cond
        [(or (not (memv id ids)) (hash-has-key? ends id))
         (set-peer-extras! p (cons r (peer-extras p)))]
        [(eq? (record-type r) 'stdout) (hash-update! outs id (λ (l) (cons (record-content r) l)) '())]
        [(eq? (record-type r) 'stderr) (hash-update! errs id (λ (l) (cons (record-content r) l)) '())]
        [(eq? (record-type r) 'end-request)
         (define-values (app proto) (parse-end-request (record-content r)))
         (hash-set! ends id (cons app proto))]
        [else (set-peer-extras! p (cons r (peer-extras p)))])
      (loop)))
  (for/list ([id ids])
    (define o (reverse (hash-ref outs id '())))
    (answer (apply bytes-append o)
            (apply bytes-append (reverse (hash-ref errs id '())))
            (car (hash-ref ends id))
            (cdr (hash-ref ends id))
            (map bytes-length o))))

;; peer-answer : peer natural [seconds] -> answer
(define (peer-answer p id [timeout 5]) (first (peer-answers p (list id) timeout)))

;; peer-eof? : peer [seconds] -> boolean
;; True when the server closes the connection within timeout; records on the way are
;; kept in the extras.
(define (peer-eof? p [timeout 3])
  (define r (peer-read-record p timeout))
  (cond [(eq? r 'eof) #t]
        [(eq? r 'timeout) #f]
        [else (set-peer-extras! p (cons r (peer-extras p))) (peer-eof? p timeout)]))

;; peer-quiet? : peer seconds -> boolean ; nothing arrives (not even EOF) for secs
(define (peer-quiet? p secs)
  (eq? (peer-read-record p secs) 'timeout))

;; ---------------------------------------------------------------------------------------
;; Building requests.

;; stream->bytes : type natural bytes [natural] -> bytes
;; A whole stream; with chunk, records of at most chunk bytes (pairs straddle records).
(define (stream->bytes type id content [chunk 65528])
  (define out (open-output-bytes))
  (for ([i (in-range 0 (bytes-length content) chunk)])
    (write-record type id content out i (min (bytes-length content) (+ i chunk))))
  (write-stream type id #"" out)
  (get-output-bytes out))

;; begin-bytes : natural [role] [keep?] -> bytes
(define (begin-bytes id [role 'responder] [keep? #t])
  (record->bytes 'begin-request id (begin-request-content role keep?)))

;; abort-bytes : natural -> bytes
(define (abort-bytes id) (record->bytes 'abort-request id #""))

;; request-bytes : natural keyword-options -> bytes
;; BEGIN_REQUEST, the PARAMS stream, the STDIN stream (unless #f) and the DATA stream
;; (when given).
(define (request-bytes id #:role [role 'responder] #:keep? [keep? #t]
                       #:params [params '()] #:stdin [stdin #""] #:data [data #f])
  (bytes-append (begin-bytes id role keep?)
                (stream->bytes 'params id (pairs->bytes params))
                (if stdin (stream->bytes 'stdin id stdin) #"")
                (if data (stream->bytes 'data id data) #"")))

;; ---------------------------------------------------------------------------------------
;; Reading CGI answers.

;; cgi-split : bytes -> (values bytes bytes) ; head and body
(define (cgi-split bs)
  (define m (regexp-match-positions #rx#"\r?\n\r?\n" bs))
  (if m
      (values (subbytes bs 0 (caar m)) (subbytes bs (cdar m)))
      (values bs #"")))

;; cgi-header : bytes string -> (or/c string #f)
(define (cgi-header bs name)
  (define-values (head body) (cgi-split bs))
  (for/or ([line (in-list (regexp-split #rx"\r?\n" (bytes->string/latin-1 head)))])
    (define m (regexp-match #rx"^([^:]*):[ \t]*(.*)$" line))
    (and m (string-ci=? (cadr m) name) (string-trim (caddr m)))))

;; cgi-status : bytes -> natural ; 200 when there is no Status header
(define (cgi-status bs)
  (define s (cgi-header bs "Status"))
  (if s (string->number (car (string-split s))) 200))

;; cgi-body : bytes -> bytes
(define (cgi-body bs)
  (define-values (head body) (cgi-split bs))
  body)

;; ---------------------------------------------------------------------------------------
;; Test conveniences.

;; with-peer : path-string (peer -> any) -> any ; the peer is closed afterwards
(define (with-peer path proc)
  (define p (peer-connect path))
  (dynamic-wind void (λ () (proc p)) (λ () (peer-close! p))))

;; params : string string ... -> (listof (cons string string)) ; "N1" "V1" "N2" "V2" ...
(define (params . kvs)
  (let loop ([kvs kvs])
    (if (null? kvs) '() (cons (cons (car kvs) (cadr kvs)) (loop (cddr kvs))))))

;; split-records : bytes -> (listof bytes) ; a well-formed record stream, one per element
(define (split-records bs)
  (let loop ([i 0] [acc '()])
    (if (= i (bytes-length bs))
        (reverse acc)
        (let ([n (+ 8 (* 256 (bytes-ref bs (+ i 4))) (bytes-ref bs (+ i 5)) (bytes-ref bs (+ i 6)))])
          (loop (+ i n) (cons (subbytes bs i (+ i n)) acc))))))

;; interleave : (listof (listof bytes)) -> bytes ; round robin over per-request records
(define (interleave lists)
  (let loop ([lists lists] [acc '()])
    (define live (filter pair? lists))
    (if (null? live)
        (apply bytes-append (reverse acc))
        (loop (map cdr live) (append (reverse (map car live)) acc)))))

;; check-has : regexp bytes -> void
(define-check (check-has rx bs)
  (unless (regexp-match? rx bs) (fail-check (format "~s not in ~s" rx bs))))

;; check-status : answer natural -> void ; a CGI status and a complete END_REQUEST
(define (check-status a code)
  (check-equal? (cgi-status (answer-stdout a)) code (format "~s" (answer-stdout a)))
  (check-equal? (answer-protocol-status a) 'request-complete))
