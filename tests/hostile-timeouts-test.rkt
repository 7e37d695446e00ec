#lang racket/base
;; HOSTILE.md 19 and 20: slow peers (one that trickles before its first record, one that
;; stops mid-body, one that stops reading) against the deadlines of an in-process engine;
;; each test then checks that all is released and a good request is still answered. The
;; shared handler and checks are in tests/lib/hostile.rkt. Then 19 against a pool whose
;; workers recycle: silent connections handed over from worker to worker are still closed
;; at their first-byte deadline.
(require racket/file
         racket/list
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt"
         "lib/serve.rkt")

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

;; A slowloris against recycling: connections that never send a byte, opened just before
;; a burst of requests that each recycle their worker (--max-requests 1), are handed over
;; from retiring workers to the ones that go on, maybe more than once; each handover keeps
;; what their first-byte deadline had left, so all are closed by it (plus 2 s: the sweep,
;; a loaded machine), not at a keepalive deadline counted from their last handover.
(test-case "19: silent connections handed over at recycles are closed at their first-byte deadline"
  (define first-byte 5)
  (call-with-served-app
   good-source
   (list "--workers" "2" "--max-requests" "1" "--first-byte-timeout" (number->string first-byte)
         "--keepalive-timeout" "60")
   #:name "fcgi-hostile-recycle" #:ready 2
   (λ (s)
     (define path (substring (served-address s) (string-length "unix:")))
     (define log-file (proc-stderr-file (served-proc s)))
     (define log-start (file-size log-file))
     (define silent (for/list ([_ (in-range 8)]) (peer-connect path)))
     (define t0 (current-inexact-milliseconds))
     ;; the burst: a request every 0.2 s, each on a connection of its own
     (define burst
       (thread (λ ()
                 (for ([i (in-range 20)])
                   (with-peer path (λ (p) (peer-send! p (request-bytes 1)) (peer-answer p 1 10)))
                   (sleep 0.2)))))
     (define closed-at
       (for/list ([p (in-list silent)])
         (define left (- (+ first-byte 2.0) (/ (- (current-inexact-milliseconds) t0) 1000.0)))
         (and (peer-eof? p (max 0.01 left)) (/ (- (current-inexact-milliseconds) t0) 1000.0))))
     (thread-wait burst)
     (for-each peer-close! silent)
     (define handed
       (for/sum ([m (in-list (regexp-match* #rx#"handed ([0-9]+) kept connection"
                                            (subbytes (file->bytes log-file) log-start)
                                            #:match-select cadr))])
         (string->number (bytes->string/utf-8 m))))
     (printf "19: silent connections closed at ~a s (first byte ~a s); ~a handovers\n"
             (map (λ (t) (and t (/ (round (* 10 t)) 10.0))) closed-at) first-byte handed)
     (check-true (positive? handed) "the recycles handed silent connections over")
     (check-equal? (count not closed-at) 0
                   (format "every silent connection closed by ~a s (closed at: ~a; handed over: ~a)"
                           (+ first-byte 2) closed-at handed))
     (check-true (andmap (λ (t) (or (not t) (>= t (- first-byte 0.1)))) closed-at)
                 (format "none closed before its ~a s: ~a" first-byte closed-at)))))
