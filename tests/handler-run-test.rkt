#lang racket/base
;; fastcgi/private/engine/handler-run.rkt: a request's run and end on its connection, over pipes
;; (tests/lib/pipe-conn.rkt): run-handler! (the answer, the running slot, retire!, the
;; observer), a handler that raises or whose body was already refused, retire! and the
;; connection's graceful close, abort-all!, start-pending!, and the request timeout's
;; break and end from outside; and, end to end, a handler that raises on a kept connection.
(require rackunit
         "../fastcgi/main.rkt"
         (only-in "../fastcgi/private/engine/handler-run.rkt" run-handler! retire! abort-all!
                  pend! start-pending! start-handler! check-request-timeouts! observe!)
         (only-in "../fastcgi/private/engine/request-state.rkt" fastcgi-request-state
                  request-body-rejected! fastcgi-request-handler)
         (only-in "../fastcgi/private/util/limits.rkt" limits-idle-timeout)
         "../fastcgi/private/util/table.rkt"
         "../fastcgi/private/engine/wire.rkt"
         "integration/lib.rkt"
         "lib/connection-handler.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; admitted! : conn fastcgi-request -> fastcgi-request ; counted running, as dispatch.rkt does
(define (admitted! c r)
  (counter-add! (server-running (conn-server c)) 1)
  r)

;; log-lines : (-> any) -> (listof string) ; the fastcgi warnings and errors while thunk ran
(define (log-lines thunk)
  (define rx (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (thunk)
  (let loop ([acc '()])
    (define v (sync/timeout 0.1 rx))
    (if v (loop (cons (vector-ref v 1) acc)) (reverse acc))))

(test-case "run-handler!: the answer, END_REQUEST, the slot freed, the id retired, the observer told"
  (define seen '())
  (define-values (c p)
    (make-pipe-conn #:handler (λ (r) (write-bytes (bytes-append ok-head #"hi") (fastcgi-request-stdout r)))
                    #:observer (λ (r ms) (set! seen (cons (list (fastcgi-request-id r) ms) seen)))))
  (define r (admitted! c (make-live-request c 1)))
  (run-handler! c r)
  (define a (peer-answer p 1))
  (check-status a 200)
  (check-equal? (cgi-body (answer-stdout a)) #"hi")
  (check-equal? (answer-app-status a) 0)
  (check-equal? (unbox (server-running (conn-server c))) 0 "the running slot is free")
  (check-equal? (table-count (conn-requests c)) 0 "retired")
  (check-equal? (length seen) 1)
  (check-equal? (car (car seen)) 1)
  (check-true (and (real? (cadr (car seen))) (>= (cadr (car seen)) 0)) "its duration in ms")
  (check-false (conn-closing? c) "keep-conn: open"))

(test-case "run-handler!: a handler that raises: 500, one escaped log line with the URI, counted"
  (define-values (c p) (make-pipe-conn #:handler (λ (r) (error 'app "boom\nforged"))))
  (define r (admitted! c (make-live-request c 3 #:params (params "REQUEST_URI" "/x\ty"))))
  (define lines (log-lines (λ () (run-handler! c r))))
  (check-status (peer-answer p 3) 500)
  (check-equal? lines '("fastcgi: request 3 from pipe /x\\x09y: handler raised: app: boom\\x0aforged"))
  (check-equal? (hash-ref (server-stats (conn-server c)) 'handler-errors #f) 1))

(test-case "run-handler!: a body refused before the handler ran: 413, no handler, not a handler error"
  (define ran? #f)
  (define-values (c p) (make-pipe-conn #:handler (λ (r) (set! ran? #t))))
  (define r (admitted! c (make-live-request c 1)))
  (request-body-rejected! r 10)
  (check-equal? (log-lines (λ () (run-handler! c r))) '())
  (check-false ran?)
  (check-status (peer-answer p 1) 413)
  (check-false (hash-ref (server-stats (conn-server c)) 'handler-errors #f)))

(test-case "retire!: keep-conn off closes gracefully; on, the idle deadline starts, an earlier one stays"
  ;; read-timeout 0.005 s: a partial record's deadline, sooner than idle's
  (define-values (c p) (make-pipe-conn #:limits (make-limits #:read-timeout 0.005)))
  (define r (make-live-request c 1 #:keep? #t))
  (retire! c r)
  (check-equal? (table-count (conn-requests c)) 0)
  (check-false (conn-closing? c))
  (define idle (* 1000 (limits-idle-timeout default-limits)))
  (check-true (<= (- idle 1000) (- (conn-deadline c) (now-ms)) idle) "about idle-timeout from now")
  (conn-await! c #f)
  (check-false (conn-deadline c) "awaiting nothing: no deadline")
  (conn-await! c 'read)
  (define early (conn-deadline c))
  (check-true (< (- early (now-ms)) 10) "the read deadline, 5 ms away")
  (retire! c (make-live-request c 2))
  (check-equal? (conn-deadline c) early "an earlier deadline (a partial record's) is kept")
  (define r3 (make-live-request c 3 #:keep? #f))
  (retire! c r3)
  (check-true (conn-closing? c) "keep-conn off: closing")
  (check-true (peer-eof? p) "half-closed: the peer reads the end"))

(test-case "retire!: a request id taken again meanwhile stays in the table"
  (define-values (c p) (make-pipe-conn))
  (define old (make-live-request c 1))
  (define new (make-live-request c 1))
  (retire! c old)
  (check-eq? (table-ref (conn-requests c) 1 #f) new))

(test-case "conn-close!: once; closing, the drain deadline, the peer reads eof"
  (define-values (c p) (make-pipe-conn #:limits (make-limits #:drain-timeout 3)))
  (conn-close! c)
  (check-true (conn-closing? c))
  (define left (- (conn-deadline c) (now-ms)))
  (check-true (< 2000 left 3001) (format "~a ms to drain" left))
  (define first-close (conn-deadline c))
  (sleep 0.01)
  (conn-close! c)
  (check-equal? (conn-deadline c) first-close "a second close changes nothing")
  (check-true (peer-eof? p)))

(test-case "abort-all!: every live request learns the connection is gone"
  (define-values (c p) (make-pipe-conn))
  (define rs (for/list ([id '(1 2)]) (make-live-request c id #:state 'stdin)))
  (define ins (map fastcgi-request-stdin rs))
  (abort-all! c)
  (check-equal? (table-count (conn-requests c)) 0)
  (for ([r rs] [in ins])
    (check-not-false (sync/timeout 0 (fastcgi-request-abort-evt r)))
    (check-exn exn:fail:fastcgi:aborted? (λ () (read-byte in)))))

(test-case "start-pending!: the pending request gets a thread; one already ended gives its slot back"
  (define ran (make-semaphore 0))
  (define-values (c p) (make-pipe-conn #:handler (λ (r) (semaphore-post ran))))
  (define srv (conn-server c))
  (pend! c (admitted! c (make-live-request c 1)))
  (start-pending! c)
  (check-false (conn-pending c))
  (check-not-false (sync/timeout 5 ran))
  (check-status (peer-answer p 1) 200)
  (define r2 (admitted! c (make-live-request c 2 #:state 'done)))
  (pend! c r2)
  (start-pending! c)
  (check-equal? (unbox (server-running srv)) 0 "ended before it ran: the slot is back")
  (check-false (sync/timeout 0.05 ran) "and it never runs")
  (start-pending! c))

;; check-no-timeout : conn limits flonum -> void ; nothing happens at now
(define (check-no-timeout c lim now)
  (check-equal? (log-lines (λ () (check-request-timeouts! c lim now))) '()))

(test-case "check-request-timeouts!: past request-timeout a break and a 503; one that ignores it is ended"
  (define lim (make-limits #:request-timeout 1))
  (define entered (make-semaphore 0))      ; the handler runs (a break before it would be early)
  (define-values (c p)
    (make-pipe-conn #:limits lim
                    #:handler (λ (r)
                                (if (fastcgi-param r "STUBBORN")
                                    (parameterize-break #f (semaphore-post entered) (sync never-evt))
                                    (begin (semaphore-post entered) (sync never-evt))))))
  (define r1 (admitted! c (make-live-request c 1)))
  (start-handler! c r1)
  (check-not-false (sync/timeout 5 entered))
  (define now (now-ms))
  (check-no-timeout c lim now)
  (check-false (thread-dead? (fastcgi-request-handler r1)) "within its time: left alone")
  (define lines (log-lines (λ () (check-request-timeouts! c lim (+ now 1500)))))
  (check-equal? (length lines) 1)
  (check-regexp-match #rx"request 1 from pipe : handler over the request timeout of 1 s: stopped" (car lines))
  (check-status (peer-answer p 1) 503)
  (check-equal? (hash-ref (server-stats (conn-server c)) 'timeouts #f) 1)
  ;; a handler that does not take the break: ended from outside once its grace is over
  (define r2 (admitted! c (make-live-request c 2 #:params (params "STUBBORN" "1"))))
  (start-handler! c r2)
  (check-not-false (sync/timeout 5 entered))
  (check-request-timeouts! c lim (+ now 1500))
  (check-equal? (fastcgi-request-state r2) 'running "the break is ignored")
  (check-request-timeouts! c lim (+ now 1500 4000))
  (check-equal? (fastcgi-request-state r2) 'running "still within its grace")
  (check-request-timeouts! c lim (+ now 1500 5001))
  (check-status (peer-answer p 2) 503)
  (kill-thread (fastcgi-request-handler r2)))

(test-case "stat-add!: one counter per key, atomic across threads"
  (define-values (c p) (make-pipe-conn))
  (define srv (conn-server c))
  (for-each thread-wait (for/list ([i 4]) (thread (λ () (for ([j 500]) (stat-add! srv 'k))))))
  (check-equal? (hash-ref (server-stats srv) 'k) 2000))

(test-case "observe!: an observer that raises is logged, not passed on"
  (define-values (c p) (make-pipe-conn #:observer (λ (r ms) (error 'obs "no"))))
  (define r (make-live-request c 1))
  (check-equal? (log-lines (λ () (observe! c r))) '("fastcgi: request observer failed: obs: no")))

;; -- end to end, through an in-process server ---------------------------------------------
(with-server
  #:limits (make-limits #:max-connections 50 #:max-concurrent 40)
  (λ (path)
    (test-case "a handler that raises: 500 on STDOUT, END_REQUEST, connection usable"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "raise")))
          (check-status (peer-answer p 1) 500)
          (peer-send! p (request-bytes 2))
          (check-status (peer-answer p 2) 200))))))
