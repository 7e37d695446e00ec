#lang racket/base
;; Runs the CLI (cli.rkt) on a command line: for `raco fastcgi` (raco.rkt) and, as a
;; program, for the process `raco fastcgi serve` becomes (`racket cli-run.rkt serve ...`).
;; The CLI prints the `fastcgi` log itself, with timestamps; the root logger's default
;; stderr receiver would print every error line a second time, so the CLI's modules are
;; loaded under a logger of their own, with no parent.
(require "../util/relative-path.rkt")
(provide run-cli)

(define-relative-path cli "cli.rkt")

;; run-cli : (vectorof string) -> any
(define (run-cli argv)
  (parameterize ([current-logger (make-logger #f #f)])
    ((dynamic-require cli 'main) argv)))

(module+ main
  (run-cli (current-command-line-arguments)))
