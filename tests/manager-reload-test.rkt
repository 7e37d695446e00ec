#lang racket/base
;; manager-reload.rkt: reloads asked (SIGHUP) are counted, one at a time, one asked during
;; another runs after it, and each settles as done or failed; --secret-file is read again.
;; In this process (tests/lib/manager-fixture.rkt), with an ondemand pool and no worker,
;; so that a reload starts no process. A reload that starts workers: reload-serial-test,
;; manager-test.
(require racket/file
         rackunit
         "../fastcgi/private/config.rkt"
         "../fastcgi/private/manager-reload.rkt"
         "../fastcgi/private/manager-state.rkt"
         "lib/manager-fixture.rkt")

(define (ondemand dir)
  (make-serve-config #:pm 'ondemand #:workers 1 #:app "/srv/app.rkt"
                     #:secret-file (path->string (build-path dir "secret"))))

(define (log-of thunk) (let-values ([(_ lines) (capture-log thunk)]) lines))

(test-case "a reload with nothing to start: the next generation serves at once, counted"
  (call-with-manager
   #:config ondemand
   (λ (m dir)
     (display-to-file "a-secret-of-16-bytes-at-least" (build-path dir "secret"))
     (define lines (log-of (λ () (reload! m))))
     (check-equal? (manager-gen m) 2)
     (check-false (manager-reload-gen m))
     (check-equal? (manager-reload-asks m) 1)
     (check-equal? (manager-reload-settled m) 1)
     (check-false (manager-last-reload-error m))
     (check-equal? (hash-ref (manager-totals m) 'reloads) 1)
     (check-equal? lines '("fastcgi: reload: starting generation 2 (0 workers)")))))

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
     (reload-settled! m #f)                             ; the one under way is done
     (check-false (manager-reload-pending? m))
     (check-equal? (manager-gen m) 2 "the pending reload ran (nothing to start: done at once)")
     (check-equal? (manager-reload-settled m) 3)
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
     (display-to-file "short" file #:exists 'truncate)
     (define lines (log-of (λ () (reload! m))))
     (check-equal? (manager-secret m) #"the-new-secret-of-the-pool")
     (check-not-false (member (format "fastcgi: raco-fastcgi: --secret-file ~a: the secret must have at least 16 bytes; the workers keep the secret read before" file)
                              lines))
     (check-equal? (manager-gen m) 3 "the reload goes on"))))

(test-case "read-secret*: a file that cannot be read is one user error naming the option"
  (call-with-manager
   (λ (m dir)
     (define missing (path->string (build-path dir "none")))
     (check-exn (λ (e) (and (exn:fail:user? e)
                            (regexp-match? (regexp (format "^raco-fastcgi: --secret-file ~a: cannot read it: No such file or directory"
                                                           (regexp-quote missing)))
                                           (exn-message e))))
                (λ () (read-secret* missing))))))
