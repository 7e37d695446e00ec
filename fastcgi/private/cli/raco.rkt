#lang racket/base
;; The module `raco fastcgi` instantiates (see info.rkt): hands the arguments to the CLI
;; (cli-run.rkt). `serve` first leaves raco's process for a fresh racket running the same
;; command line (exec.rkt says why); should that fail, it runs here.
(require compiler/find-exe
         racket/runtime-path
         "cli-run.rkt"
         "../os/exec.rkt"
         "../os/racket-program.rkt")

(define-runtime-path cli-run "cli-run.rkt")

(let* ([argv (current-command-line-arguments)]
       [racket (and (positive? (vector-length argv)) (equal? (vector-ref argv 0) "serve") (find-exe))])
  (when racket (exec-racket! racket cli-run (vector->list argv)))
  ;; still raco's process: the manager starts its processes with the racket found here
  (parameterize ([current-racket-program racket])
    (run-cli argv)))
