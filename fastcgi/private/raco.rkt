#lang racket/base
;; The module `raco fastcgi` instantiates (see info.rkt): hands the arguments to the CLI.
;; The CLI prints the `fastcgi` log itself, with timestamps; the root logger's default
;; stderr receiver would print every error line a second time, so the CLI's modules are
;; loaded under a logger of their own, with no parent.
(require racket/runtime-path)
(define-runtime-path cli "cli.rkt")
(parameterize ([current-logger (make-logger #f #f)])
  ((dynamic-require cli 'main) (current-command-line-arguments)))
