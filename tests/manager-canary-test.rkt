#lang racket/base
;; manager-canary.rkt: a canary reload's trial and verdict, in this process
;; (tests/lib/manager-fixture.rkt; the workers are `sleep` processes). The answers each
;; worker reports (its metrics' status classes) are set by hand: the canary's 5xx share
;; over the old generation's by more than --canary-max-errors points rolls back, within
;; it rolls forward; the verdict waits for the trial's seconds and answers, or 3 x its
;; seconds; a canary whose heartbeat stopped rolls back at once. Seen through nginx with
;; real workers: integration/canary-nginx-test.rkt.
(require racket/list
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/manager/manager-canary.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         (only-in "../fastcgi/private/status/metrics.rkt" make-metrics metrics->counts counts->metrics)
         "lib/manager-fixture.rkt")

;; answered! : worker natural natural -> void ; it has reported total answers, k of them 5xx
(define (answered! w total k)
  (define zeros (metrics->counts (make-metrics)))
  (define classes (list 0 (- total k) 0 0 k))       ; 1xx 2xx 3xx 4xx 5xx
  (set-worker-metrics! w (counts->metrics (append (drop-right zeros 5) classes))))

;; on-trial : manager -> (values worker worker) ; an old worker (generation 1) and the
;; canary (generation 2, ready, its trial started at 0 answers) of a reload of 2 workers
(define (on-trial m #:seconds [secs 2])
  (define old (add-worker! m #:state 'ready))
  (answered! old 0 0)
  (define can (add-worker! m #:generation 2 #:state 'ready))
  (answered! can 0 0)
  (set-manager-reload-gen! m 2)
  (set-manager-canary! m (make-canary #:generation 2 #:seconds secs #:total 1))
  (check-true (canary-ready! m can) "the canary's ready line starts its trial")
  (values old can))

(define (config dir) (make-serve-config #:workers 1 #:app "/srv/app.rkt" #:canary 2 #:canary-requests 20))
(define (now) (current-inexact-monotonic-milliseconds))

(test-case "over the old generation's 5xx share by more than 1 point: rolled back, with the figures"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define-values (old can) (on-trial m))
     (answered! old 400 0)
     (answered! can 60 31)
     (define-values (_ lines) (capture-log (λ () (canary-tick! m (+ (now) 2500.)))))
     (check-false (manager-canary m))
     (check-false (manager-reload-gen m) "the reload is settled")
     (check-equal? (manager-last-reload-error m) "canary rolled back: 31 of 60 answers 5xx against 0 of 400")
     (check-equal? (hash-ref (manager-totals m) 'canary_rollbacks 0) 1)
     (check-eq? (worker-state can) 'draining "the canary is stopped")
     (check-eq? (worker-state old) 'ready "the old generation serves on")
     (check-not-false (member "fastcgi: canary rolled back: 31 of 60 answers 5xx against 0 of 400; generation 1 goes on serving" lines)))))

(test-case "within 1 point: rolled forward, and with one worker wanted the reload is done"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define-values (old can) (on-trial m))
     (answered! old 1000 10)                             ; 1.0 %
     (answered! can 100 2)                               ; 2.0 %: 1 point over, not more
     (canary-tick! m (+ (now) 2500.))
     (check-false (manager-canary m))
     (check-equal? (hash-ref (manager-totals m) 'canary_forwards 0) 1)
     (check-equal? (manager-gen m) 2 "generation 2 serves")
     (check-false (manager-last-reload-error m))
     (check-eq? (worker-state old) 'draining "the old generation is replaced"))))

(test-case "the verdict waits for the trial's seconds and answers, or 3 x its seconds"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define-values (old can) (on-trial m))
     (answered! can 5 0)
     (canary-tick! m (+ (now) 1000.))
     (check-not-false (manager-canary m) "1 s of 2: on trial")
     (canary-tick! m (+ (now) 2500.))
     (check-not-false (manager-canary m) "2 s, but 5 answers of 20: on trial")
     (answered! can 20 0)
     (canary-tick! m (+ (now) 2500.))
     (check-false (manager-canary m) "2 s and 20 answers: judged"))))

(test-case "few answers: judged at 3 x the trial's seconds all the same"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define-values (old can) (on-trial m))
     (answered! can 3 3)
     (canary-tick! m (+ (now) 6500.))
     (check-false (manager-canary m))
     (check-regexp-match #rx"^canary rolled back: 3 of 3 answers 5xx" (manager-last-reload-error m)))))

(test-case "a canary whose heartbeat stopped: rolled back at once"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define-values (old can) (on-trial m))
     (set-worker-late! can #t)
     (canary-tick! m (+ (now) 100.))
     (check-false (manager-canary m))
     (check-regexp-match #rx"^canary rolled back: it stopped answering" (manager-last-reload-error m)))))
