#lang racket/base
;; manager-status.rkt: the board built from the manager's state (each worker's state as the
;; status shows it, the counts, the totals of workers that are gone), when it is published,
;; and the status and pid files it writes. In this process (tests/lib/manager-fixture.rkt).
(require json
         racket/file
         racket/list
         racket/os
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         "../fastcgi/private/manager/manager-status.rkt"
         "lib/manager-fixture.rkt")

(define (with-pid-file dir)
  (make-serve-config #:workers 2 #:app "/srv/blog/app.rkt"
                     #:pid-file (path->string (build-path dir "m.pid"))))

(define (board-of m now)
  (publish! m now)
  (manager-last-board m))

(test-case "the board: each worker's state as shown, and the pool's counts"
  (call-with-manager
   #:config with-pid-file
   (λ (m dir)
     ;; state active late -> shown as
     (define table '((starting 0 #f "starting") (ready 0 #f "idle") (ready 3 #f "busy")
                     (draining 1 #f "draining") (ready 0 #t "late") (ready 2 killed "late")))
     (define ws (for/list ([row (in-list table)] [i (in-naturals)])
                  (define w (add-worker! m #:state (first row) #:active (second row) #:now 500.
                                         #:generation (if (zero? i) 2 1)))
                  (set-worker-late! w (third row))
                  (set-worker-requests! w 10)
                  (set-worker-connections! w 4)
                  (set-worker-sessions! w 1)
                  w))
     (define b (board-of m 10500.))
     (check-equal? (map (λ (x) (hash-ref x 'state)) (hash-ref b 'workers)) (map fourth table))
     (check-equal? (map (λ (x) (hash-ref x 'pid)) (hash-ref b 'workers)) (map worker-pid ws))
     (check-equal? (hash-ref (first (hash-ref b 'workers)) 'generation) 2)
     (check-equal? (hash-ref (first (hash-ref b 'workers)) 'uptime) 10)
     (check-equal? (hash-ref (first (hash-ref b 'workers)) 'memory) (json-null))
     (for ([k '(pool pm master_pid total_workers active_workers idle_workers draining_workers
                     late_workers sessions requests accepted_connections uptime generation)]
           [want (list "app.rkt" "static" (getpid) 6 3 2 1 2 6 60 24 10 1)])
       (check-equal? (hash-ref b k) want (format "~a" k))))))

(test-case "the board: totals of workers that are gone are added to the live ones'"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:state 'ready))
     (set-worker-requests! w 5)
     (set-worker-slow! w 2)
     (set-worker-shed! w 1)
     (for ([k '(requests slow_requests shed_requests restarts recycled unresponsive_kills)]
           [n '(100 7 3 2 4 1)])
       (total-add! m k n))
     (set-manager-failures! m 3)
     (set-manager-last-start-error! m "no such module")
     (define b (board-of m 0.))
     (for ([k '(requests slow_requests shed_requests restarts recycled unresponsive_kills
                         start_failures last_start_error last_reload_error)]
           [want (list 105 9 4 2 4 1 3 "no such module" (json-null))])
       (check-equal? (hash-ref b k) want (format "~a" k))))))

(test-case "publish!: a new board when it changed or a second passed, not otherwise"
  (call-with-manager
   (λ (m dir)
     (define b1 (board-of m 1000.))
     (check-eq? (board-of m 1500.) b1 "nothing changed within the second")
     (define b2 (board-of m 2100.))
     (check-not-eq? b2 b1 "past a second: published again")
     (check-equal? (hash-ref b2 'uptime) 2)
     (add-worker! m #:now 2100.)
     (define b3 (board-of m 2200.))
     (check-equal? (hash-ref b3 'total_workers) 1 "a worker more: published at once")
     (check-eq? (board-of m 2900.) b3 "its workers' uptimes are the same"))))

(test-case "the status file is written; a removed pid file is written again, with a warning"
  (call-with-manager
   #:config with-pid-file
   (λ (m dir)
     (define pid-file (build-path dir "m.pid"))
     (board-of m 0.)
     (check-equal? (hash-ref (call-with-input-file (manager-scoreboard m) read-json) 'total_workers) 0)
     (delete-file pid-file)
     (add-worker! m)
     (define-values (_ lines) (capture-log (λ () (board-of m 10.))))
     (check-equal? (file->string pid-file) (format "~a\n" (getpid)))
     (check-equal? (hash-ref (call-with-input-file (manager-scoreboard m) read-json) 'total_workers) 1)
     (check-not-false (findf (λ (l) (regexp-match? #rx"the pid file .* was removed: written again" l)) lines)))))

(test-case "a status file that cannot be written: one error line until it can be again"
  (call-with-manager
   #:config with-pid-file
   (λ (m dir)
     (delete-file (build-path dir "m.pid"))
     (make-directory (build-path dir "m.pid"))       ; neither file can be written now
     (define-values (_ lines)
       (capture-log (λ () (board-of m 0.) (add-worker! m) (board-of m 10.))))
     (check-equal? (length (filter (λ (l) (regexp-match? #rx"cannot write the status file" l)) lines)) 1)
     (check-false (manager-files-ok? m))
     (delete-directory (build-path dir "m.pid"))
     (add-worker! m)
     (board-of m 20.)
     (check-true (manager-files-ok? m)))))

(test-case "write-pid-file! writes the pid and a newline; exact-floor"
  (call-with-manager
   (λ (m dir)
     (define f (build-path dir "p.pid"))
     (display-to-file "123456789\n" f)
     (write-pid-file! f 42)
     (check-equal? (file->string f) "42\n")
     (check-equal? (map exact-floor '(1.9 2 -0.5)) '(1 2 -1)))))
