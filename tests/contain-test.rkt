#lang racket/base
;; fastcgi/private/engine/contain.rkt: a handler that runs away ends its own request, not the
;; process. call-handler on a request over pipes (tests/lib/pipe-conn.rkt): its value, what
;; it raised, exit called by the handler (and exit anywhere else), and, with a memory
;; limit, a handler in a thread of its own, ended when it holds too much or is killed.
;; (The same in `raco fastcgi serve`'s workers: runaway-test.)
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/engine/contain.rkt"
         (only-in "../fastcgi/private/engine/request.rkt" fastcgi-request-handler fastcgi-request-conn)
         "../fastcgi/private/engine/wire.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; live : -> fastcgi-request ; a GET of /x on a connection over pipes
(define (live)
  (define-values (c p) (make-pipe-conn))
  (make-live-request c 1 #:params (params "REQUEST_METHOD" "GET" "REQUEST_URI" "/x")))

;; warnings : (-> any) -> (values any (listof string)) ; thunk's value, the warnings it logged
(define (warnings thunk)
  (define rx (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (define v (thunk))
  (values v (let loop ([acc '()])
              (define e (sync/timeout 0.1 rx))
              (if e (loop (cons (vector-ref e 1) acc)) (reverse acc)))))

(test-case "call-handler: #f when the handler returns; a box of what it raised; breaks enabled"
  (for ([limit '(#f 100000000)])
    (define r (live))
    (define enabled (box #f))
    (check-false (call-handler (λ (r) (set-box! enabled (break-enabled)) 'ignored) r limit))
    (check-true (unbox enabled) (format "breaks enabled in the handler (limit ~a)" limit))
    (define b (call-handler (λ (r) (error 'h "boom")) r limit))
    (check-true (and (box? b) (exn:fail? (unbox b)) (equal? (exn-message (unbox b)) "h: boom")))
    (check-equal? (unbox (call-handler (λ (r) (raise 'not-an-exn)) r limit)) 'not-an-exn)))

(test-case "exit in a handler ends its request (logged); exit elsewhere does what it did"
  (define outer-calls '())
  (parameterize ([exit-handler (λ (v) (set! outer-calls (cons v outer-calls)))])
    (install-exit-handler!)
    (install-exit-handler!)                       ; a second install does not wrap twice
    (define r (live))
    (define-values (b lines) (warnings (λ () (call-handler (λ (r) (exit 3) 'not-here) r #f))))
    (check-true (and (box? b) (handler-ended? (unbox b))))
    (check-equal? lines '("fastcgi: request 1 from pipe GET /x: handler called exit: request ended"))
    (check-equal? outer-calls '() "the process's exit handler was not called")
    (exit 7)
    (check-equal? outer-calls '(7) "outside a handler: the exit handler that was there")))

(test-case "request-memory: the handler runs in a thread of its own, which is the request's"
  (define r (live))
  (define inner (box #f))
  (check-false (call-handler (λ (r) (set-box! inner (current-thread))) r 100000000))
  (check-false (eq? (unbox inner) (current-thread)))
  (check-eq? (fastcgi-request-handler r) (unbox inner)))

(test-case "request-memory: a handler over its limit is ended, the request answered for"
  (define r (live))
  (define-values (b lines)
    (warnings (λ () (call-handler (λ (r) (let loop ([acc '()] [i 0])
                                           (when (zero? (modulo i 64)) (collect-garbage))
                                           (loop (cons (make-bytes 65536) acc) (add1 i))))
                                  r (* 8 1024 1024)))))
  (check-true (and (box? b) (handler-ended? (unbox b))))
  (check-equal? lines '("fastcgi: request 1 from pipe GET /x: over --request-memory 8 MiB: ended")))

(test-case "request-memory: a handler thread killed from outside ends its request; the lock is back"
  (define r (live))
  (define c (fastcgi-request-conn r))
  (define-values (b lines)
    (warnings (λ () (call-handler (λ (r) (kill-thread (current-thread))) r 100000000))))
  (check-true (and (box? b) (handler-ended? (unbox b))))
  (check-equal? lines '("fastcgi: request 1 from pipe GET /x: handler thread killed: request ended"))
  (check-true (semaphore-try-wait? (conn-lock c)) "the connection's write lock is free")
  (check-false (conn-broken? c) "it was not held: the connection goes on"))
