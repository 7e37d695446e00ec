#lang racket/base
;; The rule of ownership of the server's state records: every mutable field has one
;; writer. For each module that defines such records (the manager's, manager-state.rkt;
;; a connection's and a server's, wire.rkt): its main module provides no setter; each
;; setter is provided by one owner submodule at most (none: the defining module writes the
;; field itself); each owner submodule is required by one module under fastcgi/, the one
;; it is named after; and no module under fastcgi/ names a setter it does not own. Tests
;; reach every setter through the for-tests submodule, which no module under fastcgi/
;; requires.
(require racket/file
         racket/list
         racket/runtime-path
         rackunit)

(define-runtime-path collection-dir "../fastcgi")
(define-runtime-path manager-state "../fastcgi/private/manager/manager-state.rkt")
(define-runtime-path wire "../fastcgi/private/engine/wire.rkt")

;; (list defining-file its-name (owner . the module it is named after) ...)
(define records
  `((,manager-state "manager-state.rkt"
     (lifecycle . "lifecycle.rkt") (workers . "manager-workers.rkt")
     (reports . "manager-reports.rkt") (watch . "manager-watch.rkt")
     (loader . "manager-loader.rkt") (reload . "manager-reload.rkt")
     (canary . "manager-canary.rkt") (status . "manager-status.rkt")
     (notify . "manager-notify.rkt") (manager . "manager.rkt"))
    (,wire "wire.rkt"
     (connection . "connection.rkt") (dispatch . "dispatch.rkt")
     (handler-run . "handler-run.rkt") (request-state . "request-state.rkt")
     (server . "server.rkt"))))

(define (exported-names mod)
  (dynamic-require mod (void))
  (define-values (vars stxs) (module->exports mod))
  (for*/list ([ph (in-list (append vars stxs))] #:when (eqv? (car ph) 0) [e (in-list (cdr ph))])
    (car e)))
(define (setter? s) (regexp-match? #rx"^set-.*!$" (symbol->string s)))

;; The modules under fastcgi/: (cons file-name text)
(define sources
  (for/list ([f (in-directory collection-dir)]
             #:when (regexp-match? #rx"[.]rkt$" (path->string f))
             #:unless (regexp-match? #rx"/compiled/" (path->string f)))
    (define-values (dir name _) (split-path f))
    (cons (path->string name) (file->string f))))

(for ([rec (in-list records)])
  (define file (car rec))
  (define name (cadr rec))
  (define owners (cddr rec))
  (define (sub o) `(submod ,file ,o))
  (define main-names (exported-names file))
  (define all-setters (filter setter? (exported-names (sub 'for-tests))))
  (define owned (for/list ([o (in-list owners)]) (cons (car o) (exported-names (sub (car o))))))

  (test-case (format "~a provides its records' readers and no setter" name)
    (check-true (> (length main-names) 10))
    (check-equal? (filter setter? main-names) '()))

  (test-case (format "~a: each setter has one owner submodule at most; owners provide setters only" name)
    (check-true (> (length all-setters) 10) (format "~a setters" (length all-setters)))
    (for ([o (in-list owned)])
      (check-equal? (filter (λ (n) (not (setter? n))) (cdr o)) '() (format "~a" (car o))))
    (for ([s (in-list all-setters)])
      (define os (for/list ([o (in-list owned)] #:when (memq s (cdr o))) (car o)))
      (check-true (<= (length os) 1) (format "~a is provided by ~a" s os))))

  (test-case (format "~a: each owner submodule is required by the module named after it; for-tests by none" name)
    (for ([o (in-list (cons '(for-tests . #f) owners))])
      (define rx (regexp (format "[(]submod \"~a\" ~a[)]" (regexp-quote name) (car o))))
      (define users (for/list ([s (in-list sources)] #:when (regexp-match? rx (cdr s))) (car s)))
      (check-equal? users (if (cdr o) (list (cdr o)) '()) (format "~a" (car o)))))

  (test-case (format "~a: no module names a setter it does not own" name)
    (for ([s (in-list all-setters)])
      (define owner (for/first ([o (in-list owned)] #:when (memq s (cdr o))) (car o)))
      (define rx (regexp (string-append "(^|[][ ()'])" (regexp-quote (symbol->string s)) "($|[][ ()])")))
      (define writers (for/list ([src (in-list sources)]
                                 #:when (regexp-match? rx (cdr src))
                                 #:unless (equal? (car src) name))
                        (car src)))
      ;; a field the defining module does not write itself is written by its owner alone
      (check-equal? writers (if owner (list (cdr (assq owner owners))) '()) (format "~a" s)))))
