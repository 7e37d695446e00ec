#lang racket/base
;; What a request costs, for load shedding (--max-queue-delay: dispatch.rkt's shed?): the
;; CPU time of each finished request's handler thread, smoothed over the recent requests,
;; and the stretch, how much slower than that CPU cost work goes in a process that does
;; not get a whole core.
(require ffi/unsafe/atomic
         "../util/limits.rkt"
         "../util/table.rkt"
         (only-in "request.rkt" fastcgi-request-handler fastcgi-request-start-ms)
         "wire.rkt")
(provide queue-delay-estimator
         handler-cpu-done!)

;; handler-cpu-done! : server thread -> void
;; Counts the CPU time of a request's handler thread t (its own: start-handler!; its
;; contained one under --request-memory) as the handler ends, before it stops being
;; counted as running. A handler's own thread, not the process: the process's CPU also
;; goes to reading and starting the requests that have not ended yet (a burst, the kept
;; connections a retiring sibling hands over), to starting up (a forked worker's first
;; collections write its whole inherited heap), and to whatever else the process runs;
;; charged to the few requests that end in a moment, it makes a request look hundreds of
;; times dearer than it is, and a fresh worker handed a burst would shed it.
(define (handler-cpu-done! srv t)
  (stat-add-n! srv 'handler-cpu (current-process-milliseconds t)))

;; stat-add-n! : server symbol natural -> void ; as handlers.rkt's stat-add!, by n
(define (stat-add-n! srv key n)
  (define stats (server-stats srv))
  (start-atomic)
  (hash-set! stats key (+ n (hash-ref stats key 0)))
  (end-atomic))

;; queue-delay-estimator : server -> (-> void)
;; Racket shares the CPU among runnable threads in short slices, so a request admitted
;; behind N compute-bound handlers finishes about N handlers' work later. At each run
;; (the server's timer, every estimate-period-ms) this estimates what one request costs:
;; the CPU time of the handlers that ended, over their number, both summed with the older
;; ones' weighing less (decay a run), so each request counts alike, not each run (one in
;; which a single request ended weighs as little as that request). Until trust-requests
;; have ended in all, the missing ones count as free: the first requests of a process are
;; its dearest (cold caches, the app's lazy loading, the first collections) and a few say
;; little; an estimate from them would shed for nothing. The CPU that the running
;; handlers have used so far, each on average, is a lower bound: the estimate is never
;; below it while none ends, nor while it counts missing requests as free (compute-bound
;; handlers that end one by one would be taken for cheap ones). dispatch.rkt
;; sheds a newcomer when handlers running x that cost x the stretch, the work ahead of
;; it, is over max-queue-delay. Handlers that wait on I/O cost little CPU, so they hardly
;; count.
;; The stretch is 1 until a running handler has been at it longer than max-queue-delay:
;; then the process is behind, and its work goes slower than its CPU cost by the share of
;; a core it gets (other processes take the rest; counted as at least a quarter). Only
;; then, so that a process that is not busy, and so uses little of a core, is not taken
;; for a slow one.
(define (queue-delay-estimator srv)
  (define cost (server-request-cost srv))
  (define stats (server-stats srv))
  (define (finished) (- (hash-ref stats 'requests 0) (unbox (server-running srv))))
  (define (spent) (hash-ref stats 'handler-cpu 0))
  (define cpu0 (current-process-milliseconds))
  (define t0 (current-inexact-monotonic-milliseconds))
  (define n0 (finished))
  (define h0 (spent))
  (define sum-ms 0.0)
  (define sum-n 0.0)
  (λ ()
    (define cpu (current-process-milliseconds))
    (define t (current-inexact-monotonic-milliseconds))
    (define n (finished))
    (define h (spent))
    (define running (unbox (server-running srv)))
    (define share (max 0.25 (min 1.0 (/ (- cpu cpu0) (max 1.0 (- t t0))))))
    (set-box! (server-stretch srv) (if (and (positive? running) (overdue? srv)) (/ 1.0 share) 1.0))
    (define (next!) (set! cpu0 cpu) (set! t0 t) (set! n0 n) (set! h0 h))
    (cond
      [(> n n0)
       (set! sum-ms (+ (* decay sum-ms) (- h h0)))
       (set! sum-n (+ (* decay sum-n) (- n n0)))
       (define missing (max 0 (- trust-requests n)))
       (define estimate (exact->inexact (/ sum-ms (+ sum-n missing))))
       (set-box! cost (if (positive? missing) (max estimate (running-cpu-mean srv)) estimate))
       (next!)]
      ;; nothing ended and nothing running: the time went to housekeeping, not requests
      [(zero? running) (next!)]
      [else
       (define bound (running-cpu-mean srv))
       (when (> bound (unbox cost)) (set-box! cost bound))])))

(define decay 0.7)
(define trust-requests 20)

;; running-handlers : server -> (listof thread)
;; The threads of the handlers running now (the tables change under the scan: then none).
(define (running-handlers srv)
  (with-handlers ([exn:fail? (λ (e) '())])
    (for*/list ([c (in-list (table-values (server-connections srv)))]
                [r (in-list (table-values (conn-requests c)))]
                #:when (let ([t (fastcgi-request-handler r)]) (and t (not (thread-dead? t)))))
      (fastcgi-request-handler r))))

;; running-cpu-mean : server -> flonum ; CPU ms the running handlers have used, on average
(define (running-cpu-mean srv)
  (define ts (running-handlers srv))
  (if (null? ts)
      0.0
      (exact->inexact (/ (for/sum ([t (in-list ts)]) (current-process-milliseconds t)) (length ts)))))

;; overdue? : server -> boolean ; has a running handler passed max-queue-delay?
(define (overdue? srv)
  (define limit-ms (* 1000.0 (limits-max-queue-delay (server-limits srv))))
  (define now (now-ms))
  (with-handlers ([exn:fail? (λ (e) #f)])   ; the tables change under the scan
    (for*/or ([c (in-list (table-values (server-connections srv)))]
              [r (in-list (table-values (conn-requests c)))])
      (and (fastcgi-request-handler r) (> (- now (fastcgi-request-start-ms r)) limit-ms)))))
