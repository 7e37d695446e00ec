#lang racket/base
;; One FastCGI request as the raw interface sees it: made by the connection when
;; BEGIN_REQUEST comes (make-fastcgi-request), its params, and its body streams:
;; - stdin and data: bounded pipes fed by the connection's reader; reads fail once the
;;   request is aborted. The stdin pipe is made on first use (the handler asks for it, or
;;   body bytes arrive): most requests have no body and most handlers never read it, and
;;   its custom port is the costliest object of a request;
;; - stdout and stderr, and the request's end: request-output.rkt;
;; - the record and its states: request-state.rkt.
;; This module is the face of all three: the rest of the server requires only it.
(require ffi/unsafe/atomic
         "../util/limits.rkt"
         "../protocol/protocol.rkt"
         "request-output.rkt"
         "request-state.rkt"
         "wire.rkt")
(provide (except-out (struct-out fastcgi-request) new-request fastcgi-request-pv fastcgi-request-stdin-port
                     set-fastcgi-request-stdin-port! set-fastcgi-request-stdin-out!
                     fastcgi-request-stderr-port set-fastcgi-request-stderr-port!)
         fastcgi-request-params
         fastcgi-request-raw-params
         (struct-out raw-params)
         fastcgi-request-stdin
         fastcgi-request-stderr
         handler-error-port
         set-handler-request!
         request-stdin-out
         close-request-stdin!
         close-request-data!
         request-body-empty?
         (struct-out exn:fail:fastcgi:aborted)
         (struct-out exn:fail:fastcgi:body)
         make-fastcgi-request
         request-param
         request-param/scan
         request-input-done?
         request-abort!
         request-end-now!
         request-finish!
         request-respond-status!
         request-refuse!)

