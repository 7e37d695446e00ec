#lang racket/base
;; The racket program the manager starts its loaders and workers with: the one this process
;; runs (raco fastcgi serve execs into it: raco.rkt), found as compiler/find-exe would, but
;; without it: find-exe and racket/runtime-path load setup/dirs and what it needs, more
;; than a megabyte of heap the manager would hold for as long as the pool runs.
(provide current-racket-program
         racket-program)

;; current-racket-program : (parameter/c (or/c #f path-string))
;; Set where this process is not racket itself (raco's, when it could not exec).
(define current-racket-program (make-parameter #f))

;; racket-program : -> path-string
(define (racket-program)
  (or (current-racket-program)
      (let ([exe (find-system-path 'exec-file)])
        (if (complete-path? exe)
            exe
            ;; started by name (`racket` found on PATH) or by a path relative to the
            ;; directory it was started in
            (or (and (relative-path? exe)
                     (let-values ([(dir name dir?) (split-path exe)])
                       (and (eq? dir 'relative) (find-executable-path exe))))
                (path->complete-path exe (find-system-path 'orig-dir)))))))
