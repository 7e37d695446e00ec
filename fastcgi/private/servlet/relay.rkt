#lang racket/base
;; Continuations across worker processes. A continuation lives in the memory of the worker
;; that captured it, and the front's connections reach any worker (the kernel hands each
;; new connection to one of them). A continuation id names its owner (sessions.rkt); every
;; worker also listens on a private socket (control.rkt names it), and a worker that gets
;; another's continuation URL passes the FastCGI request on to the owner there and relays
;; the answer back, streaming both ways: params as they came, the body as the handler would
;; read it, the owner's STDOUT and STDERR as they arrive.
;;
;; When the owner cannot be reached (it crashed, or expired its sessions and exited), the
;; request is served here: the servlet's manager does not know the id, and the servlet's
;; expiration handler answers, as for any expired continuation.
(require net/url-string
         net/url-structs
         (only-in (submod "../protocol/cgi.rkt" private) head-status)
         "../protocol/protocol.rkt"
         "../engine/request.rkt"
         (only-in "servlet.rkt" continuation-of)
         (only-in "sessions.rkt" owner-of)
         (only-in "../transport/transport.rkt" private-connect)
         (only-in "web-url.rkt" uri-bytes->url))
(provide make-routing-handler)

;; make-routing-handler : (fastcgi-request -> any) natural (natural -> string)
;;                        -> (fastcgi-request -> any)
;; handler, with the requests for another worker's continuations passed on to it at the
;; private socket that peer-name names for the owner's worker id.
(define (make-routing-handler handler self peer-name)
  (λ (r)
    (define owner (request-owner r))
    (unless (and owner (not (eqv? owner self))
                 (relay-request! r (peer-name owner)))
      (handler r))))

;; request-owner : fastcgi-request -> (or/c natural #f)
;; The worker that owns the continuation the request's URL resumes; #f for a URL without
;; one (or a malformed one, which the servlet answers itself). Only URLs with a path
;; parameter (a `;` before the query) are decoded.
(define (request-owner r)
  (define uri (request-param r #"REQUEST_URI"))
  (and uri
       (let ([semi (path-semicolon uri)])
         (and semi
              (let* ([u (with-handlers ([exn:fail? (λ (e) #f)]) (uri-bytes->url uri))]
                     [k (and u (continuation-of u))])
                (and (pair? k) (owner-of (car k))))))))

;; path-semicolon : bytes -> boolean ; a `;` before any `?`
(define (path-semicolon bs)
  (let loop ([i 0])
    (and (< i (bytes-length bs))
         (let ([b (bytes-ref bs i)])
           (cond [(eqv? b 59) #t]          ; ;
                 [(eqv? b 63) #f]          ; ?
                 [else (loop (add1 i))])))))

;; relay-request! : fastcgi-request string -> boolean
;; #f when the owner did not answer: its socket cannot be connected to, or the connection
;; ended before any of the answer came (a worker killed a moment ago may still accept on
;; its socket for a short while, then reset); the caller then serves the request itself.
;; Else the answer was relayed (or the exchange failed midway: the request is ended with
;; what arrived, and the error logged by the caller's handler).
(define (relay-request! r socket)
  (define-values (in out)
    (with-handlers ([exn:fail? (λ (e) (values #f #f))])
      (private-connect socket)))
  (cond
    [(not in) #f]
    [else
     (define id 1)
     (define sender
       (thread
        (λ ()
          (with-handlers ([exn:fail? void])
            (write-record 'begin-request id (begin-request-content 'responder #f) out)
            (write-stream 'params id (pairs->bytes (fastcgi-request-params r)) out)
            (define stdin (fastcgi-request-stdin r))
            (define buf (make-bytes 65528))
            (let loop ()
              (flush-output out)
              (define n (read-bytes-avail! buf stdin))
              (unless (eof-object? n)
                (write-record 'stdin id buf out 0 n)
                (loop)))
            (write-record 'stdin id #"" out)
            (flush-output out)))))
     (define answered? (box #f))
     (dynamic-wind
      void
      (λ ()
        (with-handlers ([(λ (e) (and (exn:fail? e) (not (unbox answered?)))) (λ (e) #f)])
          (copy-answer! r in (fastcgi-request-stdout r) (current-error-port) answered?)
          #t))
      (λ ()
        (kill-thread sender)
        (close-input-port in)
        (close-output-port* out)))]))

;; copy-answer! : fastcgi-request input-port output-port output-port box -> void
;; The owner's records until END_REQUEST: STDOUT to out, STDERR to err; answered? is set
;; once a record has come. The status of the answer's head, when the first STDOUT record
;; holds it whole, is the request's, for the access log (else the request reads it from
;; its stdout buffer, as for any answer).
(define (copy-answer! r in out err answered?)
  (define first? #t)
  (let loop ()
    (define head (read-bytes 8 in))
    (unless (and (bytes? head) (= (bytes-length head) 8))
      (error 'relay "the owner closed the connection before END_REQUEST"))
    (define type (bytes-ref head 1))
    (define len (+ (* 256 (bytes-ref head 4)) (bytes-ref head 5)))
    (define content (if (zero? len) #"" (read-bytes len in)))
    (unless (and (bytes? content) (= (bytes-length content) len))
      (error 'relay "the owner's record was cut short"))
    (set-box! answered? #t)
    (define pad (bytes-ref head 6))
    (unless (zero? pad) (read-bytes pad in))
    (case (type->symbol type)
      [(stdout)
       (when (and first? (positive? len))
         (set! first? #f)
         (define status (head-status content 0 len))
         (when status (request-note-status! r status)))
       (write-bytes content out)
       (loop)]
      [(stderr) (write-bytes content err) (loop)]
      [(end-request) (flush-output out)]
      [else (loop)])))

;; close-output-port* : output-port -> void ; closing may flush to a peer that is gone
(define (close-output-port* p) (with-handlers ([exn:fail? void]) (close-output-port p)))
