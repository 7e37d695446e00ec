#lang racket/base
;; One FastCGI request as the rest of the server sees it, made by the connection when
;; BEGIN_REQUEST comes (make-fastcgi-request):
;; - its record, states, params and body streams: request-state.rkt, the one module that
;;   writes a request's fields. The body streams are bounded pipes fed by the connection's
;;   reader, whose reads fail once the request is aborted; the stdin pipe is made on first
;;   use (the handler asks for it, or body bytes arrive): most requests have no body and
;;   most handlers never read it, and its custom port is the costliest object of a request;
;; - what it sends, stdout and stderr, and its end: request-output.rkt.
;; This module is the face of both: the rest of the server requires only it.
(require (only-in "../util/clock.rkt" wall-ms-at)
         "../util/limits.rkt"
         (only-in (submod "../protocol/cgi.rkt" private) parse-content-length)
         (only-in "../protocol/queue-time.rkt" queue-time-ms)
         "request-output.rkt"
         "request-state.rkt"
         "wire.rkt")
(provide (all-from-out "request-state.rkt")
         ;; what a request sends, but the parts only a new request needs
         (except-out (all-from-out "request-output.rkt") header-room make-output make-stdout-port)
         make-fastcgi-request
         request-declared-length
         request-queue-time-ms)

;; make-fastcgi-request : conn natural symbol boolean -> fastcgi-request
(define (make-fastcgi-request c id role keep-conn?)
  (define sema (make-semaphore 0))
  ;; abort-evt, as the handler sees it: waiting on it needs a reader on the connection,
  ;; which an inline handler has to ask for (ensure-reader!)
  (make-request-record #:id id #:role role #:keep-conn? keep-conn? #:conn c #:abort-sema sema
                       #:abort-evt (guard-evt (λ () (ensure-reader! c) (semaphore-peek-evt sema)))
                       #:output (make-output)
                       #:make-stdout make-stdout-port
                       #:body-limit (limits-stdin-buffer (server-limits (conn-server c)))))

;; request-declared-length : request boolean -> (or/c natural #f 'bad)
;; The body's length as the front declared it: CONTENT_LENGTH, or for a Filter's DATA
;; (data? #t) FCGI_DATA_LENGTH; #f when absent, 'bad when not a length (cgi.rkt).
(define (request-declared-length r data?)
  (parse-content-length (request-param/scan r (if data? #"FCGI_DATA_LENGTH" #"CONTENT_LENGTH"))))

;; request-queue-time-ms : request -> (or/c real #f)
;; How long the request waited between the front and this server, from the front's
;; HTTP_X_REQUEST_START (queue-time.rkt); #f when the front set none usable.
(define (request-queue-time-ms r)
  (define start (request-param/scan r #"HTTP_X_REQUEST_START"))
  (and start (queue-time-ms start (wall-ms-at (fastcgi-request-start-ms r)))))
