#lang racket/base
;; manager-workers.rkt's forks, which the manager never waits for: a fork is asked of a
;; loader and the manager goes on; the answer, when it comes, adds the worker (with what
;; it reported before the answer: manager-reports.rkt's strangers); an ask past its
;; deadline kills the stuck forker; an answer that comes after that, and a process that
;; reports but is never answered for, are stopped: no process is left untracked. In this
;; process (tests/lib/manager-fixture.rkt); the loader and the forked processes are
;; `sleep` processes the test owns.
(require racket/port
         rackunit
         "../fastcgi/private/manager/manager-reports.rkt"
         "../fastcgi/private/manager/manager-forks.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         (only-in "../fastcgi/private/manager/lifecycle.rkt" loader-move!)
         (except-in "../fastcgi/private/manager/manager-workers.rkt" add-worker!)
         "../fastcgi/private/worker/lines.rkt"
         "lib/manager-fixture.rkt")

(define sleep-exe (find-executable-path "sleep"))

;; sleeper : -> subprocess ; a process of the test's, as a forked one would be the manager's
(define (sleeper)
  (define-values (sp out in err) (subprocess #f #f #f sleep-exe "60"))
  (close-input-port out) (close-output-port in) (close-input-port err)
  sp)

;; killed? : subprocess -> boolean ; ended by a signal within 5 s
(define (killed? sp) (and (sync/timeout 5 sp) (> (subprocess-status sp) 128)))

;; ready-loader! : manager -> (values loader output-port subprocess)
;; Generation 1's loader, ready to fork: its process a sleep, its control connection a
;; bytes port (what the manager asks it is read back from there).
(define (ready-loader! m)
  (define sp (sleeper))
  (define ld (make-loader #:generation 1 #:process sp #:now 0.))
  (loader-move! ld 'loaded)
  (define control (open-output-bytes))
  (set-loader-control! ld control)
  (hash-set! (manager-loaders m) 1 ld)
  (values ld control sp))

(define (lline s) (parse-line 'loader s))
(define (now*) (current-inexact-monotonic-milliseconds))
(define (wline s) (parse-line 'worker s))

(test-case "a fork is asked and the manager goes on; the answer adds the worker, with what it said before"
  (call-with-manager
   #:preload? #t
   (λ (m dir)
     (define-values (ld control loader-sp) (ready-loader! m))
     (check-false (spawn! m 1) "no worker yet: the fork is asked")
     (define id (manager-next-id m))
     (check-equal? (get-output-string control) (format "fork ~a\n" id))
     (check-equal? (pending-forks m 1) 1 "counted as on its way")
     ;; the forked worker reports before its loader's answer is read
     (define child (sleeper))
     (define pid (subprocess-pid child))
     (define port (open-output-nowhere))
     (message! m (list pid port))
     (message! m (list pid (wline "ready")))
     (check-false (hash-ref (manager-workers m) pid #f) "not a worker before the answer")
     (message! m (list (loader-pid ld) (lline (format "forked ~a ~a" id pid))))
     (define w (hash-ref (manager-workers m) pid #f))
     (check-true (worker? w) "tracked from the answer")
     (check-true (worker-forked? w))
     (check-eq? (worker-control w) port "its early hello's port")
     (check-eq? (worker-state w) 'ready "its early ready")
     (check-equal? (pending-forks m 1) 0)
     (check-equal? (hash-count (manager-strangers m)) 0)
     (subprocess-kill child #t)
     (subprocess-kill loader-sp #t)
     (void))))

(test-case "an ask past its deadline: the forker is killed; its late answer's process is killed too"
  (call-with-manager
   #:preload? #t
   (λ (m dir)
     (define-values (ld control loader-sp) (ready-loader! m))
     (spawn! m 1)
     (define id (manager-next-id m))
     (set-manager-gen! m 2)                  ; generation 1 no longer wanted: nothing replaces it
     (define-values (_ lines) (capture-log (λ () (fork-deadlines! m (+ (now*) 6000.)))))
     (check-true (killed? loader-sp) "the stuck loader is killed")
     (check-eq? (loader-state ld) 'gone)
     (check-not-false (findf (λ (l) (regexp-match? #rx"did not answer within 5 s" l)) lines))
     (check-equal? (pending-forks m 1) 0)
     ;; the fork had happened after all: its answer comes late
     (define child (sleeper))
     (message! m (list (loader-pid ld) (lline (format "forked ~a ~a" id (subprocess-pid child)))))
     (check-true (killed? child) "a late answer's process is killed")
     (check-false (hash-ref (manager-workers m) (subprocess-pid child) #f) "and not taken as a worker")
     (check-equal? (hash-ref (manager-totals m) 'untracked_stopped 0) 1))))

(test-case "a process that reports but is never answered for is stopped, its connection closed"
  (call-with-manager
   (λ (m dir)
     (define child (sleeper))
     (define pid (subprocess-pid child))
     (define-values (in out) (make-pipe))
     (message! m (list pid out))
     (message! m (list pid (wline "ready")))
     (expire-strangers! m (+ (now*) 1000.))
     (check-false (sync/timeout 0.3 child) "held a while: its fork's answer may be on its way")
     (define-values (_ lines) (capture-log (λ () (expire-strangers! m (+ (now*) 60000.)))))
     (check-true (killed? child) "then killed")
     (check-true (port-closed? out) "and its control connection closed")
     (check-equal? (hash-ref (manager-totals m) 'untracked_stopped 0) 1)
     (check-not-false (findf (λ (l) (regexp-match? #rx"never started or forked by the manager" l)) lines)))))

(test-case "the rest of a connection whose process is gone is not held"
  (call-with-manager
   (λ (m dir)
     (message! m (list 999999 (wline "beat")))
     (message! m (list 999999 eof))
     (check-equal? (hash-count (manager-strangers m)) 0))))

(test-case "strangers are bounded: past 256 at once, a new one's connection is closed"
  (call-with-manager
   (λ (m dir)
     (for ([pid (in-range 1000000 1000300)])
       (message! m (list pid (open-output-nowhere))))
     (check-equal? (hash-count (manager-strangers m)) 256)
     (define-values (in out) (make-pipe))
     (message! m (list 2000000 out))
     (check-true (port-closed? out) "the one past the bound is closed")
     (check-false (hash-ref (manager-strangers m) 2000000 #f)))))
