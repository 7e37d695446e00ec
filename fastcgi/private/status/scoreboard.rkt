#lang racket/base
;; The scoreboard: the pool's status as a JSON file next to the pid file, which the
;; manager rewrites while something changes and `ctl` and the tests read. Apart from the
;; renderers (pool-status.rkt), which the manager does not load.
(require "../util/jsexpr.rkt")
(provide read-scoreboard
         write-scoreboard!)

;; read-scoreboard : path-string -> (or/c hash #f) ; #f when absent or unreadable
(define (read-scoreboard path)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define v (call-with-input-file path read-json))
    (and (hash? v) v)))

;; write-scoreboard! : path-string hash -> void
;; Written to a fresh file and renamed over the old one: readers see the old or the new
;; board whole, never half of one.
(define (write-scoreboard! path board)
  (define tmp (string-append (if (path? path) (path->string path) path) ".tmp"))
  (call-with-output-file tmp #:exists 'truncate (λ (out) (write-json board out)))
  (rename-file-or-directory tmp path #t))
