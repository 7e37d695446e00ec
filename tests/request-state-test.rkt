#lang racket/base
;; fastcgi/private/engine/request-state.rkt, its pure parts: a new request record, the states in
;; which its input is done, check-live, and the ways it ends (mark-done!, request-abort!,
;; close-request-stdin!). The record's connection is made over pipes; no socket, no thread.
(require rackunit
         "../fastcgi/private/engine/request-state.rkt"
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         (only-in "../fastcgi/private/engine/wire.rkt" make-conn))

;; new-record : natural -> fastcgi-request ; a Responder's request on a connection over pipes
(define (new-record id)
  (define-values (in peer-out) (make-pipe))
  (define-values (peer-in out) (make-pipe))
  (define c (make-conn in out "unix" (make-server void)))
  (define sema (make-semaphore 0))
  (make-request-record #:id id #:role 'responder #:keep-conn? #t #:conn c
                       #:abort-sema sema #:abort-evt (semaphore-peek-evt sema) #:fill 8))

(test-case "request-state: a new record, in state params, nothing received or sent"
  (define r (new-record 7))
  (for ([row (in-list `((,fastcgi-request-id 7) (,fastcgi-request-role responder)
                        (,fastcgi-request-keep-conn? #t) (,fastcgi-request-peer "unix")
                        (,fastcgi-request-state params) (,fastcgi-request-params-acc ())
                        (,fastcgi-request-params-size 0) (,fastcgi-request-body-bytes 0)
                        (,fastcgi-request-data-bytes 0) (,fastcgi-request-fill 8)
                        (,fastcgi-request-sent? #f) (,fastcgi-request-rejected #f)
                        (,fastcgi-request-stdin-out #f) (,fastcgi-request-pipes ())))])
    (check-equal? ((car row) r) (cadr row) (format "~a" (object-name (car row)))))
  (check-false (sync/timeout 0 (fastcgi-request-abort-evt r)) "not aborted"))

(test-case "request-state: request-input-done? and check-live in each state"
  (define r (new-record 1))
  (for ([row (in-list '((params #f #t) (stdin #f #t) (data #f #t) (running #t #t) (done #t #f)))])
    (set-fastcgi-request-state! r (car row))
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
  (set-fastcgi-request-state! r 'running)
  (check-true (mark-done! r))
  (check-eq? (fastcgi-request-state r) 'done)
  (check-false (mark-done! r))
  (check-false (request-abort! r) "already done: nothing to abort")
  (check-false (sync/timeout 0 (fastcgi-request-abort-evt r)) "a done request is not aborted"))

(test-case "request-state: request-abort! ends the request, fires abort-evt, closes its input"
  (define r (new-record 3))
  (define-values (stdin-in stdin-out) (make-pipe))
  (define-values (data-in data-out) (make-pipe))
  (define pipe-box (box 'reader))
  (set-fastcgi-request-stdin-out! r stdin-out)
  (set-fastcgi-request-data-out! r data-out)
  (set-fastcgi-request-pipes! r (list pipe-box))
  (check-true (request-abort! r))
  (check-eq? (fastcgi-request-state r) 'done)
  (check-not-false (sync/timeout 0 (fastcgi-request-abort-evt r)))
  (check-true (port-closed? stdin-out))
  (check-true (port-closed? data-out))
  (check-eq? (fastcgi-request-stdin-out r) 'closed)
  (check-false (fastcgi-request-data-out r))
  (check-false (unbox pipe-box) "the body pipes are dropped")
  (check-false (request-abort! r) "the second abort does nothing"))

(test-case "request-state: close-request-stdin! marks a stdin with no pipe closed, closes a pipe"
  (define r (new-record 4))
  (close-request-stdin! r)
  (check-eq? (fastcgi-request-stdin-out r) 'closed)
  (define r2 (new-record 5))
  (define-values (in out) (make-pipe))
  (set-fastcgi-request-stdin-out! r2 out)
  (close-request-stdin! r2)
  (check-true (port-closed? out))
  (check-eq? (fastcgi-request-stdin-out r2) out "the port stays, closed")
  (check-true (eof-object? (read-byte in))))
