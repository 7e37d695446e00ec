#lang racket/base
;; manager-state.rkt: the worker and pool structs as they start, the queries over the
;; workers, the totals, and what clean-up! removes. In this process (tests/lib/manager-fixture.rkt).
(require racket/file
         racket/os
         racket/list
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         "../fastcgi/private/transport/transport.rkt"
         "lib/manager-fixture.rkt")

(define (with-pid-file dir) (make-serve-config #:workers 2 #:pid-file (path->string (build-path dir "m.pid"))))

(test-case "make-worker: a starting worker that has reported nothing"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:now 1234.))
     (check-equal? (worker-pid w) (subprocess-pid (worker-sp w)))
     (for ([get (list worker-state worker-ready-ms worker-requests worker-active worker-connections
                      worker-slow worker-shed worker-queue-delay worker-sessions worker-rss
                      worker-drain-deadline worker-recycle worker-last-busy-ms worker-retiring?
                      worker-control worker-failure worker-reports-done? worker-log-dropped
                      worker-heard-ms worker-late worker-started-ms worker-gen)]
           [want (list 'starting #f 0 0 0 0 0 0 0 #f #f #f 1234. #f #f #f #f 0 1234. #f 1234. 1)])
       (check-equal? (get w) want (format "~a" (object-name get)))))))

(test-case "make-manager: generation 1, no worker, nothing counted; the status file next to the pid file"
  (call-with-manager
   #:config with-pid-file
   (λ (m dir)
     (for ([get (list manager-gen manager-next-id manager-stopping? manager-failures
                      manager-last-start-error manager-ever-ready? manager-reload-gen
                      manager-reload-pending? manager-reload-asks manager-reload-covers
                      manager-reload-settled manager-last-reload-error manager-max-active
                      manager-last-board manager-files-ok? manager-pid)]
           [want (list 1 0 #f 0 #f #f #f #f 0 0 0 #f 0 #f #t (getpid))])
       (check-equal? (get m) want (format "~a" (object-name get))))
     (check-equal? (live-workers m) '())
     (check-equal? (manager-address m) (listener-address (manager-listener m)))
     (check-equal? (manager-scoreboard m) (path->string (build-path dir "m.pid.status.json")))
     (check-equal? (manager-cfg m serve-config-workers) 2)))
  (call-with-manager
   (λ (m dir) (check-false (manager-scoreboard m)))))

(test-case "serving: the starting and ready workers of one generation, not the draining ones"
  (call-with-manager
   (λ (m dir)
     (define table                      ; generation state serving-in-1? serving-in-2?
       '((1 starting #t #f) (1 ready #t #f) (1 draining #f #f) (2 ready #f #t) (2 draining #f #f)))
     (define ws (for/list ([row (in-list table)])
                  (add-worker! m #:generation (first row) #:state (second row))))
     (for ([g '(1 2)] [col (list third fourth)])
       (check-equal? (sort (map worker-id (serving m g)) <)
                     (for/list ([w (in-list ws)] [row (in-list table)] #:when (col row)) (worker-id w))
                     (format "generation ~a" g)))
     (check-equal? (length (live-workers m)) 5))))

(test-case "total-add! adds to a count that starts at 0; start-failures-over! forgets the crashes"
  (call-with-manager
   (λ (m dir)
     (total-add! m 'restarts 1)
     (total-add! m 'restarts 2)
     (total-add! m 'requests 0)
     (check-equal? (hash-ref (manager-totals m) 'restarts) 3)
     (check-equal? (hash-ref (manager-totals m) 'requests) 0)
     (set-manager-failures! m 4)
     (set-manager-last-start-error! m "boom")
     (start-failures-over! m)
     (check-equal? (manager-failures m) 0)
     (check-false (manager-last-start-error m))
     (check-true (> crash-window-ms 0)))))

(test-case "clean-up!: the socket, the status file and our own pid file go; another's pid file stays"
  (for ([pid-text (list #f "1\n")])
    (call-with-manager
     #:config with-pid-file
     (λ (m dir)
       (define pid-file (build-path dir "m.pid"))
       (when pid-text (display-to-file pid-text pid-file #:exists 'truncate))
       (display-to-file "{}" (manager-scoreboard m))
       (define sock (build-path dir "app.sock"))
       (check-true (file-exists? sock) "the socket is there before")
       (clean-up! m)
       (check-false (file-exists? sock))
       (check-false (file-exists? (manager-scoreboard m)))
       (check-equal? (file-exists? pid-file) (and pid-text #t)
                     (format "pid file holding ~s" (or pid-text "our pid")))))))
