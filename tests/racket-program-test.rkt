#lang racket/base
;; racket-program.rkt: the racket the manager starts its loaders and workers with is the
;; program this process runs, as a complete path, however it was started (by a complete
;; path, by name through PATH, by a path relative to the directory it started in); raco's
;; process (when it cannot exec) names it with current-racket-program.
(require racket/file
         racket/port
         racket/system
         rackunit
         "../fastcgi/private/os/racket-program.rkt")

(define racket-exe
  (let ([e (find-system-path 'exec-file)])
    (simplify-path (if (complete-path? e) e (find-executable-path e)))))
(define-values (racket-dir racket-name)
  (let-values ([(dir name dir?) (split-path racket-exe)]) (values dir name)))
(define module (path->string (simplify-path (path->complete-path "../fastcgi/private/os/racket-program.rkt"
                                                                  (let-values ([(d n _) (split-path (syntax-source #'here))]) d)))))
(define prog (make-temporary-file "fcgi-racket-program-~a.rkt"))
(with-output-to-file prog #:exists 'truncate
  (λ () (printf "#lang racket/base\n(display ((dynamic-require '(file ~s) 'racket-program)))\n" module)))

;; started : string -> string ; what racket-program answers in a racket started by the
;; shell command HOW (the program, as the shell is to find it), run in racket's directory
(define (started how)
  (parameterize ([current-directory racket-dir])
    (with-output-to-string
      (λ () (check-true (system (format "~a ~a" how prog)))))))

(test-case "this process: a complete path to the racket that runs it"
  (check-true (complete-path? (racket-program)))
  (check-equal? (simplify-path (racket-program)) racket-exe))

(test-case "started by complete path, by name on PATH, by a relative path"
  (check-equal? (started (path->string racket-exe)) (path->string racket-exe))
  (check-equal? (simplify-path (started (format "PATH=~a ~a" racket-dir racket-name)))
                racket-exe)
  (check-equal? (simplify-path (string->path (started (format "./~a" racket-name))))
                racket-exe)
  (check-true (complete-path? (started (format "./~a" racket-name)))))

(test-case "current-racket-program names it where this process is not racket"
  (parameterize ([current-racket-program "/opt/racket/bin/racket"])
    (check-equal? (racket-program) "/opt/racket/bin/racket"))
  (check-equal? (simplify-path (racket-program)) racket-exe))

(delete-file prog)
