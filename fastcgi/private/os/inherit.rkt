#lang racket/base
;; What a process inherits across exec must not decide what it does. A server started
;; under nohup has SIGHUP ignored, one started by a supervisor may have SIGTERM and SIGHUP
;; blocked, and one started from a shell holds whatever descriptors that shell had open.
;; own-process! takes the signals the process documents (signals.rkt's take-signals!)
;; and makes every program it starts get descriptors 0-2 and nothing else: Racket 8.12 and
;; later pass each inherited descriptor without close-on-exec to a subprocess by default
;; (current-subprocess-keep-file-descriptors is 'inherited), where 8.7 closed them all; a
;; manager would hand what its shell held to its loaders (whose fork check then refuses to
;; fork) and a worker what it holds to the programs its handlers start.
(require "signals.rkt")
(provide own-process!
         keep-no-descriptors!)

;; own-process! : (listof natural) -> (values evt (or/c string #f))
;; The event of the signals (block-signals!'s), and what was inherited of them ("SIGHUP
;; ignored"), for the log, or #f. Call it before any subprocess or other OS thread starts.
(define (own-process! signals)
  (define note (inherited-signals-note signals))
  (define evt (take-signals! signals))
  (keep-no-descriptors!)
  (values evt note))

;; keep-no-descriptors! : -> void
;; Subprocesses started from now on get their three standard descriptors and no other, on
;; every Racket (a caller that means to pass one can still parameterize this).
(define (keep-no-descriptors!)
  (current-subprocess-keep-file-descriptors '()))
