#lang racket/base
;; worker-main.rkt: the program a worker process runs, `racket -t worker-main.rkt -- CONFIG`,
;; CONFIG the serve-config as config.rkt writes it. Started as the manager starts it, with
;; no manager to reach: it reads its configuration from its last argument, says why on one
;; line of its log (printed once: its modules log under a logger of their own) and exits 3.
;; Workers started by a real manager: manager-test and every test of `raco fastcgi serve`.
(require compiler/find-exe
         racket/file
         racket/os
         racket/port
         racket/runtime-path
         racket/string
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "integration/lib.rkt")

(define-runtime-path worker-main "../fastcgi/private/worker/worker-main.rkt")

(test-case "no manager to reach: one fatal line, tagged with its pid, and exit 3"
  (define cfg (serve-config-for-worker
               (make-serve-config #:app "/srv/app.rkt")
               #:pool-prefix (format "fastcgi-test-~a-nomanager" (getpid)) #:master-pid (getpid)
               #:worker-id 1))
  (define text (let ([o (open-output-string)]) (write-serve-config cfg o) (get-output-string o)))
  (define-values (code out err)
    (run-program (find-exe) (list "-N" "fastcgi-worker" "-t" (path->string worker-main) "--" text)
                 #:timeout 60))
  (define lines (filter (λ (l) (not (string=? l ""))) (string-split (bytes->string/utf-8 err #\?) "\n")))
  (check-equal? code 3)
  (check-equal? (length lines) 1 (format "~s" lines))
  (check-regexp-match #rx"^.*\\[[0-9]+\\].*cannot reach the manager" (car lines)))
