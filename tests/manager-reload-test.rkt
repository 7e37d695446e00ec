#lang racket/base
;; manager-reload.rkt: reloads asked (SIGHUP) are counted, one at a time, one asked during
;; another runs after it, and each settles as done or failed; --secret-file is read again.
;; In this process (tests/lib/manager-fixture.rkt), with an ondemand pool and no worker:
;; a reload starts one worker all the same (a real worker process, of an app that does not
;; exist; nothing here reads its reports, and the fixture kills it), and is settled here by
;; hand as the reports would settle it. Reloads seen through to the end: reload-serial-test,
;; manager-test.
(require racket/file
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/manager/manager-reload.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         "lib/manager-fixture.rkt")

(define (ondemand dir)
  (make-serve-config #:pm 'ondemand #:workers 1 #:app "/srv/app.rkt"
                     #:secret-file (path->string (build-path dir "secret"))))

(define (log-of thunk) (let-values ([(_ lines) (capture-log thunk)]) lines))

(test-case "an idle ondemand pool reloads with one worker: the new code must load first"
  (call-with-manager
   #:config ondemand
   (λ (m dir)
     (display-to-file "a-secret-of-16-bytes-at-least" (build-path dir "secret"))
     (define lines (log-of (λ () (reload! m))))
     (check-not-false (member "fastcgi: reload: starting generation 2 (1 workers)" lines) (format "~s" lines))
     (check-equal? (manager-reload-gen m) 2 "under way until its worker is ready")
     (check-equal? (manager-gen m) 1)
     (check-equal? (map worker-gen (live-workers m)) '(2))
     (check-equal? (manager-reload-asks m) 1)
     (check-equal? (manager-reload-settled m) 0 "not said done before the code loaded")
     (reload-settled! m #f)
     (check-equal? (manager-reload-settled m) 1)
     (check-false (manager-last-reload-error m))
     (check-equal? (hash-ref (manager-totals m) 'reloads) 1))))

(test-case "reloads asked while one is under way: one runs after it; it answers them all"
  (call-with-manager
   #:config ondemand
   (λ (m dir)
     (display-to-file "a-secret-of-16-bytes-at-least" (build-path dir "secret"))
     (set-manager-reload-gen! m 2)                      ; one under way, asked once
     (set-manager-reload-asks! m 1)
     (set-manager-reload-covers! m 1)
     (define lines (log-of (λ () (reload! m) (reload! m))))
     (check-equal? lines '("fastcgi: reload asked while one is under way: it runs after it"))
     (check-true (manager-reload-pending? m))
     (check-equal? (manager-reload-asks m) 3)
     (check-equal? (manager-gen m) 1)
     (check-equal? (live-workers m) '() "nothing started for the ones asked meanwhile")
     (reload-settled! m #f)                             ; the one under way is done
     (check-false (manager-reload-pending? m))
     (check-equal? (manager-reload-settled m) 1 "the first one only")
     (check-equal? (manager-reload-gen m) 2 "the pending reload runs")
     (check-equal? (length (live-workers m)) 1)
     (reload-settled! m #f)                             ; and is done
     (check-equal? (manager-reload-settled m) 3 "it answers the two asked meanwhile")
     (check-false (manager-reload-gen m))
     (check-equal? (hash-ref (manager-totals m) 'reloads) 2))))

(test-case "reload-settled!: a failure is kept as the last error and counted; nothing starts when stopping"
  (call-with-manager
   #:config ondemand
   (λ (m dir)
     (set-manager-reload-gen! m 2)
     (set-manager-reload-covers! m 4)
     (set-manager-reload-pending?! m #t)
     (set-manager-stopping?! m #t)
     (reload-settled! m "a worker died")
     (check-equal? (manager-last-reload-error m) "a worker died")
     (check-equal? (manager-reload-settled m) 4)
     (check-equal? (hash-ref (manager-totals m) 'reload_failures) 1)
     (check-equal? (manager-gen m) 1 "stopping: the pending one does not start")
     (reload! m)
     (check-equal? (manager-reload-asks m) 0 "stopping: a reload is not even counted"))))

(test-case "--secret-file is read again at each reload; one that cannot be read keeps the secret"
  (call-with-manager
   #:config ondemand
   (λ (m dir)
     (define file (build-path dir "secret"))
     (display-to-file "the-new-secret-of-the-pool\n" file)
     (reload! m)
     (check-equal? (manager-secret m) #"the-new-secret-of-the-pool")
     (reload-settled! m #f)
     (display-to-file "short" file #:exists 'truncate)
     (define lines (log-of (λ () (reload! m))))
     (check-equal? (manager-secret m) #"the-new-secret-of-the-pool")
     (check-not-false (member (format "fastcgi: raco-fastcgi: --secret-file ~a: the secret must have at least 16 bytes; the workers keep the secret read before" file)
                              lines))
     (check-equal? (manager-reload-asks m) 2)
     (check-equal? (manager-reload-gen m) 2 "the reload goes on")
     (check-equal? (length (live-workers m)) 2 "a worker started for each reload"))))

(test-case "read-secret*: a file that cannot be read is one user error naming the option"
  (call-with-manager
   (λ (m dir)
     (define missing (path->string (build-path dir "none")))
     (check-exn (λ (e) (and (exn:fail:user? e)
                            (regexp-match? (regexp (format "^raco-fastcgi: --secret-file ~a: cannot read it: No such file or directory"
                                                           (regexp-quote missing)))
                                           (exn-message e))))
                (λ () (read-secret* missing))))))
