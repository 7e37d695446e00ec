#lang racket/base
;; Canary reloads (`serve --canary SECONDS`, `ctl reload --canary SECONDS`): the new
;; generation first starts one worker beside the old generation, which goes on serving.
;; The canary takes its share of new connections (the kernel balances accepts among all
;; the workers) and of kept ones (handed over by retiring workers). Its trial starts once
;; it is ready and ends once it has lasted SECONDS and answered --canary-requests requests,
;; or at 3 x SECONDS whatever it answered. Then its answers are compared with those of the
;; old generation over the same window (the answers by status class each worker reports,
;; metrics.rkt): when the canary's share of 5xx answers is over the old generation's by
;; more than --canary-max-errors percentage points, or it died, or its heartbeat stopped
;; during the trial (late, as the watchdog sees it), the reload rolls back: the
;; canary retires (its live sessions drain as an old generation's do), the old generation
;; serves on, and the reload fails with one line ("canary rolled back: 31 of 60 answers
;; 5xx against 0 of 412"), which `ctl reload` prints with exit status 1, the status shows
;; (last_reload_error) and systemd gets (STATUS=). Otherwise it rolls forward: the rest of
;; the generation starts, and the reload ends as any does (manager-reload.rkt).
(require "../util/clock.rkt"
         "../util/log.rkt"
         "../worker/config.rkt"
         (only-in "../status/metrics.rkt" metrics-answers)
         "manager-reload.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" canary)
         "manager-workers.rkt")
(provide canary-ready!
         canary-tick!
         canary-exited!
         canary-board)

;; canary-ready! : manager worker -> boolean
;; The canary is ready: its trial starts (#t). #f for any other worker.
(define (canary-ready! m w)
  (define c (manager-canary m))
  (cond
    [(and c (not (canary-pid c)) (= (worker-gen w) (canary-gen c)))
     (set-canary-pid! c (worker-pid w))
     (set-canary-start-ms! c (now-ms))
     (set-canary-base! c (for/hasheqv ([x (in-list (live-workers m))])
                           (values (worker-pid x) (answers x))))
     (log-fastcgi-info "canary ~a of generation ~a ready: its trial starts" (worker-pid w) (canary-gen c))
     #t]
    [else #f]))

;; canary-tick! : manager flonum -> void ; the trial ends when it has lasted and answered enough
(define (canary-tick! m now)
  (define c (manager-canary m))
  (when (and c (canary-start-ms c))
    (define w (hash-ref (manager-workers m) (canary-pid c) #f))
    (define-values (ct c5 ot o5) (window m c))
    (define lasted (- now (canary-start-ms c)))
    (define secs-ms (* 1000 (canary-seconds c)))
    (cond
      ;; its heartbeat stopped (late: manager-watch.rkt): frozen, or held in a foreign call.
      ;; (--ping-path is answered by the server itself, never the app: that it answers says
      ;; no more than the heartbeat does.)
      [(and w (worker-late w))
       (roll-back! m c w (format "canary rolled back: it stopped answering (no heartbeat for 3 s), after ~a answers (~a 5xx)" ct c5))]
      [(and w (or (and (>= lasted secs-ms) (>= ct (manager-cfg m serve-config-canary-requests)))
                  (>= lasted (* 3 secs-ms))))
       (decide! m c w ct c5 ot o5)])))

;; canary-exited! : manager worker -> boolean
;; The canary died during its trial: the reload rolls back (#t). #f for any other worker
;; (one that dies before it is ready fails the reload as any new worker does).
(define (canary-exited! m w)
  (define c (manager-canary m))
  (cond
    [(and c (eqv? (canary-pid c) (worker-pid w)))
     (define now (answers w))
     (define then (hash-ref (or (canary-base c) (hasheqv)) (worker-pid w) '(0 . 0)))
     (roll-back! m c #f (format "canary rolled back: it died during its trial, after ~a answers (~a 5xx)"
                                (max 0 (- (car now) (car then))) (max 0 (- (cdr now) (cdr then)))))
     #t]
    [else #f]))

;; decide! : manager canary worker natural natural natural natural -> void
(define (decide! m c w ct c5 ot o5)
  (define share (λ (k n) (if (zero? n) 0 (/ k n))))
  (define over (* 100 (- (share c5 ct) (share o5 ot))))
  (define figures (format "~a of ~a answers 5xx against ~a of ~a" c5 ct o5 ot))
  (cond
    [(> over (manager-cfg m serve-config-canary-max-errors))
     (roll-back! m c w (string-append "canary rolled back: " figures))]
    [else
     (log-fastcgi-info "canary rolled forward: ~a; generation ~a starts its other ~a workers"
                       figures (canary-gen c) (sub1 (canary-total c)))
     (trial-over! m)
     (total-add! m 'canary_forwards 1)
     (for ([_ (in-range (sub1 (canary-total c)))]) (spawn! m (canary-gen c)))
     (when (= 1 (canary-total c)) (finish-reload! m))]))

;; roll-back! : manager canary (or/c worker #f) string -> void
(define (roll-back! m c w line)
  (log-fastcgi-error "~a; generation ~a goes on serving" line (manager-gen m))
  (trial-over! m)
  (total-add! m 'canary_rollbacks 1)
  (for ([x (in-list (serving m (canary-gen c)))])
    (retire! m x "canary rolled back"))
  (stop-loader! m (canary-gen c))
  (reload-settled! m line))

;; window : manager canary -> (values natural natural natural natural)
;; Answers and 5xx answers since the trial started: the canary's, and the old generation's
;; (its workers that were there when the trial started and still are).
(define (window m c)
  (define base (or (canary-base c) (hasheqv)))
  (for/fold ([ct 0] [c5 0] [ot 0] [o5 0]) ([w (in-list (live-workers m))])
    (define now (answers w))
    (define then (hash-ref base (worker-pid w) '(0 . 0)))
    (define n (max 0 (- (car now) (car then))))
    (define k (max 0 (- (cdr now) (cdr then))))
    (cond
      [(eqv? (worker-pid w) (canary-pid c)) (values (+ ct n) (+ c5 k) ot o5)]
      [(and (< (worker-gen w) (canary-gen c)) (hash-ref base (worker-pid w) #f))
       (values ct c5 (+ ot n) (+ o5 k))]
      [else (values ct c5 ot o5)])))

;; answers : worker -> (cons natural natural) ; all its answers and its 5xx, as last reported
(define (answers w)
  (define mx (worker-metrics w))
  (if mx (call-with-values (λ () (metrics-answers mx)) cons) '(0 . 0)))

;; canary-board : manager -> (or/c hash 'null) ; the trial under way, for the status
(define (canary-board m)
  (define c (manager-canary m))
  (cond
    [(not c) 'null]
    [else
     (define-values (ct c5 ot o5) (window m c))
     (hasheq 'generation (canary-gen c) 'pid (or (canary-pid c) 'null)
             'seconds (canary-seconds c)
             'running_for (if (canary-start-ms c) (/ (round (/ (- (now-ms) (canary-start-ms c)) 100)) 10.0) 0)
             'answers ct 'errors c5 'old_answers ot 'old_errors o5)]))
