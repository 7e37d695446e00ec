#lang racket/base
;; fastcgi/private/engine/request-state.rkt, the owner of a request's fields: its state
;; machine, pair by pair against a table written here; a new record; request-input-done?
;; and check-live in each state; the ways it ends (mark-done!, request-abort!); its body
;; streams' ends. The record's connection is made over pipes; no socket, no thread.
(require racket/port
         rackunit
         "../fastcgi/private/engine/request-state.rkt"
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         (only-in "../fastcgi/private/engine/wire.rkt" make-conn))

(define states '(params stdin data running done))
(define events '(admit stdin-end data-end end))
(define roles '(responder authorizer filter))

;; Every (state event role) that moves, written out here independently of the module's
;; table; every other triple must answer #f (the event does not apply there).
(define expected
  (append
   '(((params admit responder) stdin)
     ((params admit filter) stdin)
     ((params admit authorizer) running)
     ((stdin stdin-end responder) running)
     ((stdin stdin-end filter) data)
     ((data data-end filter) running))
   (for*/list ([s '(params stdin data running)] [role roles])
     (list (list s 'end role) 'done))))

(test-case "request-state: each (state event role) triple moves as the table says, and no other"
  (for* ([s states] [e events] [role roles])
    (define want (cond [(assoc (list s e role) expected) => cadr] [else #f]))
    (check-equal? (next-request-state s e role) want (format "~a --~a--> (~a)" s e role))))

(test-case "request-state: the module's table is the moves but end, each once"
  (check-equal? (length request-transitions) 6)
  (for ([row (in-list request-transitions)])
    (check-equal? (cadr (assoc (car row) expected)) (cadr row) (format "~a" (car row)))))

;; new-record : natural [symbol] -> fastcgi-request ; a request on a connection over pipes
(define (new-record id [role 'responder])
  (define-values (in peer-out) (make-pipe))
  (define-values (peer-in out) (make-pipe))
  (define c (make-conn in out "unix" (make-server void)))
  (define sema (make-semaphore 0))
  (make-request-record #:id id #:role role #:keep-conn? #t #:conn c
                       #:abort-sema sema #:abort-evt (semaphore-peek-evt sema)
                       #:output 'output #:make-stdout (λ (r) (open-output-nowhere))
                       #:body-limit 1024))

;; to-state! : request symbol -> void ; by the transitions, as the reader makes them
(define (to-state! r state)
  (case state
    [(params) (void)]
    [(done) (mark-done! r)]
    [else (request-admit! r)
          (let loop ()
            (unless (eq? (fastcgi-request-state r) state)
              (request-stream-ended! r (eq? (fastcgi-request-state r) 'data))
              (loop)))]))

(test-case "request-state: a new record, in state params, nothing received"
  (define r (new-record 7))
  (for ([row (in-list `((,fastcgi-request-id 7) (,fastcgi-request-role responder)
                        (,fastcgi-request-keep-conn? #t) (,fastcgi-request-peer "unix")
                        (,fastcgi-request-state params) (,fastcgi-request-output output)
                        (,fastcgi-request-params-size 0) (,fastcgi-request-body-bytes 0)
                        (,fastcgi-request-data-bytes 0) (,fastcgi-request-rejected #f)
                        (,fastcgi-request-stdin-out #f) (,fastcgi-request-data #f)
                        (,fastcgi-request-handler #f) (,fastcgi-request-broken-ms #f)))])
    (check-equal? ((car row) r) (cadr row) (format "~a" (object-name (car row)))))
  (check-pred output-port? (fastcgi-request-stdout r))
  (check-pred input-port? (fastcgi-request-data (new-record 8 'filter)) "a Filter's DATA pipe")
  (check-false (sync/timeout 0 (fastcgi-request-abort-evt r)) "not aborted"))

(test-case "request-state: a transition that does not apply is an error of the caller"
  (define r (new-record 9))
  (check-exn #rx"no stdin-end in state params" (λ () (request-stream-ended! r #f)))
  (check-eq? (fastcgi-request-state r) 'params)
  (define a (new-record 10 'authorizer))
  (request-admit! a)
  (check-eq? (fastcgi-request-state a) 'running "an Authorizer has no body")
  (check-eq? (fastcgi-request-stdin-out a) 'closed "its stdin has ended"))

(test-case "request-state: a stream that ends after its handler ended the request changes nothing"
  ;; the reader saw an empty STDIN record while the handler, in its own thread, answered
  ;; without reading its input (the fuzzer's 'no stdin-end in state done')
  (define r (new-record 11))
  (request-admit! r)
  (check-eq? (fastcgi-request-state r) 'stdin)
  (check-true (mark-done! r))
  (request-stream-ended! r #f)
  (check-eq? (fastcgi-request-state r) 'done)
  (define f (new-record 12 'filter))
  (request-admit! f)
  (request-stream-ended! f #f)
  (check-true (mark-done! f))
  (request-stream-ended! f #t)
  (check-eq? (fastcgi-request-state f) 'done))

(test-case "request-state: params gathered within the bound, then accepted, then looked up"
  (define r (new-record 11))
  (check-equal? (request-params-chunk! r #"ab" 2 3) 2)
  (check-equal? (request-params-chunk! r #"c" 1 3) 3)
  (check-equal? (request-params-chunk! r #"d" 1 3) 4 "counted past the bound")
  (check-equal? (request-params-take! r) #"abc" "kept only within it")
  (check-equal? (request-params-take! r) #"" "let go of")
  (request-params-accepted! r (bytes 1 1 65 66))
  (check-equal? (request-param r "A") #"B"))

(test-case "request-state: request-input-done? and check-live in each state"
  (for ([row (in-list '((params #f #t) (stdin #f #t) (data #f #t) (running #t #t) (done #t #f)))])
    (define r (new-record 1 'filter))
    (to-state! r (car row))
    (check-eq? (fastcgi-request-state r) (car row))
    (check-equal? (and (request-input-done? r) #t) (cadr row) (format "input done in ~a" (car row)))
    (define live?
      (with-handlers ([exn:fail:fastcgi:aborted?
                       (λ (e)
                         (check-equal? (exn-message e) "write: request already ended or aborted")
                         #f)])
        (check-live r 'write)
        #t))
    (check-equal? live? (caddr row) (format "live in ~a" (car row)))))

(test-case "request-state: mark-done! is #t for the first caller only"
  (define r (new-record 2))
  (to-state! r 'running)
  (check-true (mark-done! r))
  (check-eq? (fastcgi-request-state r) 'done)
  (check-false (mark-done! r))
  (check-false (request-abort! r) "already done: nothing to abort")
  (check-false (sync/timeout 0 (fastcgi-request-abort-evt r)) "a done request is not aborted"))

(test-case "request-state: request-abort! ends the request, fires abort-evt, drops its body pipes"
  (define r (new-record 3 'filter))
  (to-state! r 'stdin)
  (define stdin-out (request-stdin-out r))
  (define data-out (fastcgi-request-data-out r))
  (write-bytes #"queued" stdin-out)
  (check-true (request-abort! r))
  (check-eq? (fastcgi-request-state r) 'done)
  (check-not-false (sync/timeout 0 (fastcgi-request-abort-evt r)))
  (check-true (port-closed? stdin-out))
  (check-true (port-closed? data-out))
  (check-eq? (fastcgi-request-stdin-out r) 'closed)
  (check-false (fastcgi-request-data-out r))
  (check-exn #rx"read: request aborted" (λ () (read-byte (fastcgi-request-stdin r)))
             "what was queued goes with the request")
  (check-exn #rx"read: request aborted" (λ () (read-byte (fastcgi-request-data r))))
  (check-false (request-abort! r) "the second abort does nothing"))

(test-case "request-state: a stdin that ends before its pipe is made reads eof; a made one closes"
  (define r (new-record 4))
  (to-state! r 'running)
  (check-eq? (fastcgi-request-stdin-out r) 'closed)
  (check-true (eof-object? (read-byte (fastcgi-request-stdin r))))
  (define r2 (new-record 5))
  (to-state! r2 'stdin)
  (define out (request-stdin-out r2))
  (check-equal? (request-body-received! r2 3 #f) 3)
  (write-bytes #"abc" out)
  (request-stream-ended! r2 #f)
  (check-true (port-closed? out))
  (check-eq? (fastcgi-request-stdin-out r2) out "the port stays, closed")
  (check-equal? (read-bytes 4 (fastcgi-request-stdin r2)) #"abc")
  (check-true (eof-object? (read-byte (fastcgi-request-stdin r2)))))
