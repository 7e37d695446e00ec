#lang racket/base
;; The size of the code: every module under fastcgi/ has at most 400 lines, and every
;; top-level form of its body (a definition, a submodule, an expression) spans at most 80,
;; so that a module holds one concern and a definition fits on a screen or two. The modules
;; are read as syntax, never run.
(require racket/file
         racket/list
         racket/path
         racket/runtime-path
         rackunit)

(define-runtime-path collection-dir "../fastcgi")

(define max-module-lines 400)
(define max-form-lines 80)

;; ---------------------------------------------------------------------------------------
;; The check.

;; position-lines : path -> (values (vectorof natural) natural)
;; The line of each character position of a file (positions from 1, as read-syntax counts
;; them with line counting on), and the file's number of lines.
(define (position-lines file)
  (call-with-input-file file
    (λ (in)
      (port-count-lines! in)
      (let loop ([acc '()])
        (define-values (line col pos) (port-next-location in))
        (define c (read-char in))
        (cond [(eof-object? c)
               ;; a last line with no newline still counts
               (define lines (if (and (pair? acc) (eqv? col 0)) (sub1 line) line))
               (values (list->vector (reverse acc)) (if (null? acc) 0 lines))]
              [else (loop (cons line acc))])))))

;; module-forms : path -> (listof syntax)
;; The top-level forms of a module's body.
(define (module-forms file)
  (define stx
    (parameterize ([read-accept-reader #t] [read-accept-lang #t])
      (call-with-input-file file (λ (in) (port-count-lines! in) (read-syntax file in)))))
  (define body (cdddr (syntax->list stx)))
  (define (module-begin? s)
    (define l (syntax->list s))
    (and l (pair? l) (identifier? (car l)) (eq? (syntax-e (car l)) '#%module-begin)))
  (if (and (= (length body) 1) (module-begin? (car body)))
      (cdr (syntax->list (car body)))
      body))

;; form-name : syntax -> string ; "define run-worker", "module child", "define-values (a b)"
(define (form-name s)
  (define e (syntax->datum s))
  (cond [(and (pair? e) (symbol? (car e)) (pair? (cdr e)))
         (define what (cadr e))
         (format "~a ~a" (car e)
                 (cond [(symbol? what) what]
                       [(and (pair? what) (symbol? (car what))
                             (memq (car e) '(define define-syntax define/contract)))
                        (car what)]
                       [(and (list? what) (andmap symbol? what)) what]
                       [else "..."]))]
        [(pair? e) (format "~a ..." (car e))]
        [else (format "~s" e)]))

;; size-problems : path string -> (listof string)
;; What breaks the limits in a module, named as shown: "NAME: N lines" for the module,
;; "NAME:LINE: FORM spans N lines" for a form.
(define (size-problems file shown)
  (define-values (lines count) (position-lines file))
  (define (line-of pos) (vector-ref lines (min (sub1 pos) (sub1 (vector-length lines)))))
  (append
   (if (> count max-module-lines)
       (list (format "~a: ~a lines (at most ~a)" shown count max-module-lines))
       '())
   (for*/list ([f (in-list (module-forms file))]
               [first (in-value (syntax-line f))]
               [span (in-value (add1 (- (line-of (+ (syntax-position f) (syntax-span f) -1)) first)))]
               #:when (> span max-form-lines))
     (format "~a:~a: ~a spans ~a lines (at most ~a)" shown first (form-name f) span max-form-lines))))

;; collection-modules : path -> (listof path)
;; Every .rkt file under dir (compiled folders aside), sorted.
(define (collection-modules dir)
  (sort (for/list ([p (in-directory dir (λ (d) (not (equal? (file-name-from-path d) (string->path "compiled")))))]
                   #:when (and (file-exists? p) (regexp-match? #rx"[.]rkt$" (path->string p))))
          p)
        string<? #:key path->string))

;; tree-problems : path -> (listof string) ; of every module under dir
(define (tree-problems dir)
  (define (plain p) (simplify-path (path->complete-path p) #f))
  (define base (plain (build-path dir 'up)))
  (append*
   (for/list ([m (in-list (collection-modules dir))])
     (size-problems m (path->string (find-relative-path base (plain m)))))))

;; ---------------------------------------------------------------------------------------
;; The tree as it is.

(test-case "every module under fastcgi/ is at most 400 lines, every top-level form at most 80"
  (define modules (collection-modules collection-dir))
  (check-not-false (for/or ([m modules]) (regexp-match? #rx"private/worker/worker[.]rkt$" (path->string m)))
                   "the modules are found")
  (check-true (>= (length modules) 100) "the modules are found")
  (check-equal? (tree-problems collection-dir) '()))

;; ---------------------------------------------------------------------------------------
;; The check itself, on modules that break it on purpose.

;; with-module : string (path -> any) -> any ; proc gets a temporary file holding text
(define (with-module text proc)
  (define dir (make-temporary-file "size~a" 'directory))
  (dynamic-wind
   void
   (λ ()
     (define f (build-path dir "m.rkt"))
     (call-with-output-file f (λ (o) (write-string text o)))
     (proc f))
   (λ () (delete-directory/files dir))))

;; body-lines : natural -> string ; n lines of a definition's body, each (void) and a newline
(define (body-lines n) (apply string-append (make-list n " (void)\n")))

(test-case "a definition of 81 lines is caught, with its name and first line; one of 80 passes"
  (with-module (string-append "#lang racket/base\n(define x 1)\n(define (long)\n" (body-lines 79) " 1)\n")
    (λ (f) (check-equal? (size-problems f "m.rkt") '("m.rkt:3: define long spans 81 lines (at most 80)"))))
  (with-module (string-append "#lang racket/base\n(define (fits)\n" (body-lines 78) " 1)\n")
    (λ (f) (check-equal? (size-problems f "m.rkt") '()))))

(test-case "a submodule of 81 lines is caught, module+ and module* alike"
  (for ([head '("module child racket/base" "module+ test" "module* main #f")])
    (with-module (string-append "#lang racket/base\n(" head "\n" (body-lines 79) " (void))\n")
      (λ (f) (check-equal? (size-problems f "m.rkt")
                           (list (format "m.rkt:2: ~a spans 81 lines (at most 80)"
                                         (car (regexp-split #rx" racket/base| #f" head)))))))))

(test-case "a module of 401 lines is caught, one of 400 passes, though every form is short"
  (with-module (string-append "#lang racket/base\n" (apply string-append (make-list 400 "(void)\n")))
    (λ (f) (check-equal? (size-problems f "m.rkt") '("m.rkt: 401 lines (at most 400)"))))
  (with-module (string-append "#lang racket/base\n" (apply string-append (make-list 398 "(void)\n")) "(void)")
    (λ (f) (check-equal? (size-problems f "m.rkt") '()))))

(test-case "a form's last line is where its closing parenthesis is, comments and strings included"
  (with-module (string-append "#lang racket/base\n(define s \"" (apply string-append (make-list 80 "x\n")) "\")\n")
    (λ (f) (check-equal? (size-problems f "m.rkt") '("m.rkt:2: define s spans 81 lines (at most 80)"))))
  (with-module (string-append "#lang racket/base\n(define c 1\n" (apply string-append (make-list 79 " ;; c\n")) " )\n")
    (λ (f) (check-equal? (size-problems f "m.rkt") '("m.rkt:2: define c spans 81 lines (at most 80)"))))
  (with-module (string-append "#lang racket/base\n(define c 1)\n" (apply string-append (make-list 90 ";; after\n")))
    (λ (f) (check-equal? (size-problems f "m.rkt") '()))))
