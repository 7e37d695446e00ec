#lang racket/base
;; raco.rkt: the module `raco fastcgi` instantiates hands its arguments to the CLI
;; (cli-run.rkt), `serve` in a fresh racket; what the command logs is printed once. As a
;; process: racket raco.rkt ARGS, as `raco fastcgi ARGS` runs it.
(require compiler/find-exe
         racket/runtime-path
         racket/string
         rackunit
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/serve.rkt")

(define-runtime-path raco.rkt "../fastcgi/private/cli/raco.rkt")

;; fastcgi : string ... -> (values natural string string) ; `raco fastcgi ARGS`
(define (fastcgi . args) (run-program* (find-exe) (cons (path->string raco.rkt) args)))

(test-case "no command: the usage on stderr, exit 2; help: on stdout, exit 0"
  (define-values (code out err) (fastcgi))
  (check-equal? code 2)
  (check-regexp-match #rx"^usage: raco fastcgi <command>" err)
  (check-equal? out "")
  (define-values (hcode hout herr) (fastcgi "help"))
  (check-equal? hcode 0)
  (check-regexp-match #rx"^usage: raco fastcgi <command>" hout)
  (for ([c '("serve" "dev" "request" "ctl")])
    (check-regexp-match (regexp (string-append "\n  " c " ")) hout c)))

(test-case "an error logged by the command is printed once (the manager's: its worker could not load the app)"
  (call-with-temp-dir
   "fcgi-raco"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (with-output-to-file app (λ () (write-string broken-source)))
     (define-values (code out err)
       (fastcgi "serve" app "--workers" "1" "--listen" (format "unix:~a" (build-path dir "s.sock"))))
     (check-equal? code 1)
     (check-equal? (length (regexp-match* #rx"broken at load" err)) 1 err))))
