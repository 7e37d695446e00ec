#lang racket/base
;; Catching what a body raises, without with-handlers: on the per-request path,
;; call/ec with an exception handler takes less time and allocates less than a one-clause
;; with-handlers (the engine runs two per request, the servlet adapter two or three more;
;; see bench/OPTIMISATIONS.md, Errors as values).
(provide catching catch-all)

(struct caught (value))

;; (catching pred on-caught body ...): body's value (one), or (on-caught e) once body has
;; raised e and (pred e) holds; anything else raised goes on to the enclosing handlers,
;; as with (with-handlers ([pred on-caught]) body ...).
(define-syntax-rule (catching pred on-caught body ...)
  (let ([v (call/ec (λ (k) (call-with-exception-handler
                            (λ (e) (if (pred e) (k (caught e)) e))
                            (λ () body ...))))])
    (if (caught? v) (on-caught (caught-value v)) v)))

;; (catch-all on-raise body ...): catching whatever body raises, exceptions or not.
(define-syntax-rule (catch-all on-raise body ...)
  (catching (λ (e) #t) on-raise body ...))