;; make-fastcgi-request : conn natural symbol boolean -> fastcgi-request
(define (make-fastcgi-request c id role keep-conn?)
  (define limit (limits-stdin-buffer (server-limits (conn-server c))))
  (define sema (make-semaphore 0))
  (define r
    ;; abort-evt, as the handler sees it: waiting on it needs a reader on the connection,
    ;; which an inline handler has to ask for (ensure-reader!)
    (make-request-record #:id id #:role role #:keep-conn? keep-conn? #:conn c #:abort-sema sema
                         #:abort-evt (guard-evt (λ () (ensure-reader! c) (semaphore-peek-evt sema)))
                         #:fill header-room))
  (when (eq? role 'filter)
    (define-values (data data-out) (make-body-pipe r limit))
    (set-fastcgi-request-data! r data)
    (set-fastcgi-request-data-out! r data-out))
  (set-fastcgi-request-stdout! r (make-stdout-port r))
  r)

;; fastcgi-request-stdin : request -> input-port ; the body, as the handler reads it
(define (fastcgi-request-stdin r)
  (or (fastcgi-request-stdin-port r) (make-stdin! r)))

;; request-stdin-out : request -> output-port
;; The reader's end of the stdin pipe, made now if need be (closed if stdin has ended).
(define (request-stdin-out r)
  (define out (fastcgi-request-stdin-out r))
  (if (output-port? out) out (begin (make-stdin! r) (fastcgi-request-stdin-out r))))

;; request-body-empty? : request -> boolean
;; STDIN ended with no byte before anyone asked for the pipe (a GET): an adapter can read
;; the body from an empty port and spare the pipe.
(define (request-body-empty? r)
  (and (eq? (fastcgi-request-stdin-out r) 'closed)
       (eqv? 0 (fastcgi-request-body-bytes r))))

;; make-stdin! : request -> input-port
;; Atomic: the handler's thread and the reader may both be first. A stdin that ended
;; before its pipe was made gets a pipe already closed (its reads see eof, or the abort).
(define (make-stdin! r)
  (start-atomic)
  (unless (fastcgi-request-stdin-port r)
    (define-values (in out)
      (make-body-pipe r (limits-stdin-buffer (server-limits (conn-server (fastcgi-request-conn r))))))
    (when (eq? (fastcgi-request-stdin-out r) 'closed) (close-output-port out))
    (set-fastcgi-request-stdin-port! r in)
    (set-fastcgi-request-stdin-out! r out))
  (end-atomic)
  (fastcgi-request-stdin-port r))

;; make-body-pipe : request natural -> (values input-port output-port)
;; A pipe of at most `limit` bytes. Its reading end fails once the request is aborted, and
;; at the end of a body that the reader cut off because it went over a limit. The pipe is
;; reached through a box that request-abort! empties: what was queued and never read goes
;; with the request, even while its handler (which may hold the port) runs on.
(define (make-body-pipe r limit)
  (define-values (in out) (make-pipe limit))
  (define abort-evt (semaphore-peek-evt (fastcgi-request-abort-sema r)))
  (define pipe (box in))
  (set-fastcgi-request-pipes! r (cons pipe (fastcgi-request-pipes r)))
  (values
   (make-input-port
    'fastcgi-stdin
    (λ (bs)
      (define in (unbox pipe))
      (cond
        [(or (not in) (sync/timeout 0 abort-evt))
         (raise (exn:fail:fastcgi:aborted "read: request aborted" (current-continuation-marks)))]
        [else
         (define n (read-bytes-avail!* bs in))
         (cond
           [(eqv? n 0) (wrap-evt (choice-evt in abort-evt) (λ (_) 0))]
           [(and (eof-object? n) (fastcgi-request-rejected r))
            (raise (exn:fail:fastcgi:body
                    (format "read: request body over the limit of ~a bytes" (fastcgi-request-rejected r))
                    (current-continuation-marks)))]
           [else n])]))
    #f
    void)
   out))

;; A request's params as they came: bs[start, end), which check-params accepted. The
;; server keeps them so until something asks for the list (fastcgi-request-params): a
;; handler that reads none or a few of them never pays for making twenty pairs.
(struct raw-params (bs start end))

;; raw-params-ref : raw-params bytes -> (or/c bytes #f) ; the first value of name, in place
(define (raw-params-ref v name)
  (params-ref (raw-params-bs v) (raw-params-start v) (raw-params-end v) name))

;; fastcgi-request-params : request -> (listof (cons bytes bytes))
;; Made on first use, sharing byte strings with the last params made on the same
;; connection (see parse-params); those are kept for the next request only when small.
(define (fastcgi-request-params r)
  (define v (fastcgi-request-pv r))
  (cond
    [(raw-params? v)
     (define c (fastcgi-request-conn r))
     (define pairs (parse-params (raw-params-bs v) +inf.0 (conn-last-params c)
                                 (raw-params-start v) (raw-params-end v)))
     (when (string? pairs) (error 'fastcgi-request-params "checked params failed to parse: ~a" pairs))
     (when (<= (- (raw-params-end v) (raw-params-start v)) max-kept-params)
       (set-conn-last-params! c pairs)
       (set-server-last-params! (conn-server c) pairs))
     (set-fastcgi-request-pv! r pairs)
     pairs]
    [else v]))

;; fastcgi-request-raw-params : request -> (or/c raw-params #f)
;; The params as they came, while no list of them was made (an adapter that reads them in
;; place, as web.rkt does); #f once it was.
(define (fastcgi-request-raw-params r)
  (define v (fastcgi-request-pv r))
  (and (raw-params? v) v))

;; The params of a connection's last request are kept, to share their byte strings with
;; the next request's, when they came in at most this many bytes.
(define max-kept-params 4096)

;; request-param : request (or/c bytes string) [any] -> any
;; The value (bytes) of a param, or default. The first occurrence of a name wins.
;; Params not made into a list yet are searched in place (a look-up is a walk of about
;; twenty pairs); once made, a table is built on the first look-up.
(define (request-param r name [default #f])
  (define key (if (string? name) (string->bytes/utf-8 name) name))
  (define v (fastcgi-request-pv r))
  (cond
    [(raw-params? v)
     (or (raw-params-ref v key) default)]
    [else
     (define t (or (fastcgi-request-table r)
                   (let ([t (for/fold ([t (hash)]) ([p (in-list (reverse v))])
                              (hash-set t (car p) (cdr p)))])
                     (set-fastcgi-request-table! r t)
                     t)))
     (hash-ref t key default)]))

;; request-param/scan : request bytes -> (or/c bytes #f)
;; The first value of a param by a walk, in place or of the list: for the engine's own
;; one or two look-ups per request (CONTENT_LENGTH), where building request-param's table
;; would cost more than it saves.
(define (request-param/scan r name)
  (define v (fastcgi-request-pv r))
  (if (raw-params? v)
      (raw-params-ref v name)
      (let loop ([ps v])
        (cond [(null? ps) #f]
              [(bytes=? (caar ps) name) (cdar ps)]
              [else (loop (cdr ps))]))))
