#lang racket/base
;; One FastCGI request's record and the states of its life, below request.rkt (which makes
;; requests and gives their params and body) and request-output.rkt (what they send):
;; the struct, its exceptions, and the ways it ends without a word on the wire (done,
;; aborted) that both sides need. States: 'params (PARAMS coming) -> 'stdin (an
;; Authorizer's goes straight on) -> 'data (a Filter's only) -> 'running (all input
;; ended) -> 'done; and from any of them -> 'done.
(require ffi/unsafe/atomic
         "../protocol/protocol.rkt"
         "wire.rkt")
(provide (struct-out fastcgi-request)
         make-request-record
         (struct-out exn:fail:fastcgi:aborted)
         (struct-out exn:fail:fastcgi:body)
         request-input-done?
         check-live
         mark-done!
         close-request-stdin!
         close-request-data!
         request-abort!)

(struct exn:fail:fastcgi:aborted exn:fail:fastcgi ())
;; raised by a body read when the body went over max-body or CONTENT_LENGTH: answered 413
(struct exn:fail:fastcgi:body exn:fail:fastcgi ())

;; The public part: id, role ('responder 'authorizer 'filter), keep-conn?, params (list of
;; (cons bytes bytes) in arrival order), stdin, data (#f unless Filter), stdout, stderr,
;; abort-evt (ready once the request is aborted), peer (the front's address).
;; The rest belongs to the connection. The fields after start-ms change as the request
;; goes; make-request-record gives each its first value. (No #:auto fields: with them,
;; Racket CS no longer knows the struct's shape in other modules, and every access from
;; there becomes a call of a generic accessor.)
(struct fastcgi-request
  (id role keep-conn? abort-evt peer conn abort-sema start-ms
      [pv #:mutable] [stdin-port #:mutable] [data #:mutable]
      [stdout #:mutable] [stderr-port #:mutable]
      [stdin-out #:mutable]  ; #f (no pipe yet), 'closed (none, and stdin ended) or the port
      [data-out #:mutable]
      [table #:mutable]      ; hash of params, built on first look-up
      [state #:mutable]      ; 'params 'stdin 'data 'running 'done
      [rejected #:mutable]   ; #f, or the byte limit the body went over
      [params-acc #:mutable] ; list of PARAMS chunks, newest first
      [params-size #:mutable]
      [body-bytes #:mutable] ; STDIN bytes received so far
      [data-bytes #:mutable] ; DATA bytes received so far
      [buf #:mutable] [fill #:mutable] ; stdout buffer; content starts at fill's first value
      [sent? #:mutable]      ; some stdout already left
      [status #:mutable]     ; status of the answer, for the access log
      [bytes-out #:mutable]
      [handler #:mutable]    ; the handler's thread, once it runs
      [broken-ms #:mutable]  ; when the request timeout broke the handler, or #f
      [pipes #:mutable])     ; boxes of the body pipes' reading ends (make-body-pipe)
  #:constructor-name new-request)

;; make-request-record : #:id natural #:role symbol #:keep-conn? boolean #:conn conn
;;                       #:abort-sema semaphore #:abort-evt evt #:fill natural -> fastcgi-request
;; A request in state 'params with nothing received or sent; fill: where the stdout
;; buffer's content starts (the room for a record header). The one call of the struct's
;; positional constructor.
(define (make-request-record #:id id #:role role #:keep-conn? keep-conn? #:conn c
                             #:abort-sema sema #:abort-evt abort-evt #:fill fill)
  (new-request id role keep-conn? abort-evt (conn-peer c) c sema (now-ms)
               '() #f #f #f #f #f #f #f 'params #f '() 0 0 0 #f fill #f #f 0 #f #f '()))

;; request-input-done? : request -> boolean ; all the request's input streams have ended
(define (request-input-done? r)
  (memq (fastcgi-request-state r) '(running done)))

;; check-live : request symbol -> void ; writes after the end or an abort fail
(define (check-live r who)
  (when (eq? (fastcgi-request-state r) 'done)
    (raise (exn:fail:fastcgi:aborted (format "~a: request already ended or aborted" who)
                                     (current-continuation-marks)))))

;; close-request-stdin! : request -> void ; stdin has ended (or the request has)
(define (close-request-stdin! r)
  (start-atomic)
  (define out (fastcgi-request-stdin-out r))
  (unless out (set-fastcgi-request-stdin-out! r 'closed))
  (end-atomic)
  (when (output-port? out) (close-output-port out)))

;; close-request-data! : request -> void ; a Filter's DATA has ended (or the request has)
(define (close-request-data! r)
  (define out (fastcgi-request-data-out r))
  (when (output-port? out) (close-output-port out)))

;; mark-done! : request -> boolean ; #t for the one caller that ends the request
(define (mark-done! r)
  (define c (fastcgi-request-conn r))
  (define lock (conn-lock c))
  (parameterize-break #f
    (conn-lock! c)
    (define first? (not (eq? (fastcgi-request-state r) 'done)))
    (when first? (set-fastcgi-request-state! r 'done))
    (semaphore-post lock)
    first?))

;; request-abort! : request -> boolean
;; The request ends without a word on the wire (the connection is gone or the caller
;; answers for it); body reads and writes fail and abort-evt fires.
(define (request-abort! r)
  (define first? (mark-done! r))
  (when first?
    (semaphore-post (fastcgi-request-abort-sema r))
    (close-request-stdin! r)
    (close-request-data! r)
    (release-pipes! r))
  first?)

;; release-pipes! : request -> void
;; The body pipes of an aborted request are dropped with what they still hold (their
;; reads fail from now on): the connection's reader keeps nothing of them either.
(define (release-pipes! r)
  (start-atomic)
  (for ([b (in-list (fastcgi-request-pipes r))]) (set-box! b #f))
  (when (output-port? (fastcgi-request-stdin-out r)) (set-fastcgi-request-stdin-out! r 'closed))
  (set-fastcgi-request-data-out! r #f)
  (end-atomic))
