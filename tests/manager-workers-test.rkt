#lang racket/base
;; manager-workers.rkt: stopping single workers (drain!, cut!, retire! and whom a retiring
;; worker hands its connections to), recycle!, and maintain! doing what the process manager
;; decides, replacing the workers waiting to be recycled one at a time (starts-now). In this process (tests/lib/manager-fixture.rkt); the workers are `sleep`
;; processes, so the signals are real. spawn! starts a real worker: the tests that start
;; `raco fastcgi serve` (manager-test, watchdog-test ...) cover it.
(require racket/list
         racket/string
         rackunit
         "../fastcgi/private/util/clock.rkt"
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         (only-in "../fastcgi/private/manager/lifecycle.rkt" worker-move!)
         (except-in "../fastcgi/private/manager/manager-workers.rkt" add-worker!)
         "../fastcgi/private/os/signals.rkt"
         "lib/manager-fixture.rkt")

(define (running? w) (not (sync/timeout 0.2 (worker-sp w))))

(test-case "drain!: SIGTERM and a deadline of the graceful timeout and 2 s; once"
  (call-with-manager
   #:config (λ (dir) (make-serve-config #:workers 1 #:app "/srv/app.rkt" #:graceful-timeout 7))
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (define before (now-ms))
     (define-values (_ lines) (capture-log (λ () (drain! m w "a test") (drain! m w "again"))))
     (check-eq? (worker-state w) 'draining)
     (check-true (<= (+ before 9000) (worker-drain-deadline w) (+ (now-ms) 9000)))
     (check-equal? lines (list (format "fastcgi: stopping worker ~a (a test)" (worker-pid w))))
     (check-equal? (worker-signalled w) SIGTERM))))

(test-case "drain!: a retiring worker is told to stop serving its sessions too"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:state 'draining))
     (set-worker-retiring?! w #t)
     (drain! m w "stop")
     (check-false (worker-retiring? w))
     (check-equal? (worker-signalled w) SIGTERM))))

