#lang racket/base
;; One FastCGI request's record, and the only module that writes its fields: the rest of
;; the server reads them and calls the named transitions and operations below.
;;
;; The states of a request and the events that move it (request-transitions, checked pair
;; by pair in tests/request-state-test.rkt):
;;
;;   params --admit--> stdin     (a Responder, a Filter: PARAMS ended, the request admitted)
;;   params --admit--> running   (an Authorizer: it has no input after its params)
;;   stdin  --stdin-end--> running (a Responder)
;;   stdin  --stdin-end--> data  (a Filter: its DATA stream follows)
;;   data   --data-end--> running
;;   any but done --end--> done  (answered, refused or aborted: mark-done!, once)
;;
;; Besides its state, a request gathers its params (request-params-chunk!, then
;; request-params-accepted!, made into a list or a table on first use), its body streams
;; (bounded pipes, made on first use, dropped at an abort), the thread that runs its
;; handler and when the request timeout broke it. What it sends is request-output.rkt's
;; record, held here in `output`.
(require ffi/unsafe/atomic
         (only-in "../util/limits.rkt" limits-stdin-buffer)
         "../protocol/protocol.rkt"
         "wire.rkt" (submod "wire.rkt" request-state))
(provide fastcgi-request? fastcgi-request-id fastcgi-request-role fastcgi-request-keep-conn?
         fastcgi-request-abort-evt fastcgi-request-peer fastcgi-request-conn
         fastcgi-request-abort-sema fastcgi-request-start-ms fastcgi-request-output
         fastcgi-request-stdout fastcgi-request-data fastcgi-request-stdin-out
         fastcgi-request-data-out fastcgi-request-state fastcgi-request-rejected
         fastcgi-request-params-size fastcgi-request-body-bytes fastcgi-request-data-bytes
         fastcgi-request-handler fastcgi-request-broken-ms
         make-request-record
         (struct-out exn:fail:fastcgi:aborted) (struct-out exn:fail:fastcgi:body)
         ;; states
         request-transitions next-request-state request-admit! request-stream-ended!
         mark-done! request-abort! request-input-done? check-live
         ;; params
         (struct-out raw-params) request-params-chunk! request-params-take!
         request-params-accepted! fastcgi-request-params fastcgi-request-raw-params
         request-param request-param/scan
         ;; body
         fastcgi-request-stdin request-stdin-out request-body-empty? request-body-received!
         request-body-rejected! close-request-stdin! close-request-data!
         ;; handler
         request-handler-started! request-broken! call-as-handler-of handler-request)

(struct exn:fail:fastcgi:aborted exn:fail:fastcgi ())
;; raised by a body read when the body went over max-body or CONTENT_LENGTH: answered 413
(struct exn:fail:fastcgi:body exn:fail:fastcgi ())

