#lang racket/base
;; queue-delay.rkt: what a request costs, for --max-queue-delay: the CPU of the handlers
;; that ended, per request ended, and the rest of the process's CPU, per request admitted.
;; CPU the process spends while a burst is read and started (the test's own work here) is
;; spread over the burst, not charged to the few requests that end meanwhile; a moment in
;; which one request ended weighs as that one request; the first requests of a server
;; count little. A compute-bound load is still measured as such, and so is the CPU a
;; request costs outside its handler.
(require rackunit
         "../fastcgi/main.rkt"
         (only-in "../fastcgi/private/engine/dispatch.rkt" queue-delay-ms)
         "../fastcgi/private/engine/queue-delay.rkt"
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         "../fastcgi/private/engine/wire.rkt")

(define lim (make-limits #:max-queue-delay 1))
(define (fresh-server) (make-server void #:limits lim))

;; spin! : natural -> void ; ms of this thread's CPU, not a handler's
(define (spin! ms)
  (define t0 (current-process-milliseconds (current-thread)))
  (let loop () (when (< (- (current-process-milliseconds (current-thread)) t0) ms) (loop))))

;; requests! : server natural natural natural -> void
;; As if admitted requests had been admitted in all, running were running now, and the
;; handlers that ended had used handler-ms of CPU in all.
(define (requests! srv admitted running handler-ms)
  (hash-set! (server-stats srv) 'requests admitted)
  (set-box! (server-running srv) running)
  (hash-set! (server-stats srv) 'handler-cpu handler-ms))

(define (over-limit? srv) (> (queue-delay-ms srv) 1000.0))   ; max-queue-delay 1 s

(test-case "a burst read while the process works elsewhere: the first request to end is not charged for it"
  ;; a worker just forked, handed 300 requests at once: 1 has ended, its handler cheap;
  ;; the process's CPU went to reading and starting the others (here: spin!)
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  (requests! srv 300 299 0)
  (spin! 100)
  (tick!)
  (check-false (over-limit? srv) (format "~a ms of work ahead" (queue-delay-ms srv))))

(test-case "a moment in which few requests ended weighs as those few"
  ;; a server that has served 200 requests of 0.5 ms; then a stall: 480 wait, 1 ends,
  ;; whose handler took 17 ms (a collection ran in its slice)
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  (for ([k (in-range 1 11)])
    (spin! 10)
    (requests! srv (* 20 k) 0 (* 10 k))
    (tick!))
  (check-= (unbox (server-request-cost srv)) 0.5 0.01)
  (spin! 17)
  (requests! srv 681 480 117)
  (tick!)
  (check-false (over-limit? srv) (format "~a ms of work ahead" (queue-delay-ms srv))))

(test-case "the first request to end, a dear one, does not make the server shed"
  ;; a fresh server's first request loads what the app loads lazily: 230 ms
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  (spin! 230)
  (requests! srv 45 44 230)
  (tick!)
  (check-false (over-limit? srv) (format "~a ms of work ahead" (queue-delay-ms srv))))

(test-case "compute-bound requests are measured as such: a queue of them sheds"
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  ;; 40 requests of 20 ms each have ended, 60 run
  (for ([k (in-range 1 5)])
    (spin! 200)
    (requests! srv (+ 60 (* 10 k)) 60 (* 200 k))
    (tick!))
  (check-= (unbox (server-request-cost srv)) 20.0 0.01)
  (check-true (over-limit? srv) (format "~a ms of work ahead" (queue-delay-ms srv))))

(test-case "the CPU spent outside the handlers counts too, per request admitted"
  ;; 10 requests a run, each 0.5 ms in its handler and 1 ms in reading and writing
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  (for ([k (in-range 1 11)])
    (spin! 15)
    (requests! srv (* 10 k) 0 (* 5 k))
    (tick!))
  (check-= (unbox (server-request-cost srv)) 1.5 0.3))

(test-case "a handler left running after the load stopped: the housekeeping is not charged to requests"
  ;; 200 requests of 1.5 ms, then the load stops while one handler waits (a hang the
  ;; request timeout ends 2 s later); the process goes on with its timers and reports,
  ;; 1 ms a run, and no request arrives: a request still costs what it did
  (define srv (fresh-server))
  (define tick! (queue-delay-estimator srv))
  (for ([k (in-range 1 21)])
    (spin! 15)
    (requests! srv (* 10 k) 1 (* 5 k))
    (tick!))
  (define before (unbox (server-request-cost srv)))
  (for ([_ (in-range 20)])
    (spin! 1)
    (tick!))
  (check-true (< (unbox (server-request-cost srv)) (* 2 before))
              (format "~a ms a request after 2 s of housekeeping, ~a before" (unbox (server-request-cost srv)) before))
  (check-false (over-limit? srv) (format "~a ms of work ahead" (queue-delay-ms srv))))

(test-case "handler-cpu-done! adds the CPU its handler thread used"
  (define srv (fresh-server))
  (define t (thread (λ () (spin! 30))))
  (thread-wait t)
  (handler-cpu-done! srv t)
  (handler-cpu-done! srv t)
  (check-true (>= (hash-ref (server-stats srv) 'handler-cpu 0) 60)))
