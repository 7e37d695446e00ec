#lang racket/base
;; Prompt request-memory limits. A custodian's memory limit (contain.rkt) is checked at a
;; major collection only, and Racket starts one when the heap has about doubled since the
;; last: a handler that allocates fast (hundreds of MiB a second) and holds it can take its
;; worker to twice its limit and more before the check. The guard watches the heap (a read
;; costs nanoseconds) and, when it has grown by step bytes since the last major
;; collection, starts one: a handler past its limit is then ended within about one step
;; of it (plus what it allocates during the collection and between two looks). It looks
;; every min-period-ms while the heap grows, and less often, down to every max-period-ms,
;; while it does not: an idle worker is not woken a hundred times a second.
(provide start-memory-guard!)

(define min-period-ms 10)
(define max-period-ms 160)
(define quiet-growth (* 1024 1024))   ; less growth than this between two looks: quiet

;; guard-step : natural -> natural ; the growth that starts a collection, for a limit
(define (guard-step limit)
  (max (* 16 1024 1024) (quotient limit 8)))

;; start-memory-guard! : natural -> thread ; for handlers limited to limit bytes each
(define (start-memory-guard! limit)
  (define step (guard-step limit))
  (thread
   (λ ()
     (let loop ([trigger (+ (current-memory-use) step)] [last (current-memory-use)] [period min-period-ms])
       (sleep (/ period 1000.))
       (define now (current-memory-use))
       (define next (if (< (- now last) quiet-growth) (min max-period-ms (* 2 period)) min-period-ms))
       (cond
         [(> now trigger)
          (collect-garbage 'major)
          (define after (current-memory-use))
          (loop (+ after step) after min-period-ms)]
         [else (loop trigger now next)])))))
