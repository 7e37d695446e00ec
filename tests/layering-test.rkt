#lang racket/base
;; The layering of fastcgi/private: every module sits in one folder of layers.rktd, and
;; requires (at any phase, or by a runtime or relative path or define-lazy) only modules of its own
;; folder or of a folder listed before it; the references between modules make no cycle.
;; The modules are read as syntax, never run.
(require rackunit
         racket/file
         racket/list
         racket/path
         racket/runtime-path)

(define-runtime-path private-dir "../fastcgi/private")
(define-runtime-path collection-dir "../fastcgi")

;; ---------------------------------------------------------------------------------------
;; What a module refers to.

;; module-references : path -> (listof (cons string syntax))
;; The relative module paths ("x.rkt", "../f/x.rkt") a module names in its requires (any
;; phase, any submodule), runtime paths, runtime module path indexes, relative paths and define-lazy, each
;; with the syntax that names it (for its line).
(define (module-references file)
  (define stx
    (parameterize ([read-accept-reader #t] [read-accept-lang #t] [port-count-lines-enabled #t])
      (call-with-input-file file (λ (in) (port-count-lines! in) (read-syntax file in)))))
  (define found '())
  (define (note! s) (when (string? (syntax-e s)) (set! found (cons (cons (syntax-e s) s) found))))
  (define (spec! s)
    (define e (syntax-e s))
    (cond [(string? e) (note! s)]
          [(and (pair? e) (list? e) (symbol? (syntax-e (car e))))
           (case (syntax-e (car e))
             [(for-syntax for-template for-label for-meta for-space only-in except-in prefix-in
               rename-in combine-in only-meta-in only-space-in relative-in)
              (for-each spec! (cdr e))]
             [(submod) (spec! (cadr e))]
             [(file) (note! (cadr e))]
             [else (void)])]
          [else (void)]))
  (define (walk s)
    (define e (syntax-e s))
    (when (pair? e)
      (define head (and (identifier? (car e)) (syntax-e (car e))))
      (define items (let loop ([e e]) (cond [(pair? e) (cons (car e) (loop (cdr e)))]
                                            [(syntax? e) (loop (syntax-e e))]
                                            [else '()])))
      (case head
        [(require) (for-each spec! (cdr items))]
        [(define-runtime-path define-runtime-module-path-index define-relative-path)
         (when (= (length items) 3) (spec! (caddr items)))]
        [(define-lazy) (when (>= (length items) 2) (spec! (cadr items)))]
        [else (for-each walk items)])))
  (walk stx)
  (reverse found))

;; ---------------------------------------------------------------------------------------
;; The check.

;; layering-problems : path (listof string) -> (listof string)
;; Every breach of the layering under dir, whose folders are ordered by layers: a module
;; outside the folders, a folder not in the list, a reference to a module of a later folder,
;; to a module outside dir (the public modules sit above every layer), or to a module that
;; does not exist, and each cycle of references.
(define (layering-problems dir layers)
  (define rank (for/hash ([l (in-list layers)] [i (in-naturals)]) (values l i)))
  (define problems '())
  (define (problem! fmt . args) (set! problems (cons (apply format fmt args) problems)))
  (for ([p (in-list (directory-list dir))])
    (define full (build-path dir p))
    (cond [(directory-exists? full)
           (unless (or (hash-ref rank (path->string p) #f) (equal? (path->string p) "compiled"))
             (problem! "~a/ is not a layer of layers.rktd" p))]
          [(regexp-match? #rx"[.]rkt$" (path->string p))
           (problem! "~a is in no layer's folder" p)]))
  (define modules
    (for*/list ([l (in-list layers)]
                #:when (directory-exists? (build-path dir l))
                [f (in-list (directory-list (build-path dir l)))]
                #:when (regexp-match? #rx"[.]rkt$" (path->string f)))
      (simple-form-path (build-path dir l f))))
  (define (layer-of m)
    (define rel (find-relative-path (simple-form-path dir) m))
    (define parts (explode-path rel))
    (and (= (length parts) 2) (path? (car parts)) (path->string (car parts))))
  (define (short m) (path->string (find-relative-path (simple-form-path dir) m)))
  (define edges
    (for/hash ([m (in-list modules)])
      (define-values (base name _) (split-path m))
      (values
       m
       (remove-duplicates
        (for*/list ([r (in-list (module-references m))]
                    #:when (regexp-match? #rx"[.]rkt$" (car r))
                    [target (in-value (simple-form-path (build-path base (car r))))]
                    #:unless (equal? target m))
          (define where (format "~a:~a" (short m) (syntax-line (cdr r))))
          (define to-layer (layer-of target))
          (cond [(not (file-exists? target)) (problem! "~a: ~s does not exist" where (car r))]
                [(not to-layer) (problem! "~a: ~s is outside the layers (a public module sits above them all)" where (car r))]
                [(> (hash-ref rank to-layer +inf.0) (hash-ref rank (layer-of m)))
                 (problem! "~a: ~a (layer ~a) requires ~a (layer ~a, above it)"
                           where (short m) (layer-of m) (short target) to-layer)])
          target)))))
  ;; cycles: a depth-first search; a reference back to a module on the current path closes one
  (define state (make-hash))
  (define (visit m path)
    (case (hash-ref state m 'new)
      [(active) (define between (reverse (takef path (λ (x) (not (equal? x m))))))
                (problem! "cycle: ~a" (apply string-append
                                              (add-between (map short (cons m (append between (list m))))
                                                           " -> ")))]
      [(new) (hash-set! state m 'active)
             (for ([t (in-list (hash-ref edges m '()))]) (visit t (cons m path)))
             (hash-set! state m 'done)]
      [else (void)]))
  (for ([m (in-list modules)]) (visit m '()))
  (reverse problems))

(define (read-layers file) (map car (call-with-input-file file read)))

;; ---------------------------------------------------------------------------------------
;; The tree as it is.

(define layers (read-layers (build-path private-dir "layers.rktd")))

(test-case "every module of fastcgi/private is in a layer and requires nothing above its layer"
  (check-equal? (layering-problems private-dir layers) '()))

(test-case "the layers' folders are all there, none empty"
  (for ([l (in-list layers)])
    (check-true (and (directory-exists? (build-path private-dir l))
                     (for/or ([f (directory-list (build-path private-dir l))])
                       (regexp-match? #rx"[.]rkt$" (path->string f))))
                l)))

(test-case "the reader sees requires at every phase, in submodules, runtime paths and define-lazy"
  (define refs (map car (module-references (build-path private-dir "worker" "app.rkt"))))
  (check-not-false (member "../servlet/web.rkt" refs))
  (check-not-false (member "../util/lazy.rkt" refs))
  (define mw (map car (module-references (build-path private-dir "manager" "manager-workers.rkt"))))
  (check-not-false (member "../worker/worker-main.rkt" mw))
  (define dev (map car (module-references (build-path private-dir "dev" "dev.rkt"))))
  (check-not-false (member "../transport/client.rkt" dev)))

;; ---------------------------------------------------------------------------------------
;; The check itself, on small trees that break it on purpose.

;; with-tree : (hash string string) (path -> any) -> any
;; Writes the files (paths relative to a new temporary folder) and calls proc with the
;; folder's private/, the tree the check reads.
(define (with-tree files proc)
  (define dir (make-temporary-file "layering~a" 'directory))
  (dynamic-wind
   void
   (λ ()
     (for ([(name text) (in-hash files)])
       (define f (build-path dir name))
       (make-parent-directory* f)
       (call-with-output-file f (λ (o) (write-string text o))))
     (proc (build-path dir "private")))
   (λ () (delete-directory/files dir))))

(define (mod . requires)
  (format "#lang racket/base\n(require ~a)\n" (apply string-append (add-between (map (λ (r) (format "~s" r)) requires) " "))))

(test-case "a require of a later layer is a problem, of an earlier one is not"
  (with-tree (hash "private/low/a.rkt" (mod "../high/b.rkt") "private/high/b.rkt" (mod))
    (λ (dir)
      (define ps (layering-problems dir '("low" "high")))
      (check-equal? (length ps) 1)
      (check-regexp-match #rx"low/a.rkt:2: low/a.rkt \\(layer low\\) requires high/b.rkt \\(layer high" (car ps))
      (check-equal? (layering-problems dir '("high" "low")) '()))))

(test-case "upward references hidden in for-syntax, only-in, submod, runtime and relative paths and define-lazy are found"
  (with-tree (hash "private/low/a.rkt"
                   (string-append "#lang racket/base\n"
                                  "(require (for-syntax (only-in \"../high/b.rkt\" x)))\n"
                                  "(module+ sub (require (submod \"../high/c.rkt\" private)))\n"
                                  "(define-runtime-path p \"../high/d.rkt\")\n"
                                  "(define-relative-path q \"../high/f.rkt\")\n"
                                  "(define (f) (define-lazy \"../high/e.rkt\" g) g)\n")
                   "private/high/b.rkt" (mod) "private/high/c.rkt" (mod) "private/high/d.rkt" (mod) "private/high/e.rkt" (mod) "private/high/f.rkt" (mod))
    (λ (dir)
      (define ps (layering-problems dir '("low" "high")))
      (check-equal? (length ps) 5 (format "~s" ps))
      (for ([m '("b" "c" "d" "e" "f")])
        (check-not-false (for/or ([p ps]) (regexp-match? (format "requires high/~a.rkt" m) p)) m)))))

(test-case "a cycle is a problem, even inside one layer"
  (with-tree (hash "private/one/a.rkt" (mod "b.rkt")
                   "private/one/b.rkt" "#lang racket/base\n(define-runtime-path a \"a.rkt\")\n")
    (λ (dir)
      (check-equal? (layering-problems dir '("one")) '("cycle: one/a.rkt -> one/b.rkt -> one/a.rkt")))))

(test-case "a module outside the folders, an unknown folder, a public module and a missing one are problems"
  (with-tree (hash "private/loose.rkt" (mod)
                   "private/extra/x.rkt" (mod)
                   "private/one/a.rkt" (mod "../../main.rkt" "gone.rkt")
                   "main.rkt" (mod))
    (λ (dir)
      (define ps (layering-problems dir '("one")))
      (check-equal? (length ps) 4 (format "~s" ps))
      (check-not-false (member "loose.rkt is in no layer's folder" ps))
      (check-not-false (member "extra/ is not a layer of layers.rktd" ps))
      (check-not-false (for/or ([p ps]) (regexp-match? #rx"main.rkt\" is outside the layers" p)))
      (check-not-false (for/or ([p ps]) (regexp-match? #rx"\"gone.rkt\" does not exist" p))))))
