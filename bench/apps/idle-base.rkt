#lang racket/base
;; The floor of any Racket process (bench/memory.rkt): a compiled module that requires
;; nothing beyond racket/base, says "ready" on stdout and waits until it is killed.
;;   racket bench/apps/idle-base.rkt
(write-string "ready\n")
(flush-output)
(sync never-evt)
