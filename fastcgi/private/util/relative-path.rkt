#lang racket/base
;; (define-relative-path id "relative/path.rkt"): id is the complete path of a file given
;; relative to the directory of the module that says it, the way define-runtime-path would
;; give it. racket/runtime-path also knows `raco exe` and the other collection roots, and
;; costs a process about 1.3 MiB of heap (setup/dirs and what it loads); the manager and
;; the pool's processes start their siblings by path, which this does with racket/base only.
(provide define-relative-path
         relative-path)

(define-syntax-rule (define-relative-path id rel)
  (define id (relative-path (#%variable-reference) rel)))

;; relative-path : variable-reference path-string -> path
;; rel from the directory of the module the reference is in (its source file).
(define (relative-path vr rel)
  (define src (variable-reference->module-source vr))
  (unless (path? src)
    (raise-arguments-error 'relative-path "the module has no file to be relative to" "module" src))
  (define-values (dir name dir?) (split-path src))
  (simplify-path (build-path dir rel) #f))