(test-case "cut!: at once, once: counted as recycled, a deadline within the hard grace, SIGTERM"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (define before (now-ms))
     (define-values (_ lines) (capture-log (λ () (cut! m w "too big") (cut! m w "too big"))))
     (check-equal? (worker-recycle w) "too big")
     (check-equal? (hash-ref (manager-totals m) 'recycled) 1)
     (check-eq? (worker-state w) 'draining)
     (check-true (<= (+ before 1000) (worker-drain-deadline w) (+ (now-ms) 1000)))
     (check-equal? (length (filter (λ (l) (regexp-match? #rx"at once \\(SIGKILL in 1 s\\): too big" l)) lines)) 1)
     (check-equal? (worker-signalled w) SIGTERM)
     ;; a draining worker keeps an earlier deadline, and is not counted as recycled
     (define d (add-worker! m #:state 'draining))
     (set-worker-drain-deadline! d 5.)
     (cut! m d "too big")
     (check-equal? (worker-drain-deadline d) 5.)
     (check-false (worker-recycle d))
     (check-equal? (hash-ref (manager-totals m) 'recycled) 1))))

(test-case "retire!: told over its control connection whom to hand over to; else drained; once"
  (call-with-manager
   #:config (λ (dir) (make-serve-config #:workers 4 #:app "/srv/app.rkt" #:session-drain 100
                                        #:graceful-timeout 10))
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (define control (open-output-string))
     (set-worker-control! w control)
     (define ready-old (add-worker! m #:state 'ready))
     (define starting (add-worker! m #:generation 2))
     (define ready-new (add-worker! m #:state 'ready #:generation 2))
     (define waiting (add-worker! m #:state 'ready #:generation 2))
     (set-worker-recycle! waiting "max requests")
     (define before (now-ms))
     (retire! m w "replaced")
     (check-equal? (get-output-string control) (format "retire ~a\n" (worker-id ready-new))
                   "the ready workers of the newest generation, not one waiting to be recycled")
     (check-eq? (worker-state w) 'draining)
     (check-true (worker-retiring? w))
     (check-true (<= (+ before 125000) (worker-drain-deadline w) (+ (now-ms) 125000)))
     (check-true (running? w) "no signal: it serves its sessions")
     (retire! m w "again")
     (check-equal? (get-output-string control) (format "retire ~a\n" (worker-id ready-new)))
     ;; no control connection: drained
     (retire! m ready-old "replaced")
     (check-false (worker-retiring? ready-old))
     (check-equal? (worker-signalled ready-old) SIGTERM)
     ;; only workers waiting to be recycled: they are named
     (worker-move! ready-new 'drain #:deadline +inf.0)
     (define w2 (add-worker! m #:state 'ready))
     (define control2 (open-output-string))
     (set-worker-control! w2 control2)
     (retire! m w2 "replaced")
     (check-equal? (get-output-string control2) (format "retire ~a\n" (worker-id waiting)))
     ;; a control connection that fails: drained
     (define closed (open-output-string))
     (close-output-port closed)
     (set-worker-control! starting closed)
     (retire! m starting "replaced")
     (check-equal? (worker-signalled starting) SIGTERM))))

(test-case "recycle!: marked and counted once, not when draining; the signal waits for its successor"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (define d (add-worker! m #:state 'draining))
     (define-values (_ lines) (capture-log (λ () (recycle! m w "max requests 50") (recycle! m w "again")
                                              (recycle! m d "max requests 50"))))
     (check-equal? (worker-recycle w) "max requests 50")
     (check-false (worker-recycle d))
     (check-equal? (hash-ref (manager-totals m) 'recycled) 1)
     (check-equal? lines (list (format "fastcgi: recycling worker ~a: max requests 50" (worker-pid w))))
     (check-true (running? w)))))

(test-case "starts-now: replacements of workers waiting to be recycled start one at a time"
  (call-with-manager
   #:config (λ (dir) (make-serve-config #:workers 2 #:app "/srv/app.rkt"))
   (λ (m dir)
     (define a (add-worker! m #:state 'ready))
     (define b (add-worker! m #:state 'ready))
     (check-equal? (starts-now m 1) 1 "none waiting: what the process manager asks")
     ;; both past --max-memory at one tick
     (set-worker-recycle! a "memory")
     (set-worker-recycle! b "memory")
     (check-equal? (starts-now m 2) 1 "two waiting: one replacement")
     (define s (add-worker! m #:state 'starting))
     (check-equal? (starts-now m 1) 0 "none more while it starts")
     ;; it is ready, and the one it replaces retires (reports.rkt's ready!)
     (worker-move! s 'ready)
     (worker-move! a 'retire #:deadline +inf.0)
     (check-equal? (starts-now m 1) 1 "then the next")
     (check-equal? (starts-now m 2) 2 "a worker gone otherwise is replaced beside it"))))

(test-case "maintain!: the process manager's stops are retired; a pool at its limit is counted; nothing once stopping"
  (call-with-manager
   #:config (λ (dir) (make-serve-config #:pm 'dynamic #:workers 1 #:min-spare 1 #:max-spare 1
                                        #:max-workers 2 #:app "/srv/app.rkt"))
   (λ (m dir)
     (define ws (for/list ([busy '(5. 1.)]) (add-worker! m #:state 'ready)))
     (set-worker-last-busy-ms! (first ws) 5.)
     (set-worker-last-busy-ms! (second ws) 1.)
     (set-manager-stopping?! m #t)
     (maintain! m)
     (check-equal? (map worker-state ws) '(ready ready))
     (set-manager-stopping?! m #f)
     (maintain! m)
     (check-equal? (map worker-state ws) '(ready draining) "the one idle the longest")
     (check-equal? (worker-signalled (second ws)) SIGTERM)
     (check-false (hash-ref (manager-totals m) 'max_workers_reached #f))
     ;; the other busy: it wants a spare, and there is room for one more worker
     (set-worker-active! (first ws) 1)
     (maintain! m)
     (check-equal? (hash-count (manager-workers m)) 2 "no spawn while the next spawn is put off")
     (check-false (hash-ref (manager-totals m) 'max_workers_reached #f))
     ;; two busy at the most workers: counted
     (add-worker! m #:state 'ready #:active 1)
     (maintain! m)
     (check-equal? (hash-ref (manager-totals m) 'max_workers_reached) 1))))
