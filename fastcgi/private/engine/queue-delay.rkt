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
  (stat-add! srv 'handler-cpu (current-process-milliseconds t)))

;; queue-delay-estimator : server -> (-> void)
;; Racket shares the CPU among runnable threads in short slices, so a request admitted
;; behind N compute-bound handlers finishes about N requests' work later. At each run
;; (the server's timer, every estimate-period-ms) this estimates what one request costs,
;; in two parts, each a ratio of sums in which older runs weigh less (decay a run), so
;; that each request counts alike, not each run (one in which a single request ended
;; weighs as little as that request):
;; - its handler: the CPU time of the handlers that ended, over their number. Until
;;   trust-requests have ended in all, the missing ones count as free: the first requests
;;   of a process are its dearest (cold caches, the app's lazy loading, the first
;;   collections) and a few say little; an estimate from them would shed for nothing.
;;   The CPU that the running handlers have used so far, each on average, is a lower
;;   bound: this part is never below it while none ends, nor while it counts missing
;;   requests as free (compute-bound handlers that end one by one would be taken for
;;   cheap ones).
;; - the rest of the process's CPU (reading, writing, what a handler's own threads do),
;;   over the requests admitted meanwhile: most of it is spent as a request arrives, so a
;;   burst's is spread over the burst, not charged to the few of it that end first. It is
;;   the whole process's: other threads that compute in it (an embedding program's, a
;;   client of the server in the same process) count as requests' cost.
;;   In a run in which no request arrives, the process's CPU is housekeeping (the timer,
;;   the reports to the manager) and is left out, even while handlers run on: a handler
;;   that waits (a hang the request timeout ends, a long poll) would otherwise have that
;;   housekeeping charged to ever fewer requests as the sums decay, until a request cost
;;   seconds and the next one was shed.
;; dispatch.rkt sheds a newcomer when handlers running x that cost x the stretch, the
;; work ahead of it, is over max-queue-delay. Handlers that wait on I/O cost little CPU,
;; so they hardly count.
;; The stretch is 1 until a running handler has been at it longer than max-queue-delay:
;; then the process is behind, and its work goes slower than its CPU cost by the share of
;; a core it gets (other processes take the rest; counted as at least a quarter). Only
;; then, so that a process that is not busy, and so uses little of a core, is not taken
;; for a slow one.
(define (queue-delay-estimator srv)
  (define stats (server-stats srv))
  (define ended (sums 0.0 0.0))
  (define others (sums 0.0 0.0))
  (define handler-cost 0.0)
  ;; the process's CPU and the clock since the last run at which a request ended or none
  ;; ran (the share); at the last run: the process's CPU, requests admitted and ended,
  ;; the CPU of the handlers that ended, and of every handler (ended and running)
  (define cpu0 (current-process-milliseconds))
  (define t0 (current-inexact-monotonic-milliseconds))
  (define-values (last-cpu last-a last-n last-h last-hs)
    (let ([a (hash-ref stats 'requests 0)] [h (hash-ref stats 'handler-cpu 0)])
      (values cpu0 a (- a (unbox (server-running srv))) h h)))
  (λ ()
    (define cpu (current-process-milliseconds))
    (define t (current-inexact-monotonic-milliseconds))
    (define running (unbox (server-running srv)))
    (define a (hash-ref stats 'requests 0))
    (define n (- a running))
    (define h (hash-ref stats 'handler-cpu 0))
    (define-values (live live-ms) (if (positive? running) (running-cpu srv) (values 0 0)))
    (define live-mean (if (zero? live) 0.0 (exact->inexact (/ live-ms live))))
    (define share (max 0.25 (min 1.0 (/ (- cpu cpu0) (max 1.0 (- t t0))))))
    (set-box! (server-stretch srv) (if (and (positive? running) (overdue? srv)) (/ 1.0 share) 1.0))
    (when (> a last-a)
      (sums-add! others (- (- cpu last-cpu) (- (+ h live-ms) last-hs)) (- a last-a)))
    (cond
      [(> n last-n)
       (sums-add! ended (- h last-h) (- n last-n))
       (define missing (max 0 (- trust-requests n)))
       (define estimate (sums-mean ended missing))
       (set! handler-cost (if (positive? missing) (max estimate live-mean) estimate))
       (set! cpu0 cpu) (set! t0 t)]
      [(zero? running) (set! cpu0 cpu) (set! t0 t)]
      [else (set! handler-cost (max handler-cost live-mean))])
    (set-box! (server-request-cost srv)
              (+ handler-cost (sums-mean others (max 0 (- trust-requests a)))))
    (set!-values (last-cpu last-a last-n last-h last-hs) (values cpu a n h (+ h live-ms)))))

(define decay 0.7)
(define trust-requests 20)

;; Decayed sums of CPU ms and of requests.
(struct sums ([ms #:mutable] [n #:mutable]))

;; sums-add! : sums real real -> void ; a run's ms and requests, the older ones decayed
(define (sums-add! s ms n)
  (set-sums-ms! s (+ (* decay (sums-ms s)) ms))
  (set-sums-n! s (+ (* decay (sums-n s)) n)))

;; sums-mean : sums natural -> flonum ; ms a request, missing more requests counted as free
(define (sums-mean s missing)
  (define d (+ (sums-n s) missing))
  (if (positive? d) (max 0.0 (exact->inexact (/ (sums-ms s) d))) 0.0))

;; running-cpu : server -> (values natural natural)
;; The handlers running now, and the CPU ms they have used so far (the tables change
;; under the scan: then none).
(define (running-cpu srv)
  (with-handlers ([exn:fail? (λ (e) (values 0 0))])
    (for*/fold ([k 0] [ms 0])
               ([c (in-list (table-values (server-connections srv)))]
                [r (in-list (table-values (conn-requests c)))]
                #:when (let ([t (fastcgi-request-handler r)]) (and t (not (thread-dead? t)))))
      (values (add1 k) (+ ms (current-process-milliseconds (fastcgi-request-handler r)))))))

;; overdue? : server -> boolean ; has a running handler passed max-queue-delay?
(define (overdue? srv)
  (define limit-ms (* 1000.0 (limits-max-queue-delay (server-limits srv))))
  (define now (now-ms))
  (with-handlers ([exn:fail? (λ (e) #f)])   ; the tables change under the scan
    (for*/or ([c (in-list (table-values (server-connections srv)))]
              [r (in-list (table-values (conn-requests c)))])
      (and (fastcgi-request-handler r) (> (- now (fastcgi-request-start-ms r)) limit-ms)))))
