#lang racket/base
;; The connection engine's limits, each with its documented answer: params (431), bodies
;; (413), requests per connection and what one connection's live requests hold together
;; (OVERLOADED), handlers at once (503), and the deadlines (first byte, idle, read,
;; write). A raw peer (tests/lib/raw-peer.rkt) against an in-process server on a unix
;; socket; the handler is tests/lib/connection-handler.rkt's.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/connection-handler.rkt"
         "lib/raw-peer.rkt")

;; -- limits -------------------------------------------------------------------------------
(with-server
  #:limits (make-limits #:max-params-bytes 1000 #:max-params-pairs 10 #:max-body 1000
                        #:max-requests-per-connection 2)
  (λ (path)
    (test-case "params over max-params-bytes or max-params-pairs: 431, no handler"
      (with-peer path
        (λ (p)
          (define runs (unbox handler-runs))
          (peer-send! p (request-bytes 1 #:params (params "BIG" (make-string 1500 #\x))))
          (check-status (peer-answer p 1) 431)
          (peer-send! p (request-bytes 2 #:params (for/list ([i 11]) (cons (format "P~a" i) "v"))))
          (check-status (peer-answer p 2) 431)
          (check-equal? (unbox handler-runs) runs)
          (peer-send! p (request-bytes 3 #:params (for/list ([i 10]) (cons (format "P~a" i) "v"))))
          (check-status (peer-answer p 3) 200))))

    (test-case "CONTENT_LENGTH over max-body: 413 before the handler runs"
      (with-peer path
        (λ (p)
          (define runs (unbox handler-runs))
          (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "5000")
                                       #:stdin (make-bytes 5000 1)))
          (check-status (peer-answer p 1) 413)
          (check-equal? (unbox handler-runs) runs)
          (peer-send! p (request-bytes 2 #:stdin #"ok"))
          (check-has #rx#"body=ok$" (answer-stdout (peer-answer p 2)))
          (check-equal? (peer-extras p) '()))))

    (test-case "STDIN longer than CONTENT_LENGTH, or over max-body: 413 from the body read"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "10")
                                       #:stdin (make-bytes 100 1)))
          (check-status (peer-answer p 1) 413)
          (peer-send! p (request-bytes 2 #:stdin (make-bytes 2000 1)))
          (check-status (peer-answer p 2) 413)
          (peer-send! p (request-bytes 3 #:params (params "CONTENT_LENGTH" "10")
                                       #:stdin (make-bytes 10 65)))
          (check-has #rx#"body=AAAAAAAAAA$" (answer-stdout (peer-answer p 3))))))

    (test-case "a body over the limits before its handler ran: 413, even for a handler that would not read it"
      ;; MODE=size answers without reading its body: it is not run
      (define warnings (make-log-receiver fastcgi-logger 'warning))
      (with-peer path
        (λ (p)
          (define runs (unbox handler-runs))
          (peer-send! p (request-bytes 1 #:params (params "MODE" "size" "N" "5" "CONTENT_LENGTH" "10")
                                       #:stdin (make-bytes 20 1)))
          (check-status (peer-answer p 1) 413)
          (peer-send! p (request-bytes 2 #:params (params "MODE" "size" "N" "5") #:stdin (make-bytes 2000 1)))
          (check-status (peer-answer p 2) 413)
          (check-equal? (unbox handler-runs) runs "no handler ran")
          (check-true (for/or ([_ 20])
                        (define v (sync/timeout 1 warnings))
                        (and v (regexp-match? #rx"request 2 .*stdin over 1000 bytes: answered 413" (vector-ref v 1))))
                      "the 413 is logged")
          (peer-send! p (request-bytes 3 #:params (params "MODE" "size" "N" "5" "CONTENT_LENGTH" "10")
                                       #:stdin (make-bytes 10 65)))
          (check-status (peer-answer p 3) 200)
          (check-equal? (unbox handler-runs) (add1 runs)))))

    (test-case "max-requests-per-connection: OVERLOADED for the one too many"
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1) (begin-bytes 2) (begin-bytes 3))
          (define a (peer-answer p 3))
          (check-equal? (answer-protocol-status a) 'overloaded)
          (check-equal? (answer-stdout a) #"")
          (peer-send! p (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #"")
                      (stream->bytes 'params 2 #"") (stream->bytes 'stdin 2 #""))
          (check-equal? (map answer-app-status (peer-answers p '(1 2))) '(0 0))
          (peer-send! p (request-bytes 3))
          (check-status (peer-answer p 3) 200))))))

(with-server
  #:limits (make-limits #:max-concurrent 1)
  (λ (path)
    (test-case "max-concurrent: 503 while the one handler runs"
      (with-peer path
        (λ (a)
          (peer-send! a (request-bytes 1 #:params (params "MODE" "wait" "GATE" "busy")))
          (check-equal? (next-event) '(started 1))
          (with-peer path
            (λ (b)
              (peer-send! b (request-bytes 1))
              (check-status (peer-answer b 1) 503)))
          (semaphore-post (gate "busy"))
          (check-status (peer-answer a 1) 200))))

    (test-case "max-concurrent: requests one after another on one connection all run"
      (with-peer path
        (λ (p)
          (for ([i 30])
            (peer-send! p (request-bytes 1))
            (check-status (peer-answer p 1) 200)))))))

(with-server
  #:limits (make-limits #:first-byte-timeout 0.5 #:idle-timeout 0.5 #:read-timeout 0.5
                        #:write-timeout 0.5)
  (λ (path)
    ;; check-closed-after : peer seconds -> void ; EOF comes, and not before secs
    (define (check-closed-after p secs)
      (define t0 (current-inexact-milliseconds))
      (check-true (peer-eof? p 3))
      (check-true (>= (- (current-inexact-milliseconds) t0) (* 1000 (- secs 0.1)))))

    (test-case "first-byte-timeout: a silent peer is closed"
      (with-peer path (λ (p) (check-closed-after p 0.5))))

    (test-case "idle-timeout: a kept connection with nothing to do is closed"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1))
          (peer-answer p 1)
          (check-closed-after p 0.5))))

    (test-case "read-timeout: a partial header, or unfinished params, closes"
      (with-peer path
        (λ (p)
          (peer-send! p #"\1\1\0")
          (check-closed-after p 0.5)))
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1) (record->bytes 'params 1 #"\1\1ab"))
          (check-closed-after p 0.5))))

    (test-case "read-timeout in the middle of a body: closed, the handler's read fails"
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1)
                      (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body")))
                      (record->bytes 'stdin 1 #"partial"))
          (check-equal? (next-event) 'started)
          (check-closed-after p 0.5)
          (check-pred exn:fail:fastcgi:aborted? (next-event)))))

    (test-case "write-timeout: a peer that never reads is cut, the handler's write fails"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "flood")))
          (check-pred exn:fail:fastcgi:aborted? (next-event 5))
          (check-true (peer-eof? p 5))))
      (check-good-request path))))


(define-values (check-logged check-not-logged) (make-log-checks))

(with-server
  #:limits (make-limits #:connection-buffer 200000)
  (λ (path)
    ;; pad : string natural -> bytes ; one PARAMS record's content: a pair of n bytes in all
    (define (pad name n)
      (pairs->bytes (list (cons name (make-bytes (- n (bytes-length name) 4 1) 120)))))

    (test-case "params past connection-buffer: OVERLOADED for the request that goes past, the others go on"
      (with-peer path
        (λ (p)
          (define runs (unbox handler-runs))
          (peer-send! p (begin-bytes 1) (begin-bytes 2)
                      (record->bytes 'params 1 (pad #"A" 60000))
                      (record->bytes 'params 2 (pad #"B" 60000))
                      (record->bytes 'params 1 (pad #"C" 60000)))
          ;; 180,000 bytes held, each request under max-params-bytes (128 KiB): 60,000 more
          ;; for request 2 would be 240,000
          (peer-send! p (record->bytes 'params 2 (pad #"D" 60000)))
          (define a2 (peer-answer p 2))
          (check-equal? (answer-protocol-status a2) 'overloaded)
          (check-equal? (answer-stdout a2) #"")
          (check-logged #rx"request 2 .*over 200000 bytes of input held on a multiplexed connection: OVERLOADED")
          ;; request 2's later records are skipped; request 1 completes and is answered
          (peer-send! p (stream->bytes 'params 2 #"") (stream->bytes 'stdin 2 #"")
                      (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #""))
          (define a1 (peer-answer p 1))
          (check-equal? (cgi-status (answer-stdout a1)) 200)
          (check-equal? (bytes-length (cgi-body (answer-stdout a1)))
                        (+ (bytes-length #"id=1 role=responder keep=#t\nA=\nC=\nbody=") (* 2 (- 60000 6))))
          (check-equal? (unbox handler-runs) (add1 runs) "no handler for request 2")
          (check-equal? (peer-extras p) '()))))

    (test-case "a body past connection-buffer on a multiplexed connection: that request ended, the others go on"
      (with-peer path
        (λ (p)
          ;; two handlers that read nothing of their bodies until their gates open
          (peer-send! p (request-bytes 1 #:params (params "MODE" "wait" "GATE" "cb1" "CONTENT_LENGTH" "300000")
                                       #:stdin #f)
                      (request-bytes 2 #:params (params "MODE" "wait" "GATE" "cb2")))
          (check-equal? (sort (list (next-event) (next-event)) < #:key cadr) '((started 1) (started 2)))
          ;; 3 records of 60,000 bytes queue for request 1 (180,000 held); the fourth would
          ;; make 240,000
          (for ([_ 4]) (peer-send! p (record->bytes 'stdin 1 (make-bytes 60000 66))))
          (define a1 (peer-answer p 1))
          (check-equal? (answer-app-status a1) 1)
          (check-equal? (answer-stdout a1) #"")
          (check-logged #rx"request 1 .*over 200000 bytes of input held on a multiplexed connection: ended")
          (semaphore-post (gate "cb1"))
          (semaphore-post (gate "cb2"))
          (check-has #rx#"waited 2" (answer-stdout (peer-answer p 2)))
          (check-equal? (peer-extras p) '())))
      (check-good-request path))))