;; The public part: id, role ('responder 'authorizer 'filter), keep-conn?, params (list of
;; (cons bytes bytes) in arrival order), stdin, data (#f unless Filter), stdout,
;; abort-evt (ready once the request is aborted), peer (the front's address).
;; The rest belongs to the connection. The fields after output change as the request
;; goes, each only here; make-request-record gives each its first value. (No #:auto
;; fields: with them, Racket CS no longer knows the struct's shape in other modules, and
;; every access from there becomes a call of a generic accessor.)
(struct fastcgi-request
  (id role keep-conn? abort-evt peer conn abort-sema start-ms
      output                 ; what it sends (request-output.rkt's record)
      [pv #:mutable]         ; raw-params, or the list of pairs once made
      [stdin-port #:mutable] [data #:mutable] [stdout #:mutable]
      [stdin-out #:mutable]  ; #f (no pipe yet), 'closed (none, and stdin ended) or the port
      [data-out #:mutable]
      [table #:mutable]      ; hash of params, built on first look-up
      [state #:mutable]      ; 'params 'stdin 'data 'running 'done
      [rejected #:mutable]   ; #f, or the byte limit the body went over
      [params-acc #:mutable] ; list of PARAMS chunks, newest first
      [params-size #:mutable]
      [body-bytes #:mutable] ; STDIN bytes received so far
      [data-bytes #:mutable] ; DATA bytes received so far
      [handler #:mutable]    ; the handler's thread, once it runs
      [broken-ms #:mutable]  ; when the request timeout broke the handler, or #f
      [pipes #:mutable])     ; boxes of the body pipes' reading ends (make-body-pipe)
  #:constructor-name new-request)

;; make-request-record : #:id natural #:role symbol #:keep-conn? boolean #:conn conn
;;                       #:abort-sema semaphore #:abort-evt evt #:output any
;;                       #:make-stdout (request -> output-port) #:body-limit natural
;;                       -> fastcgi-request
;; A request in state 'params with nothing received; output: its record of what it sends;
;; a Filter's DATA pipe is made now (body-limit bytes at most), its stdout port by
;; make-stdout. The one call of the struct's positional constructor.
(define (make-request-record #:id id #:role role #:keep-conn? keep-conn? #:conn c
                             #:abort-sema sema #:abort-evt abort-evt #:output output
                             #:make-stdout make-stdout #:body-limit limit)
  (define r (new-request id role keep-conn? abort-evt (conn-peer c) c sema (now-ms) output
                         '() #f #f #f #f #f #f 'params #f '() 0 0 0 #f #f '()))
  (when (eq? role 'filter)
    (define-values (data data-out) (make-body-pipe r limit))
    (set-fastcgi-request-data! r data)
    (set-fastcgi-request-data-out! r data-out))
  (set-fastcgi-request-stdout! r (make-stdout r))
  r)

;; ---------------------------------------------------------------------------------------
;; States.

;; ((state event role) next): every move but `end`, which any state but done takes to done.
(define request-transitions
  '(((params admit responder) stdin)
    ((params admit filter) stdin)
    ((params admit authorizer) running)
    ((stdin stdin-end responder) running)
    ((stdin stdin-end filter) data)
    ((data data-end filter) running)))

;; The table compiled once: event -> state -> role -> next (a move is a few hash
;; look-ups, not a list built and searched).
(define compiled-transitions
  (for/fold ([t (hasheq)]) ([row (in-list request-transitions)])
    (define-values (state event role) (apply values (car row)))
    (hash-update t event
                 (λ (by-state)
                   (hash-update by-state state (λ (by-role) (hash-set by-role role (cadr row))) (hasheq)))
                 (hasheq))))

;; next-request-state : symbol symbol symbol -> (or/c symbol #f) ; #f: the event does not apply
(define (next-request-state state event role)
  (if (eq? event 'end)
      (and (not (eq? state 'done)) 'done)
      (hash-ref (hash-ref (hash-ref compiled-transitions event #hasheq()) state #hasheq()) role #f)))

;; step! : request symbol -> void ; a move that must apply (else a bug of the caller)
(define (step! r event)
  (define next (next-request-state (fastcgi-request-state r) event (fastcgi-request-role r)))
  (unless next
    (error 'request-state "request ~a: no ~a in state ~a" (fastcgi-request-id r) event
           (fastcgi-request-state r)))
  (set-fastcgi-request-state! r next))

;; (under-conn-lock r body ...): body's value, run holding r's connection's lock, unbroken
(define-syntax-rule (under-conn-lock r body ...)
  (let ([c (fastcgi-request-conn r)])
    (parameterize-break #f
      (conn-lock! c)
      (begin0 (let () body ...) (semaphore-post (conn-lock c))))))

;; request-admit! : request -> boolean ; #f: it ended first (abort-all!, another thread)
;; Its params have ended and the server takes it: its body comes next, or, for an
;; Authorizer, which has none, it is running (its stdin is an ended one).
(define (request-admit! r)
  (and (under-conn-lock r (and (not (eq? (fastcgi-request-state r) 'done)) (step! r 'admit) #t))
       (begin (when (eq? (fastcgi-request-state r) 'running) (close-request-stdin! r)) #t)))

;; request-stream-ended! : request boolean -> void
;; Its STDIN (data? #f) or a Filter's DATA stream has ended: the handler reads eof there.
;; Its handler may have ended the request meanwhile, from its own thread (it answered
;; before it read all its input): the end of a stream then changes nothing. The state is
;; read and moved under the connection's lock, as mark-done! moves it.
(define (request-stream-ended! r data?)
  (if data? (close-request-data! r) (close-request-stdin! r))
  (under-conn-lock r (unless (eq? (fastcgi-request-state r) 'done)
                       (step! r (if data? 'data-end 'stdin-end)))))

;; request-input-done? : request -> boolean ; all the request's input streams have ended
(define (request-input-done? r)
  (memq (fastcgi-request-state r) '(running done)))

;; check-live : request symbol -> void ; writes after the end or an abort fail
(define (check-live r who)
  (when (eq? (fastcgi-request-state r) 'done)
    (raise (exn:fail:fastcgi:aborted (format "~a: request already ended or aborted" who)
                                     (current-continuation-marks)))))

;; mark-done! : request -> boolean ; #t for the one caller that ends the request
(define (mark-done! r)
  (under-conn-lock r (and (not (eq? (fastcgi-request-state r) 'done))
                          (begin (step! r 'end) #t))))

;; request-abort! : request -> boolean
;; The request ends without a word on the wire (the connection is gone or the caller
;; answers for it); body reads and writes fail and abort-evt fires.
(define (request-abort! r)
  (define first? (mark-done! r))
  (when first?
    (semaphore-post (fastcgi-request-abort-sema r))
    (close-request-stdin! r) (close-request-data! r) (release-pipes! r))
  first?)

;; ---------------------------------------------------------------------------------------
;; Params.

;; A request's params as they came: bs[start, end), which check-params accepted. The
;; server keeps them so until something asks for the list (fastcgi-request-params): a
;; handler that reads none or a few of them never pays for making twenty pairs.
(struct raw-params (bs start end))

;; request-params-chunk! : request bytes natural natural -> natural
;; A PARAMS record's content of len bytes: counted, and kept while the total is within
;; max-bytes (past it the request is refused at the params' end). The new total.
(define (request-params-chunk! r content len max-bytes)
  (define size (+ (fastcgi-request-params-size r) len))
  (set-fastcgi-request-params-size! r size)
  (when (<= size max-bytes)
    (set-fastcgi-request-params-acc! r (cons content (fastcgi-request-params-acc r))))
  size)

;; request-params-take! : request -> bytes ; the params' bytes, in one string, let go of here
(define (request-params-take! r)
  (define acc (fastcgi-request-params-acc r))
  (set-fastcgi-request-params-acc! r '())
  (if (and (pair? acc) (null? (cdr acc))) (car acc) (apply bytes-append (reverse acc))))

;; request-params-accepted! : request bytes -> void ; all, which check-params accepted
(define (request-params-accepted! r all)
  (set-fastcgi-request-pv! r (raw-params all 0 (bytes-length all))))

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

;; ---------------------------------------------------------------------------------------
;; Body.

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

;; request-body-received! : request natural boolean -> natural
;; len more bytes of STDIN (or of DATA, data? #t) came; the stream's new total.
(define (request-body-received! r len data?)
  (define total (+ len (if data? (fastcgi-request-data-bytes r) (fastcgi-request-body-bytes r))))
  (if data? (set-fastcgi-request-data-bytes! r total) (set-fastcgi-request-body-bytes! r total))
  total)

;; request-body-rejected! : request natural -> void
;; The body went over limit bytes: its reads end with exn:fail:fastcgi:body, and a handler
;; that has not started does not run (answered 413).
(define (request-body-rejected! r limit)
  (set-fastcgi-request-rejected! r limit))

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

;; release-pipes! : request -> void
;; The body pipes of an aborted request are dropped with what they still hold (their
;; reads fail from now on): the connection's reader keeps nothing of them either.
(define (release-pipes! r)
  (start-atomic)
  (for ([b (in-list (fastcgi-request-pipes r))]) (set-box! b #f))
  (when (output-port? (fastcgi-request-stdin-out r)) (set-fastcgi-request-stdin-out! r 'closed))
  (set-fastcgi-request-data-out! r #f)
  (end-atomic))

;; ---------------------------------------------------------------------------------------
;; Handler.

;; request-handler-started! : request thread -> void ; t runs the request's handler
(define (request-handler-started! r t)
  (set-fastcgi-request-handler! r t))

;; request-broken! : request real -> void
;; The request timeout broke its handler at ms (+inf.0: and it was then ended from outside).
(define (request-broken! r ms)
  (set-fastcgi-request-broken-ms! r ms))

;; The request whose handler this thread runs (or ran last), or #f; preserved, so that a
;; thread the handler starts holds it too, for as long as it lives: its stderr goes to
;; that request (request-output.rkt) and its exit ends that thread (contain.rkt).
(define handler-request-cell (make-thread-cell #f #t))

;; handler-request : -> (or/c request #f)
(define (handler-request) (thread-cell-ref handler-request-cell))

;; call-as-handler-of : request (-> any) -> any
;; Calls thunk as r's handler thread (and the threads it starts); after it, this thread
;; serves no request. thunk must not escape (call-handler catches everything).
(define (call-as-handler-of r thunk)
  (thread-cell-set! handler-request-cell r)
  (begin0 (thunk)
          (thread-cell-set! handler-request-cell #f)))
