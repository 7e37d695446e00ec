#lang racket/base
;; The module `raco fastcgi` instantiates (see info.rkt): hands the arguments to the CLI.
(require "cli.rkt")
(main (current-command-line-arguments))
