#lang racket/base
;; relative-path.rkt: define-relative-path gives the complete path of a file named relative
;; to the directory of the module that says it (as define-runtime-path does, without
;; racket/runtime-path), and a module with no file gets a clear error.
(require rackunit
         "../fastcgi/private/util/relative-path.rkt")

(define here-dir
  (let-values ([(dir name dir?) (split-path (path->complete-path (syntax-source #'here)))]) dir))

(define-relative-path this-file "relative-path-test.rkt")
(define-relative-path main-module "../fastcgi/main.rkt")

(test-case "a file of the module's own directory, and one above it"
  (check-equal? this-file (simplify-path (build-path here-dir "relative-path-test.rkt")))
  (check-true (complete-path? main-module))
  (check-equal? main-module (simplify-path (build-path here-dir 'up "fastcgi" "main.rkt") #f))
  (check-false (member 'up (explode-path main-module)) "no .. left in the path")
  (check-true (file-exists? main-module))
  ;; what the manager does with such a path: loads the module it names
  (check-true (procedure? (dynamic-require main-module 'serve/fastcgi-raw))))

(test-case "a module declared with no file behind it: the error says so"
  (define ns (make-base-namespace))
  (parameterize ([current-namespace ns])
    (eval `(module nofile racket/base
             (require (file ,(path->string (build-path here-dir 'up "fastcgi" "private" "util" "relative-path.rkt"))))
             (provide where)
             (define (where) (relative-path (#%variable-reference) "x.rkt"))))
    (check-exn #rx"relative-path: the module has no file to be relative to"
               (λ () ((dynamic-require ''nofile 'where))))))
