#lang racket/base
;; The module `raco fastcgi` instantiates (see info.rkt): hands the arguments to the CLI
;; (cli-run.rkt). `serve` first leaves raco's process for a fresh racket running the same
;; command line (exec.rkt says why); should that fail, it runs here.
(require compiler/find-exe
         racket/runtime-path
         "cli-run.rkt"
         "../os/exec.rkt")

(define-runtime-path cli-run "cli-run.rkt")

(let ([argv (current-command-line-arguments)])
  (when (and (positive? (vector-length argv)) (equal? (vector-ref argv 0) "serve"))
    (define racket (find-exe))
    (when racket (exec-racket! racket cli-run (vector->list argv))))
  (run-cli argv))
