#lang racket/base
;; manager-state.rkt's rule of ownership: every mutable field of the manager's structs
;; has one writer. The main module provides no setter; each setter is provided by exactly
;; one owner submodule (or by none, when manager-state.rkt itself writes the field); each
;; owner submodule is required by one module under fastcgi/, the one it is named after;
;; and no module under fastcgi/ names a setter it does not own. Tests reach every setter
;; through the for-tests submodule, which no module under fastcgi/ requires.
(require racket/file
         racket/list
         racket/runtime-path
         rackunit)

(define-runtime-path collection-dir "../fastcgi")
(define-runtime-path state-file "../fastcgi/private/manager/manager-state.rkt")

(define owners '(lifecycle workers reports watch loader reload canary status notify manager))
;; the module each owner submodule is named after
(define (owner-file o)
  (case o
    [(lifecycle) "lifecycle.rkt"]
    [(manager) "manager.rkt"]
    [else (format "manager-~a.rkt" o)]))

(define (exported-names mod)
  (dynamic-require mod (void))
  (define-values (vars stxs) (module->exports mod))
  (for*/list ([ph (in-list (append vars stxs))] #:when (eqv? (car ph) 0) [e (in-list (cdr ph))])
    (car e)))
(define (setter? s) (regexp-match? #rx"^set-.*!$" (symbol->string s)))
(define (sub name) `(submod ,state-file ,name))

(define main-names (exported-names state-file))
(define all-setters (filter setter? (exported-names (sub 'for-tests))))
(define owned (for/hasheq ([o (in-list owners)]) (values o (exported-names (sub o)))))

(test-case "the main module provides the structs' readers and no setter"
  (check-not-false (memq 'worker-state main-names))
  (check-not-false (memq 'loader-wanted main-names))
  (check-not-false (memq 'manager-gen main-names))
  (check-equal? (filter setter? main-names) '()))

(test-case "each setter has one owner submodule at most; the owners provide setters only"
  (check-true (> (length all-setters) 60) (format "~a setters" (length all-setters)))
  (for ([(o names) (in-hash owned)])
    (check-equal? (filter (λ (n) (not (setter? n))) names) '() (format "~a" o)))
  (for ([s (in-list all-setters)])
    (define os (for/list ([(o names) (in-hash owned)] #:when (memq s names)) o))
    (check-true (<= (length os) 1) (format "~a is provided by ~a" s os))))

;; The modules under fastcgi/ and their text.
(define sources
  (for/list ([f (in-directory collection-dir)]
             #:when (regexp-match? #rx"[.]rkt$" (path->string f))
             #:unless (regexp-match? #rx"/compiled/" (path->string f)))
    (define-values (dir name _) (split-path f))
    (cons (path->string name) (file->string f))))

(test-case "each owner submodule is required by one module, named after it; for-tests by none"
  (for ([o (in-list (cons 'for-tests owners))])
    (define rx (regexp (format "[(]submod \"manager-state[.]rkt\" ~a[)]" o)))
    (define users (for/list ([s (in-list sources)] #:when (regexp-match? rx (cdr s))) (car s)))
    (check-equal? users (if (eq? o 'for-tests) '() (list (owner-file o))) (format "~a" o))))

(test-case "no module names a setter it does not own"
  (for ([s (in-list all-setters)])
    (define owner (for/first ([(o names) (in-hash owned)] #:when (memq s names)) o))
    (define rx (regexp (string-append "(^|[][ ()'])" (regexp-quote (symbol->string s)) "($|[][ ()])")))
    (define writers (for/list ([src (in-list sources)]
                               #:when (regexp-match? rx (cdr src))
                               #:unless (equal? (car src) "manager-state.rkt"))
                      (car src)))
    ;; a field manager-state.rkt does not write itself is written by its owner alone
    (check-equal? writers (if owner (list (owner-file owner)) '()) (format "~a" s))))
