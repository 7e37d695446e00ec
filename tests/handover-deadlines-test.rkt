#lang racket/base
;; A connection handed over by a retiring server (handover.rkt) keeps its deadline: the
;; server that adopts it closes it when the retiring one would have, whatever it waited
;; for (a first record, the next request, the rest of a record), never at a deadline of
;; its own counted from the handover. Two in-process servers on unix sockets: the retiring
;; one (first-byte 2 s, idle 3 s, read 2 s) hands over to one whose own timeouts are all
;; 30 s, so that any fresh deadline shows as a connection still open long after the
;; carried one. Each case runs with the event loop and with a thread per connection
;; (max-queue-delay on), whose reader waits differently. Timing claims: never closed
;; before the deadline, and closed by it plus 2 s (the sweep runs every 250 ms).
(require racket/os
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/engine/server.rkt"
         (only-in "../fastcgi/private/engine/wire.rkt" server-stats)
         "../fastcgi/private/os/handover.rkt"
         (only-in "../fastcgi/private/transport/transport.rkt" listener-for)
         "integration/lib.rkt"
         "lib/raw-peer.rkt")

(define margin 2.0)

;; a handler that answers "ok", or waits for go when the request says WAIT
(define go (make-semaphore 0))
(define (handler r)
  (when (fastcgi-param r "WAIT" #f) (semaphore-wait go))
  (write-bytes ok-head (fastcgi-request-stdout r))
  (write-bytes #"ok" (fastcgi-request-stdout r)))

;; call-with-pair : (or/c #f real) (path path (-> void) server -> any) -> any
;; A server to retire and one (two connection slots) to adopt its connections, with
;; max-queue-delay (#f: the event loop), each on its socket; proc gets both paths, a thunk
;; that retires the first (handing over to the second) and the second's shared state.
(define (call-with-pair queue-delay proc)
  (call-with-temp-dir
   "fcgi-handover-deadlines"
   (λ (dir)
     (define (start name secs)
       (start-server handler (listener-for (format "unix:~a" (build-path dir name)))
                     #:limits (make-limits #:first-byte-timeout (car secs) #:idle-timeout (cadr secs)
                                           #:read-timeout (caddr secs) #:max-connections 2
                                           #:max-queue-delay queue-delay)))
     (define a (start "a.sock" '(2 3 2)))
     (define b (start "b.sock" '(30 30 30)))
     (define address (handover-address (format "fcgi-test-~a" (getpid)) (+ 1000000 (random 1000000000))))
     (define receiver (start-handover-receiver! address (running-server-adopt b)))
     (define (retire!)
       (thread (λ () ((running-server-stop a) #:timeout 20 #:hand-to (list address)))))
     (dynamic-wind
      void
      (λ () (proc (path->string (build-path dir "a.sock")) (path->string (build-path dir "b.sock"))
                  retire! (running-server-server b)))
      (λ ()
        (kill-thread receiver)
        ((running-server-stop a) #:timeout 1)
        ((running-server-stop b) #:timeout 1))))))

;; wait-adopted : server natural -> void ; the adopting server has taken n connections
(define (wait-adopted srv n)
  (check-true (let loop ([k 0])
                (or (= n (hash-ref (server-stats srv) 'adopted 0))
                    (and (< k 100) (sleep 0.05) (loop (add1 k)))))
              (format "~a connection(s) handed over" n)))

;; check-closed-at : peer real real string -> void
;; The peer's connection ends deadline seconds after t0 (current-inexact-milliseconds):
;; not before it, and by it plus the margin.
(define (check-closed-at p t0 deadline what)
  (define closed? (peer-eof? p (+ (- deadline (/ (- (current-inexact-milliseconds) t0) 1000.0)) margin)))
  (define after (/ (- (current-inexact-milliseconds) t0) 1000.0))
  (check-true closed? (format "~a: closed by ~a s after (still open at ~a s)" what (+ deadline margin) after))
  (when closed?
    (check-true (>= after (- deadline 0.1)) (format "~a: closed at ~a s, before its ~a s" what after deadline))))

;; answer-one : peer natural -> real ; a request answered on p: the time it arrived
(define (answer-one p id)
  (peer-send! p (request-bytes id))
  (check-status (peer-answer p id) 200)
  (current-inexact-milliseconds))

(for ([queue-delay '(#f 30)]
      [mode '("event loop" "thread per connection")])
  (test-case (format "~a: never used: its first-byte deadline, counted from its accept" mode)
    (call-with-pair queue-delay
      (λ (a b retire! srv)
        (with-peer a
          (λ (p)
            (define t0 (current-inexact-milliseconds))
            (sleep 0.5)
            (retire!)
            (wait-adopted srv 1)
            (check-closed-at p t0 2 "silent"))))))

  (test-case (format "~a: never used, a header begun before and trickled after: first-byte still" mode)
    (call-with-pair queue-delay
      (λ (a b retire! srv)
        (with-peer a
          (λ (p)
            (define t0 (current-inexact-milliseconds))
            (define header (begin-bytes 1))
            (peer-send! p (subbytes header 0 3))
            (sleep 0.5)
            (retire!)
            (wait-adopted srv 1)
            ;; a byte every 0.3 s after: progress, but no whole record
            (define trickle
              (thread (λ () (for ([b (in-bytes (subbytes header 3))]) (sleep 0.3) (peer-send! p (bytes b))))))
            (check-closed-at p t0 2 "trickling")
            (kill-thread trickle))))))

  (test-case (format "~a: between requests: its idle deadline, counted from its answer" mode)
    (call-with-pair queue-delay
      (λ (a b retire! srv)
        (with-peer a
          (λ (p)
            (define t1 (answer-one p 1))
            (sleep 0.5)
            (retire!)
            (wait-adopted srv 1)
            (check-closed-at p t1 3 "kept")))
        ;; adopted, not accepted: the pool's count of accepted connections has it once
        (check-equal? (hash-ref (server-stats srv) 'connections 0) 0))))

  (test-case (format "~a: mid-record: its read deadline, counted from the last bytes" mode)
    (call-with-pair queue-delay
      (λ (a b retire! srv)
        (with-peer a
          (λ (p)
            (answer-one p 1)
            (peer-send! p (subbytes (begin-bytes 2) 0 5))
            (define t2 (current-inexact-milliseconds))
            (sleep 0.5)
            (retire!)
            (wait-adopted srv 1)
            (check-closed-at p t2 2 "half a header"))))))

  (test-case (format "~a: handed over only once its live request has ended, and still serves" mode)
    (call-with-pair queue-delay
      (λ (a b retire! srv)
        (with-peer a
          (λ (p)
            (peer-send! p (request-bytes 1 #:params (params "WAIT" "1")))
            (sleep 0.2)
            (retire!)
            (sleep 0.5)
            (check-equal? (hash-ref (server-stats srv) 'adopted 0) 0 "not while its request is live")
            (semaphore-post go)
            (check-status (peer-answer p 1) 200)
            (wait-adopted srv 1)
            ;; the adopting server answers on it, and its idle deadline then is its own
            (answer-one p 2)
            (check-true (peer-quiet? p 3.5) "its next idle deadline is the adopting server's")))))))

(test-case "it counts against the adopting server's max-connections"
  (call-with-pair #f
    (λ (a b retire! srv)
      (with-peer a
        (λ (p)
          (answer-one p 1)
          (with-peer b
            (λ (q)
              (answer-one q 1)
              (retire!)
              (wait-adopted srv 1)
              ;; two slots, both taken: a third connection is answered 503
              (with-peer b
                (λ (r)
                  (peer-send! r (request-bytes 1))
                  (check-equal? (cgi-status (answer-stdout (peer-answer r 1))) 503))))))))))
