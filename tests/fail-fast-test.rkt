#lang racket/base
;; Fail fast, fail loud: `raco fastcgi serve` with an app that raises at load, an unusable
;; listen address, or a log or pid file it cannot write exits non-zero within seconds with
;; one clear line and leaves no socket file behind; after a good start, workers that crash
;; keep the backoff and the status says so (`serve --check`: check-test). Real `raco fastcgi serve` processes on unix sockets in a temp
;; folder; every wait is bounded.
(require json
         racket/file
         racket/list
         racket/string
         racket/tcp
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/serve.rkt")

;; serve : path (listof string) #:source string #:seconds real -> (values natural string)
;; Runs `raco fastcgi serve APP ARGS ...` in dir until it exits (failing the test if it is
;; still running after secs); its exit status and its stderr.
(define (serve dir args #:source [source good-source] #:seconds [secs 20])
  (define app (path->string (build-path dir "app.rkt")))
  (display-to-file source app #:exists 'truncate)
  (define p (start-process "serve" raco (list* "fastcgi" "serve" app args) #:dir dir))
  (define exited? (sync/timeout secs (proc-subprocess p)))
  (define status (stop-process! p))
  (check-not-false exited? (format "serve ~a still running after ~a s" (string-join args) secs))
  (values status (file->string (proc-stderr-file p))))

;; check-one-line : string regexp -> void ; exactly one line says it, and no stack trace
(define (check-one-line err rx)
  (check-equal? (length (filter (λ (l) (regexp-match? rx l)) (lines err))) 1 err)
  (check-false (regexp-match? #rx"context\\.\\.\\.:" err) "no stack trace"))

;; sock : path -> string
(define (sock dir) (path->string (build-path dir "app.sock")))

(test-case "an app that raises at load: serve exits 1 at once, one line says why, no socket left"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     (define pid-file (path->string (build-path dir "m.pid")))
     (define-values (status err)
       (serve dir (list "--listen" (string-append "unix:" (sock dir)) "--workers" "2" "--pid-file" pid-file)
              #:source broken-source))
     (check-equal? status 1)
     (check-one-line err #rx"broken at load")
     (check-regexp-match #rx"fatal .*cannot start: cannot load .*app\\.rkt: app: broken at load" err)
     (check-false (file-exists? (sock dir)) "no socket file")
     (check-false (file-exists? pid-file) "no pid file")
     (check-false (file-exists? (pid-file->status-file pid-file)) "no status file"))))

(test-case "--pm ondemand: an app that raises at load exits 1 at start too, with no connection"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     ;; a worker starts at start all the same, so that the code is known to load; before,
     ;; the failure came only with the first connection, long after the deploy said ok
     (define-values (status err)
       (serve dir (list "--listen" (string-append "unix:" (sock dir)) "--pm" "ondemand")
              #:source broken-source))
     (check-equal? status 1)
     (check-one-line err #rx"broken at load")
     (check-false (file-exists? (sock dir)) "no socket file"))))

(test-case "an unusable listen address: exit 1, one line"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     (define-values (status err) (serve dir '("--listen" "unix:/nonexistent/dir/x.sock" "--workers" "1")))
     (check-equal? status 1)
     (check-equal? (length (lines err)) 1 err)
     (check-regexp-match #rx"cannot bind unix:/nonexistent/dir/x.sock" err)
     ;; a port in use
     (define held (tcp-listen 0 4 #t "127.0.0.1"))
     (define-values (_a port _b _c) (tcp-addresses held #t))
     (define-values (status2 err2) (serve dir (list "--listen" (format "127.0.0.1:~a" port) "--workers" "1")))
     (tcp-close held)
     (check-equal? status2 1)
     (check-equal? (length (lines err2)) 1 err2)
     (check-regexp-match #rx"cannot bind 127.0.0.1:[0-9]+: Address already in use" err2))))

(test-case "a log or pid file in a missing folder: exit 1, one line naming the option, no socket"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     (for ([flag (in-list '("--access-log" "--slow-log" "--pid-file"))])
       (define-values (status err)
         (serve dir (list "--listen" (string-append "unix:" (sock dir)) "--workers" "1"
                          flag "/nonexistent/dir/a.log")))
       (check-equal? status 1 flag)
       (check-equal? (length (lines err)) 1 err)
       (check-one-line err (regexp (string-append "^raco-fastcgi: " flag " /nonexistent/dir/a.log: cannot open it for writing: No such file or directory$")))
       (check-false (file-exists? (sock dir)) "no socket file"))
     ;; the single process too
     (define-values (status err)
       (serve dir (list "--listen" (string-append "unix:" (sock dir)) "--single-process"
                        "--access-log" "/nonexistent/dir/a.log")))
     (check-equal? status 1)
     (check-one-line err #rx"^raco-fastcgi: --access-log /nonexistent/dir/a.log: cannot open it")
     (check-false (file-exists? (sock dir)) "no socket file"))))

(test-case "after a good start, crashing workers back off and the status shows the failures and why (--no-preload)"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define pid-file (path->string (build-path dir "m.pid")))
     (display-to-file good-source app)
     (define mgr (start-process "manager" raco
                                (list "fastcgi" "serve" app "--listen" (string-append "unix:" (sock dir))
                                      "--workers" "1" "--pid-file" pid-file "--status-path" "/status"
                                      ;; each worker loads the file: a replacement finds it broken
                                      "--no-preload")
                                #:dir dir))
     (define (board) (or (read-status-file (pid-file->status-file pid-file)) (hasheq)))
     (define (ready-pids) (board-pids (board) '("idle" "busy")))
     (dynamic-wind
      void
      (λ ()
        (wait-until 60 "a worker ready" (λ () (pair? (ready-pids))))
        (check-equal? (hash-ref (board) 'start_failures) 0)
        (display-to-file broken-source app #:exists 'truncate)
        (send-signal! (car (ready-pids)) SIGKILL)
        (wait-until 30 "two start failures on the status"
                    (λ () (>= (hash-ref (board) 'start_failures 0) 2)))
        (check-regexp-match #rx"cannot load .*app\\.rkt: app: broken at load" (hash-ref (board) 'last_start_error ""))
        (check-true (process-alive? (proc-pid mgr)) "the manager lives on")
        (define log (file->string (proc-stderr-file mgr)))
        (check-regexp-match #rx"next start in 0.1 s" log)
        (check-regexp-match #rx"exited unexpectedly \\(exit status 3\\) after [0-9.]+ s: cannot load .*broken at load" log)
        ;; fixed code: the next attempt serves; the status page shows the failures
        (display-to-file good-source app #:exists 'truncate)
        (wait-until 40 "a worker serves again" (λ () (pair? (ready-pids))))
        (define-values (st hd body)
          (fastcgi-request (string-append "unix:" (sock dir)) #:uri "/status" #:timeout 10))
        (check-regexp-match #rx"start failures: +[1-9][0-9]*\n" (bytes->string/utf-8 body #\?))
        (check-regexp-match #rx"last start error: +cannot load" (bytes->string/utf-8 body #\?))
        (void (wait-until 40 "the failures are over once a new worker lasts"
                          (λ () (and (= 0 (hash-ref (board) 'start_failures -1))
                                     (eq? (json-null) (hash-ref (board) 'last_start_error #f)))))))
      (λ () (stop-process! mgr #:timeout 10))))))
