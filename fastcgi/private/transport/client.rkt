#lang racket/base
;; A FastCGI client: connects to an application over a unix socket or TCP, sends requests
;; and demultiplexes the answers, so that many requests can be in flight on one connection.
;; It drives `raco fastcgi request` and the end-to-end tests, against our server or others.
;;
;; One reader thread per connection hands records to per-request state by id; each request
;; is written by its own thread, one record at a time under the connection's write lock, so
;; a large body does not hold the other requests back.
(require racket/contract/base
         racket/tcp
         racket/unix-socket
         "client-cgi.rkt"
         "../protocol/protocol.rkt")

;; The answer to one request. stdout, stderr: bytes; protocol-status: a symbol
;; ('request-complete 'cant-mpx-conn 'overloaded 'unknown-role) or the wire number.
(struct fcgi-reply (id stdout stderr app-status protocol-status) #:transparent)

;; closed: #f while open, then a string saying why. waiters: GET_VALUES slots, oldest first.
(struct fcgi-client (address in out custodian write-lock state-lock pending
                             [closed #:mutable] [waiters #:mutable]))

;; A result delivered once, from another thread: a value or an exn to raise.
(struct slot (result done))
(struct pending slot (id stdout stderr))

(define name/c (or/c string? bytes?))
(define params/c (or/c (listof (cons/c name/c name/c)) (hash/c name/c name/c)))
(define body/c (or/c bytes? input-port?))
(define timeout/c (and/c real? positive?))
(define headers/c (listof (cons/c string? string?)))
(define call/c
  (->* (fcgi-client? #:params params/c)
       (#:stdin body/c
        #:data (or/c #f body/c)
        #:role (or/c 'responder 'authorizer 'filter (integer-in 0 65535))
        #:keep-conn? any/c
        #:timeout timeout/c
        #:id (or/c #f (integer-in 1 65535)))
       any))

(provide
 (struct-out fcgi-reply)
 (contract-out
  [fastcgi-connect (->* (string?) (#:timeout timeout/c) fcgi-client?)]
  [fcgi-client? (-> any/c boolean?)]
  [fcgi-client-close (-> fcgi-client? void?)]
  [fastcgi-call call/c]
  [fastcgi-call-evt call/c]
  [fastcgi-get-values (->* (fcgi-client? (listof string?)) (#:timeout timeout/c) headers/c)]
  [fastcgi-abort (-> fcgi-client? (integer-in 1 65535) void?)]
  [fastcgi-send-raw (-> fcgi-client? bytes? void?)]
  [parse-cgi-response (-> bytes? (values (integer-in 100 999) headers/c bytes?))]
  [fastcgi-request (->* (string?)
                        (#:method string? #:uri string? #:headers headers/c #:body body/c
                         #:content-length (or/c #f exact-nonnegative-integer?)
                         #:params-extra (listof (cons/c name/c name/c)) #:timeout timeout/c)
                        (values (integer-in 100 999) headers/c bytes?))]))

;; For `raco fastcgi request`, which builds its own calls.
(module+ private (provide cgi-params override-params))

(define record-chunk 65528)

;; ---------------------------------------------------------------------------------------
;; Connecting and closing.

;; fastcgi-connect : string #:timeout real -> fcgi-client
;; Connects to "unix:/path", "/path", "HOST:PORT" or "[IPv6]:PORT".
(define (fastcgi-connect address #:timeout [timeout 10])
  (define (fail fmt . args)
    (raise (exn:fail:fastcgi (format "cannot connect to ~a: ~a" address (apply format fmt args))
                             (current-continuation-marks))))
  (define target (parse-address address))
  (unless target
    (fail "bad address (expected unix:/path, HOST:PORT or [IPv6]:PORT)"))
  (define cust (make-custodian))
  (define result (box #f))
  (define connector
    (parameterize ([current-custodian cust])
      (thread (λ ()
                (set-box! result
                          (with-handlers ([exn:fail? values])
                            (call-with-values
                             (λ () (if (string? target)
                                       (unix-socket-connect target)
                                       (tcp-connect (car target) (cdr target))))
                             cons)))))))
  (define done? (sync/timeout timeout (thread-dead-evt connector)))
  (define r (unbox result))
  (unless (and done? (pair? r)) (custodian-shutdown-all cust))
  (cond
    [(not done?) (fail "no connection within the ~a s timeout" timeout)]
    [(exn? r) (fail "~a" (exn-reason r))]
    [else
     (define c (fcgi-client address (car r) (cdr r) cust (make-semaphore 1) (make-semaphore 1)
                            (make-hasheqv) #f '()))
     (parameterize ([current-custodian cust])
       (thread (λ () (read-loop c))))
     c]))

;; parse-address : string -> (or/c path-string (cons string port-number) #f)
(define (parse-address a)
  (cond
    [(regexp-match #rx"^unix:(.+)$" a) => cadr]
    [(regexp-match? #rx"^/" a) a]
    [(regexp-match #rx"^(?:\\[([^]]+)\\]|([^:]+)):([0-9]+)$" a)
     => (λ (m) (define port (string->number (cadddr m)))
          (and (<= 1 port 65535) (cons (or (cadr m) (caddr m)) port)))]
    [else #f]))

;; exn-reason : exn -> string ; the system's words from a connect error, on one line
(define (exn-reason e)
  (define m (exn-message e))
  (cond [(regexp-match #rx"error: ([^\n;]*)" m) => cadr]
        [else (car (regexp-split #rx"\n" m))]))

;; fcgi-client-close : fcgi-client -> void
;; Fails the calls still in flight and closes the connection.
(define (fcgi-client-close c) (shut! c "fcgi-client-close was called"))

;; shut! : fcgi-client string -> void
;; Marks the client closed (once), fails every pending call and GET_VALUES with reason,
;; then closes the ports and ends the reader and writer threads.
(define (shut! c reason)
  (define-values (calls waiters)
    (call-with-semaphore
     (fcgi-client-state-lock c)
     (λ ()
       (cond
         [(fcgi-client-closed c) (values '() '())]
         [else
          (set-fcgi-client-closed! c reason)
          (define calls (hash-values (fcgi-client-pending c)))
          (define waiters (fcgi-client-waiters c))
          (hash-clear! (fcgi-client-pending c))
          (set-fcgi-client-waiters! c '())
          (values calls waiters)]))))
  (for ([p (in-list calls)])
    (complete! p (make-exn "fastcgi-call: connection closed before END_REQUEST ~a (~a)"
                           (format "for request id ~a" (pending-id p)) reason)))
  (for ([w (in-list waiters)])
    (complete! w (make-exn "fastcgi-get-values: connection closed before GET_VALUES_RESULT (~a)"
                           reason)))
  (custodian-shutdown-all (fcgi-client-custodian c)))

;; make-exn : string any ... -> exn:fail:fastcgi
(define (make-exn fmt . args)
  (exn:fail:fastcgi (apply format fmt args) (current-continuation-marks)))

;; check-open : fcgi-client symbol -> void ; raises when the connection is closed
(define (check-open c who)
  (define reason (fcgi-client-closed c))
  (when reason
    (raise (make-exn "~a: the connection to ~a is closed (~a)"
                     who (fcgi-client-address c) reason))))

;; ---------------------------------------------------------------------------------------
;; Reading: one thread per connection.

;; read-loop : fcgi-client -> void ; decode and dispatch until EOF or a protocol error
(define (read-loop c)
  (define d (make-decoder))
  (define in (fcgi-client-in c))
  (shut! c (with-handlers ([exn:fail? (λ (e) (format "connection failed: ~a" (exn-message e)))])
             (let loop ()
               (cond
                 [(eof-object? (decoder-read! d in)) "the application closed the connection"]
                 [else
                  (let drain ()
                    (define r (decoder-next! d))
                    (when r (dispatch! c r) (drain)))
                  (loop)])))))

;; dispatch! : fcgi-client record -> void
;; Records for ids not in flight, and management records nobody waits for, are skipped.
(define (dispatch! c r)
  (define id (record-id r))
  (define p (hash-ref (fcgi-client-pending c) id #f))
  (case (record-type r)
    [(stdout) (when p (write-bytes (record-content r) (pending-stdout p)))]
    [(stderr) (when p (write-bytes (record-content r) (pending-stderr p)))]
    [(end-request)
     (when p
       (define-values (app-status protocol-status) (parse-end-request (record-content r)))
       (hash-remove! (fcgi-client-pending c) id)
       (complete! p (fcgi-reply id (get-output-bytes (pending-stdout p) #t)
                                (get-output-bytes (pending-stderr p) #t)
                                app-status protocol-status)))]
    [(get-values-result unknown-type)
     (when (zero? id)
       (define w (call-with-semaphore
                  (fcgi-client-state-lock c)
                  (λ ()
                    (define ws (fcgi-client-waiters c))
                    (and (pair? ws) (begin0 (car ws) (set-fcgi-client-waiters! c (cdr ws)))))))
       (when w (complete! w r)))]
    [else (void)]))

;; complete! : slot any -> void ; the first result wins
(define (complete! s v)
  (when (box-cas! (slot-result s) #f v)
    (semaphore-post (slot-done s))))

;; slot-evt : slot string real -> evt
;; Ready with the slot's value (raising it when an exn), or raises after timeout seconds.
(define (slot-evt s what timeout)
  (choice-evt
   (wrap-evt (semaphore-peek-evt (slot-done s))
             (λ (_)
               (define v (unbox (slot-result s)))
               (if (exn? v) (raise v) v)))
   (wrap-evt (alarm-evt (+ (current-inexact-monotonic-milliseconds) (* 1000 timeout)) #t)
             (λ (_) (raise (make-exn "~a: no answer within the ~a s timeout" what timeout))))))

;; ---------------------------------------------------------------------------------------
;; Writing.

;; write-locked! : fcgi-client (output-port -> any) -> void
(define (write-locked! c proc)
  (call-with-semaphore (fcgi-client-write-lock c) (λ () (proc (fcgi-client-out c)) (void))))

;; send-stream! : fcgi-client symbol natural (or/c bytes input-port) -> void
;; One record per 65528 bytes, each under the lock so other requests interleave, then the
;; empty record. A port is read one record at a time, never whole; flushed before each read.
(define (send-stream! c type id src)
  (cond
    [(bytes? src)
     (let loop ([i 0])
       (define j (min (bytes-length src) (+ i record-chunk)))
       (when (< i j)
         (write-locked! c (λ (out) (write-record type id src out i j)))
         (loop j)))]
    [else
     (define buf (make-bytes record-chunk))
     (let loop ()
       (write-locked! c flush-output)
       (define n (read-bytes! buf src))
       (unless (eof-object? n)
         (write-locked! c (λ (out) (write-record type id buf out 0 n)))
         (loop)))])
  (write-locked! c (λ (out) (write-record type id #"" out))))

;; params->pairs : (or/c list hash) -> list ; a hash goes in name order
(define (params->pairs params)
  (if (hash? params)
      (sort (hash->list params) bytes<? #:key (λ (p) (->bytes (car p))))
      params))

;; register! : fcgi-client (or/c #f natural) -> pending
;; Allocates the lowest free id (or the one asked for) and enters the request in the table.
(define (register! c want-id)
  (call-with-semaphore
   (fcgi-client-state-lock c)
   (λ ()
     (check-open c 'fastcgi-call)
     (define table (fcgi-client-pending c))
     (define id (or want-id
                    (for/first ([i (in-range 1 65536)] #:unless (hash-has-key? table i)) i)
                    (raise (make-exn "fastcgi-call: all 65535 request ids are in flight"))))
     (when (hash-has-key? table id)
       (raise (make-exn "fastcgi-call: request id ~a is already in flight" id)))
     (define p (pending (box #f) (make-semaphore 0) id (open-output-bytes) (open-output-bytes)))
     (hash-set! table id p)
     p)))

;; fastcgi-call-evt : fcgi-client #:params ... -> evt
;; Starts the request now; the event's result is the fcgi-reply. A failure to send (the
;; connection, or a body port raising) fails the call and aborts the request.
(define (fastcgi-call-evt c #:params params #:stdin [stdin #""] #:data [data #f]
                          #:role [role 'responder] #:keep-conn? [keep-conn? #t]
                          #:timeout [timeout 30] #:id [want-id #f])
  (define p (register! c want-id))
  (define id (pending-id p))
  (parameterize ([current-custodian (fcgi-client-custodian c)])
    (thread
     (λ ()
       (with-handlers ([exn:fail?
                        (λ (e)
                          (complete! p (make-exn "fastcgi-call: sending request id ~a failed: ~a"
                                                 id (exn-message e)))
                          (with-handlers ([exn:fail? void]) (fastcgi-abort c id)))])
         (write-locked! c (λ (out) (write-record 'begin-request id
                                                 (begin-request-content role keep-conn?) out)))
         (send-stream! c 'params id (pairs->bytes (params->pairs params)))
         (send-stream! c 'stdin id stdin)
         (when (or data (eq? role 'filter)) (send-stream! c 'data id (or data #"")))
         (write-locked! c flush-output)))))
  (slot-evt p (format "fastcgi-call (request id ~a)" id) timeout))

;; fastcgi-call : fcgi-client #:params ... -> fcgi-reply ; fastcgi-call-evt, then sync
(define fastcgi-call
  (make-keyword-procedure
   (λ (kws vals . args) (sync (keyword-apply fastcgi-call-evt kws vals args)))))

;; fastcgi-get-values : fcgi-client (listof string) #:timeout real -> (listof (cons string string))
;; Asks on request id 0; the answer holds the names the application knows.
(define (fastcgi-get-values c names #:timeout [timeout 10])
  (define w (slot (box #f) (make-semaphore 0)))
  (call-with-semaphore (fcgi-client-state-lock c)
                       (λ ()
                         (check-open c 'fastcgi-get-values)
                         (set-fcgi-client-waiters! c (append (fcgi-client-waiters c) (list w)))))
  (define content (pairs->bytes (for/list ([n (in-list names)]) (cons n #""))))
  (send-now! c 'fastcgi-get-values (λ (out) (write-record 'get-values 0 content out)))
  (define r (sync (slot-evt w "fastcgi-get-values" timeout)))
  (when (eq? (record-type r) 'unknown-type)
    (raise (make-exn "fastcgi-get-values: the application answered UNKNOWN_TYPE")))
  (for/list ([p (in-list (parse-pairs (record-content r)))])
    (cons (bytes->string/utf-8 (car p) #\uFFFD) (bytes->string/utf-8 (cdr p) #\uFFFD))))

;; fastcgi-abort : fcgi-client natural -> void
;; Sends ABORT_REQUEST when id is in flight; the call then ends with the END_REQUEST.
(define (fastcgi-abort c id)
  (when (hash-has-key? (fcgi-client-pending c) id)
    (send-now! c 'fastcgi-abort (λ (out) (write-record 'abort-request id #"" out)))))

;; fastcgi-send-raw : fcgi-client bytes -> void ; the bytes as they are, for hostile tests
(define (fastcgi-send-raw c bs)
  (check-open c 'fastcgi-send-raw)
  (send-now! c 'fastcgi-send-raw (λ (out) (write-bytes bs out))))

;; send-now! : fcgi-client symbol (output-port -> any) -> void
;; Writes and flushes under the lock; a failure to write becomes an exn:fail:fastcgi.
(define (send-now! c who proc)
  (with-handlers ([(λ (e) (and (exn:fail? e) (not (exn:fail:fastcgi? e))))
                   (λ (e) (raise (make-exn "~a: cannot write to ~a: ~a"
                                           who (fcgi-client-address c) (exn-message e))))])
    (write-locked! c (λ (out) (proc out) (flush-output out)))))

;; ---------------------------------------------------------------------------------------
;; Whole HTTP-like requests (their params and their answer: client-cgi.rkt).

;; fastcgi-request : string #:method ... -> (values natural list bytes)
;; Connects, sends one request as nginx would (KEEP_CONN off), parses the answer, closes.
;; A port body needs #:content-length.
(define (fastcgi-request address #:method [method "GET"] #:uri [uri "/"] #:headers [headers '()]
                         #:body [body #""] #:content-length [content-length #f]
                         #:params-extra [extra '()] #:timeout [timeout 30])
  (define len (if (bytes? body) (bytes-length body) content-length))
  (unless len
    (raise-arguments-error 'fastcgi-request "#:content-length is required with a port #:body"))
  (define c (fastcgi-connect address #:timeout timeout))
  (dynamic-wind
   void
   (λ ()
     (define r (fastcgi-call c #:params (cgi-params method uri headers (and (> len 0) len) extra)
                             #:stdin body #:keep-conn? #f #:timeout timeout))
     (unless (eq? (fcgi-reply-protocol-status r) 'request-complete)
       (raise (make-exn "fastcgi-request: the application answered ~a"
                        (fcgi-reply-protocol-status r))))
     (parse-cgi-response (fcgi-reply-stdout r)))
   (λ () (fcgi-client-close c))))
