#lang racket/base
;; HOSTILE.md 19 and 20: slow peers (one that trickles before its first record, one that
;; stops mid-body, one that stops reading) against the deadlines of an in-process engine;
;; each test then checks that all is released and a good request is still answered. The
;; shared handler and checks are in tests/lib/hostile.rkt.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

(call-with-engine
 #:limits (make-limits #:first-byte-timeout 1 #:read-timeout 1 #:write-timeout 1 #:idle-timeout 5)
 (λ (path srv)
   (test-case "19: a slow sender before the first record is closed, even when it trickles"
     (with-peer path
       (λ (p)
         (define t0 (current-inexact-milliseconds))
         ;; one byte of a header every 0.4 s: each byte is progress, none a whole record
         (define trickle
           (thread (λ () (for ([b (in-bytes (begin-bytes 1))]) (peer-send! p (bytes b)) (sleep 0.4)))))
         (check-true (peer-eof? p 5))
         (kill-thread trickle)
         (check-true (< (- (current-inexact-milliseconds) t0) 2000) "closed by the first-byte deadline")))
     (check-good-request path))

   (test-case "19: a sender that stops in the middle of a body: closed, the handler freed"
     (with-peer path
       (λ (p)
         (peer-send! p (begin-bytes 1)
                     (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                     (record->bytes 'stdin 1 #"part"))
         (check-equal? (next-event) 'started)
         (check-true (peer-eof? p 5))
         (check-pred exn:fail:fastcgi:aborted? (next-event))))
     (check-released srv)
     (check-good-request path))

   (test-case "20: a peer that stops reading: the write deadline aborts, output stays bounded"
     (define before (memory-use))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "flood")))
         (check-pred exn:fail:fastcgi:aborted? (next-event 10))
         (define written (next-event))
         (printf "20: the handler wrote ~a bytes before its write failed\n" written)
         (check-true (< written (* 32 1024 1024)) "the handler was held back by the socket")
         (check-true (< (- (memory-use) before) (* 64 1024 1024)))
         (check-true (peer-eof? p 5))))
     (check-released srv)
     (check-good-request path))))
