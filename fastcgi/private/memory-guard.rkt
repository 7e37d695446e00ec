#lang racket/base
;; Prompt request-memory limits. A custodian's memory limit (contain.rkt) is checked at a
;; major collection only, and Racket starts one when the heap has about doubled since the
;; last: a handler that allocates fast (hundreds of MiB a second) and holds it can take its
;; worker to twice its limit and more before the check. The guard watches the heap (a read
;; costs nanoseconds) every period-ms and, when it has grown by step bytes since the last
;; major collection, starts one: a handler past its limit is then ended within about one
;; step of it (plus what it allocates during the collection), whatever its rate.
(provide start-memory-guard!
         guard-step)

(define period-ms 10)

;; guard-step : natural -> natural ; the growth that starts a collection, for a limit
(define (guard-step limit)
  (max (* 16 1024 1024) (quotient limit 8)))

;; start-memory-guard! : natural -> thread ; for handlers limited to limit bytes each
(define (start-memory-guard! limit)
  (define step (guard-step limit))
  (thread
   (λ ()
     (let loop ([trigger (+ (current-memory-use) step)])
       (sleep (/ period-ms 1000.))
       (cond
         [(> (current-memory-use) trigger)
          (collect-garbage 'major)
          (loop (+ (current-memory-use) step))]
         [else (loop trigger)])))))
