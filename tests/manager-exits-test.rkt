#lang racket/base
;; manager-exits.rkt: a worker's exit seen by the manager: its counters kept, the crash
;; backoff, a reload failed by its new worker's death, the last lines read first, and the
;; manager giving up when no worker was ever ready. In this process
;; (tests/lib/manager-fixture.rkt); the workers are `sleep` processes, ended by real signals.
(require racket/list
         racket/port
         rackunit
         "../fastcgi/private/util/clock.rkt"
         "../fastcgi/private/manager/manager-exits.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         "../fastcgi/private/os/signals.rkt"
         (only-in "../fastcgi/private/worker/lines.rkt" parse-line)
         "lib/manager-fixture.rkt")

;; end! : worker signal -> worker ; its process ended by the signal
(define (end! w sig)
  (send-signal! (worker-pid w) sig)
  (sync (worker-sp w))
  w)

(define (log-of thunk) (let-values ([(_ lines) (capture-log thunk)]) lines))
(define (logged? rx lines) (and (findf (λ (l) (regexp-match? rx l)) lines) #t))

(test-case "a draining worker's exit: gone, its counters in the totals, no restart"
  (call-with-manager
   (λ (m dir)
     (set-manager-ever-ready?! m #t)
     (define w (add-worker! m #:state 'draining))
     (for ([set! (list set-worker-requests! set-worker-connections! set-worker-slow!
                       set-worker-shed! set-worker-log-dropped!)]
           [n '(10 4 2 1 3)])
       (set! w n))
     (define lines (log-of (λ () (exited! m (end! w SIGTERM)))))
     (check-false (hash-ref (manager-workers m) (worker-pid w) #f))
     (for ([k '(requests accepted_connections slow_requests shed_requests log_dropped)]
           [n '(10 4 2 1 3)])
       (check-equal? (hash-ref (manager-totals m) k) n (format "~a" k)))
     (check-false (hash-ref (manager-totals m) 'restarts #f))
     (check-equal? lines (list (format "fastcgi: worker ~a exited (killed by SIGTERM)" (worker-pid w)))))))

(test-case "crashes at start: the first restarts at once, then each waits twice as long"
  (call-with-manager
   (λ (m dir)
     (set-manager-ever-ready?! m #t)
     (define lines1 (log-of (λ () (exited! m (end! (add-worker! m) SIGKILL)))))
     (check-equal? (manager-failures m) 1)
     (check-equal? (manager-last-start-error m) "killed by SIGKILL")
     (check-equal? (hash-ref (manager-totals m) 'restarts) 1)
     (check-true (logged? #rx"exited unexpectedly \\(killed by SIGKILL\\) after" lines1))
     (check-false (logged? #rx"crash at start" lines1) "the first crash: no delay")
     (for ([n '(2 3)] [delay '(0.1 0.2)])
       (define w (add-worker! m))
       (set-worker-failure! w "cannot load app.rkt")
       (define before (now-ms))
       (define lines (log-of (λ () (exited! m (end! w SIGKILL)))))
       (check-equal? (manager-failures m) n)
       (check-equal? (manager-last-start-error m) "cannot load app.rkt")
       (check-true (<= (+ before (* 1000 delay)) (manager-next-spawn-ms m) (+ (now-ms) (* 1000 delay))))
       (check-true (logged? (regexp (format "crash at start or soon after \\(~a in a row\\): next start in ~a s" n delay))
                            lines))
       (check-true (logged? #rx"after [0-9.]+ s: cannot load app.rkt" lines))))))

(test-case "a worker that was ready past the crash window: its death starts the count over"
  (call-with-manager
   (λ (m dir)
     (set-manager-ever-ready?! m #t)
     (set-manager-failures! m 3)
     (set-manager-last-start-error! m "old")
     (define w (add-worker! m #:state 'ready #:now (- (now-ms) crash-window-ms 1000.)))
     (exited! m (end! w SIGKILL))
     (check-equal? (manager-failures m) 0)
     (check-false (manager-last-start-error m)))))

(test-case "a reload's new worker dies: the reload fails, the others of its generation drain"
  (call-with-manager
   (λ (m dir)
     (set-manager-ever-ready?! m #t)
     (add-worker! m #:state 'ready)
     (set-manager-reload-gen! m 2)
     (set-manager-reload-covers! m 1)
     (define dead (add-worker! m #:generation 2))
     (define other (add-worker! m #:generation 2))
     (define lines (log-of (λ () (exited! m (end! dead SIGKILL)))))
     (define why (format "a worker of generation 2 died before it was ready: killed by SIGKILL"))
     (check-equal? (manager-last-reload-error m) why)
     (check-false (manager-reload-gen m))
     (check-equal? (manager-reload-settled m) 1)
     (check-equal? (manager-gen m) 1)
     (check-equal? (hash-ref (manager-totals m) 'reload_failures) 1)
     (check-eq? (worker-state other) 'draining)
     (check-equal? (worker-signalled other) SIGTERM)
     (check-true (logged? (regexp (format "reload failed: ~a; generation 1 goes on serving" why)) lines)))))

(test-case "the lines a worker sent before it exited are read first (why it could not start)"
  (call-with-manager
   (λ (m dir)
     (set-manager-ever-ready?! m #t)
     (define w (add-worker! m))
     (set-worker-control! w (open-output-nowhere))
     (thread (λ ()
               (channel-put (manager-messages m) (list (worker-pid w) (parse-line 'worker "failed --access-log: denied")))
               (channel-put (manager-messages m) (list (worker-pid w) eof))))
     (exited! m (end! w SIGKILL))
     (check-equal? (manager-last-start-error m) "--access-log: denied"))))

(test-case "no worker ever ready and one exits: the manager says why and exits 1, its files gone"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m))
     (define other (add-worker! m))
     (set-worker-failure! w "app.rkt: no fastcgi-handler")
     (define code #f)
     (define lines
       (log-of (λ ()
                 (let/ec k
                   (parameterize ([exit-handler (λ (c) (set! code c) (k (void)))])
                     (exited! m (end! w SIGKILL)))))))
     (check-equal? code 1)
     (check-true (logged? #rx"cannot start: app.rkt: no fastcgi-handler" lines))
     (check-equal? (worker-signalled other) SIGKILL)
     (check-false (file-exists? (build-path dir "app.sock"))))))
