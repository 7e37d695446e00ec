#lang racket/base
;; (define-lazy module-path name ...): each name is a procedure that loads module-path at
;; its first call and then calls that module's export of the same name. racket/lazy-require
;; does this too, but costs every process that loads it more memory than the modules it
;; keeps out (jsexpr.rkt says why that matters). The module is loaded into the registry of
;; the module that uses define-lazy, whatever the current namespace is when it is called,
;; so it is the same instance that module's other requires see.
(require (for-syntax racket/base)
         racket/runtime-path)
(provide define-lazy)

(define-syntax-rule (define-lazy modpath name ...)
  (begin
    (define-runtime-module-path-index mpi 'modpath)
    (define name (lazy-procedure mpi 'name (#%variable-reference))) ...))

;; lazy-procedure : module-path-index symbol variable-reference -> procedure
(define (lazy-procedure mpi sym vr)
  (define proc #f)
  (define (get)
    (unless proc
      (set! proc (parameterize ([current-namespace (variable-reference->empty-namespace vr)])
                   (dynamic-require mpi sym))))
    proc)
  (procedure-rename
   (make-keyword-procedure (λ (kws kw-args . rest) (keyword-apply (get) kws kw-args rest))
                           (λ args (apply (get) args)))
   sym))
