#lang racket/base
;; manager-watch.rkt: the manager's tick. Workers past their drain deadline or their start
;; timeout are killed; a ready worker that falls silent is late, then killed (the
;; watchdog); resident memory past --max-memory recycles, past the hard ceiling cuts; the
;; crash count starts over; the most active workers are kept; the board is published. In
;; this process (tests/lib/manager-fixture.rkt); the workers are `sleep` processes, so the
;; signals and the memory read from /proc are real. The watchdog against a real frozen
;; worker: watchdog-test.
(require racket/list
         rackunit
         "../fastcgi/private/util/clock.rkt"
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/util/limits.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         "../fastcgi/private/manager/manager-watch.rkt"
         "../fastcgi/private/os/signals.rkt"
         "lib/manager-fixture.rkt")

(define (config dir . kvs)
  (hash->serve-config (apply hash-set* (hasheq 'app "/srv/app.rkt" 'workers 8
                                               'limits (make-limits #:request-timeout 1))
                             kvs)))

(define (log-of thunk) (let-values ([(_ lines) (capture-log thunk)]) lines))
(define (logged? rx lines) (and (findf (λ (l) (regexp-match? rx l)) lines) #t))
(define (running? w) (not (sync/timeout 0.2 (worker-sp w))))

(test-case "killed: a draining worker past its deadline, a starting one past --start-timeout"
  (call-with-manager
   #:config (λ (dir) (config dir 'start-timeout 5))
   (λ (m dir)
     (define now (now-ms))
     (define late-drain (add-worker! m #:state 'draining))
     (set-worker-drain-deadline! late-drain (- now 1.))
     (define in-time (add-worker! m #:state 'draining))
     (set-worker-drain-deadline! in-time (+ now 60000.))
     (define slow-start (add-worker! m #:now (- now 6000.)))
     (define starting (add-worker! m #:now now))
     (define lines (log-of (λ () (tick! m))))
     (check-equal? (worker-signalled late-drain) SIGKILL)
     (check-true (> (worker-drain-deadline late-drain) (+ now 4000.)) "not killed again at each tick")
     (check-equal? (worker-signalled slow-start) SIGKILL)
     (check-equal? (worker-failure slow-start) "not ready after 5 s (--start-timeout)")
     (check-true (running? in-time))
     (check-true (running? starting))
     (check-true (logged? (regexp (format "worker ~a did not stop in time: killing it" (worker-pid late-drain))) lines))
     (check-true (logged? (regexp (format "worker ~a not ready after 5 s: killing it" (worker-pid slow-start))) lines)))))

(test-case "the watchdog: silent past 3 s is late (once), past the request timeout and 10 s killed"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define now (now-ms))
     (define fresh (add-worker! m #:state 'ready #:now (- now 1000.)))
     (set-worker-late! fresh #t)
     (define late (add-worker! m #:state 'ready #:heard-ms (- now 4000.)))
     (define frozen (add-worker! m #:state 'ready #:heard-ms (- now 12000.)))
     (define done (add-worker! m #:state 'ready #:heard-ms (- now 60000.)))
     (set-worker-reports-done?! done #t)
     (define lines (log-of (λ () (tick! m) (tick! m))))
     (check-false (worker-late fresh) "heard lately: no longer late")
     (check-equal? (worker-late late) #t)
     (check-true (running? late))
     (check-equal? (length (filter (λ (l) (regexp-match? #rx"is late: nothing from it for 4 s" l)) lines)) 1)
     (check-equal? (worker-late frozen) 'killed)
     (check-eq? (worker-state frozen) 'draining)
     (check-equal? (worker-signalled frozen) SIGKILL)
     (check-equal? (hash-ref (manager-totals m) 'unresponsive_kills) 1 "killed once")
     (check-true (logged? (regexp (format "worker ~a sent nothing for 12 s \\(frozen, stopped, or blocked in a foreign call\\): killing it"
                                          (worker-pid frozen)))
                          lines))
     (check-false (worker-late done) "its reports ended: its exit is on its way")
     (check-true (running? done)))))

(test-case "memory: past --max-memory a ready worker is recycled, past the hard ceiling cut"
  (call-with-manager
   #:config (λ (dir) (config dir 'max-memory 4096 'max-memory-hard (expt 2 40)))
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (define s (add-worker! m))
     (tick! m)
     (check-true (> (worker-rss w) 4096) "read from /proc")
     (check-regexp-match #rx"^memory [0-9]+ MiB over --max-memory 0 MiB$" (worker-recycle w))
     (check-false (worker-recycle s) "a starting worker is not recycled")
     (check-true (running? w))))
  (call-with-manager
   #:config (λ (dir) (config dir 'max-memory 4096))
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (tick! m)
     (check-regexp-match #rx"^memory [0-9]+ MiB over the hard ceiling of 0 MiB \\(2 x --max-memory\\)$"
                         (worker-recycle w))
     (check-eq? (worker-state w) 'draining)
     (check-equal? (worker-signalled w) SIGTERM))))

(test-case "the crash count starts over once a worker started since lasted; the most active is kept; published"
  (call-with-manager
   #:config config
   (λ (m dir)
     (define now (now-ms))
     (set-manager-failures! m 2)
     (set-manager-last-failure-ms! m (- now crash-window-ms 5000.))
     (add-worker! m #:state 'ready #:active 1 #:now (- now crash-window-ms 1000.) #:heard-ms now)
     (add-worker! m #:state 'ready #:active 3 #:heard-ms now #:now now)
     (tick! m)
     (check-equal? (manager-failures m) 0)
     (check-equal? (manager-max-active m) 2)
     (check-equal? (hash-ref (manager-last-board m) 'total_workers) 2)))
  (call-with-manager
   #:config config
   (λ (m dir)
     (define now (now-ms))
     (set-manager-failures! m 2)
     (set-manager-last-failure-ms! m (- now 1000.))
     (add-worker! m #:state 'ready #:now (- now crash-window-ms 1000.) #:heard-ms now)
     (tick! m)
     (check-equal? (manager-failures m) 2 "started before the last crash"))))
