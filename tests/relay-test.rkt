#lang racket/base
;; fastcgi/private/servlet/relay.rkt: a request for another worker's continuation is passed on to
;; that worker's private socket and its answer relayed; every other request, and one whose
;; owner cannot be reached, is served here. The owner is played by a thread of this process
;; on a private socket (no worker process); requests on a connection over pipes. (Between
;; real workers behind nginx: integration/servlet-nginx-sessions-test, cluster-servlet-test.)
(require racket/os
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "../fastcgi/private/servlet/relay.rkt"
         (only-in "../fastcgi/private/engine/request.rkt" request-finish! request-stdin-out
                  close-request-stdin! fastcgi-request-status)
         "../fastcgi/private/transport/transport.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; k-uri : natural -> string ; a URL that resumes a continuation of worker `owner`
(define (k-uri owner)
  (define instance (bitwise-ior (arithmetic-shift 5 32) owner))
  (define param (format "~s" `(("k" . ,(format "~s" (list instance 1 99))))))
  (string-append "/app;" (percent-encode param) "?q=1"))

;; percent-encode : string -> string ; as a browser sends a path parameter
(define (percent-encode s)
  (regexp-replace* #rx"[^A-Za-z0-9()._~-]" s
                   (λ (c) (string-append "%" (string-upcase (number->string (char->integer (string-ref c 0)) 16))))))

;; served : (fastcgi-request -> any) string [bytes] -> (values answer fastcgi-request)
;; The routing handler run on one request for uri with body; what the front got.
(define (served routing uri [body #""])
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:params (params "REQUEST_METHOD" "POST" "REQUEST_URI" uri)
                               #:state 'stdin))
  (write-bytes body (request-stdin-out r))
  (close-request-stdin! r)
  (routing r)
  (request-finish! r 0 'request-complete)
  (values (peer-answer p 1) r))

;; here : fastcgi-request -> void ; the handler of this worker
(define (here r) (write-bytes (bytes-append ok-head #"served here") (fastcgi-request-stdout r)))

(define prefix (format "fastcgi-relay-test-~a-~a" (getpid) (random 1000000000)))
(define (peer-name id) (format "~a/w~a" prefix id))

(test-case "no continuation, or this worker's own: served here"
  (define routing (make-routing-handler here 1 peer-name))
  (for ([uri (list "/" "/app?x=1" "/a;b/c" (k-uri 1) "/app;((bad")])
    (define-values (a r) (served routing uri))
    (check-equal? (cgi-body (answer-stdout a)) #"served here" uri)))

(test-case "another worker's continuation, nobody listening at its socket: served here"
  (define routing (make-routing-handler here 1 peer-name))
  (define-values (a r) (served routing (k-uri 2)))
  (check-equal? (cgi-body (answer-stdout a)) #"served here"))

;; fake-owner : listener (any -> void) bytes -> thread
;; Accepts one connection, reads the request (until its empty STDIN), reports its records
;; (report! never blocks), and writes answer-bytes.
(define (fake-owner l report! answer-bytes)
  (thread
   (λ ()
     (define-values (in out peer) (listener-accept l))
     (define d (make-decoder))
     (define records
       (let loop ([acc '()])
         (define r (decoder-next! d))
         (cond [(and r (eq? (record-type r) 'stdin) (zero? (bytes-length (record-content r))))
                (reverse (cons r acc))]
               [r (loop (cons r acc))]
               [(eof-object? (decoder-read! d in)) (reverse acc)]
               [else (loop acc)])))
     (report! records)
     (write-bytes answer-bytes out)
     (close-output-port out)
     (close-input-port in))))

(test-case "another worker's continuation: passed on whole, its STDOUT relayed, its status kept"
  (define l (open-private-listener (peer-name 2)))
  (define-values (report! next-event) (make-event-log))
  (fake-owner l report! (bytes-append (record->bytes 'stdout 1 #"Status: 201 Created\r\n\r\nfrom owner")
                                 (record->bytes 'stderr 1 #"owner's warning")
                                 (record->bytes 'stdout 1 #"")
                                 (record->bytes 'end-request 1 (end-request-content 0 'request-complete))))
  (define routing (make-routing-handler (λ (r) (error 'here "must not run")) 1 peer-name))
  (define err (open-output-bytes))
  (define-values (a r) (parameterize ([current-error-port err]) (served routing (k-uri 2) #"the body")))
  (check-equal? (answer-stdout a) #"Status: 201 Created\r\n\r\nfrom owner")
  (check-equal? (get-output-bytes err) #"owner's warning" "STDERR to the handler's error port")
  (check-equal? (fastcgi-request-status r) 201 "the status, for the access log")
  (define sent (next-event))
  (check-equal? (map record-type sent) '(begin-request params params stdin stdin))
  (check-equal? (parse-pairs (record-content (cadr sent)))
                `((#"REQUEST_METHOD" . #"POST") (#"REQUEST_URI" . ,(string->bytes/utf-8 (k-uri 2)))))
  (check-equal? (record-content (list-ref sent 3)) #"the body")
  (listener-close! l))

(test-case "an owner that closes before any answer: served here"
  (define l (open-private-listener (peer-name 3)))
  (define-values (report! next-event) (make-event-log))
  (fake-owner l report! #"")
  (define routing (make-routing-handler here 1 peer-name))
  (define-values (a r) (served routing (k-uri 3)))
  (check-equal? (cgi-body (answer-stdout a)) #"served here")
  (check-pred list? (next-event))
  (listener-close! l))
