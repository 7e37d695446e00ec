#lang racket/base
;; lazy.rkt: define-lazy loads its module at the first call, not before; passes positional
;; and keyword arguments and results through; the module is instantiated once, in the
;; registry of the module that uses define-lazy, even when called under another namespace,
;; and once only when many threads call it first at the same time.
(require compiler/cm
         racket/file
         rackunit
         "../fastcgi/private/util/lazy.rkt")

(define dir (make-temporary-file "fcgi-lazy-~a" 'directory))
(define target (build-path dir "target.rkt"))
(void (with-output-to-file target
  (λ () (write-string "#lang racket/base\n(require (for-syntax racket/base))\n(begin-for-syntax (putenv \"FCGI_LAZY_TEST_VISITED\" \"yes\"))\n(provide add count-instances)\n(define instances 0)\n(set! instances (add1 instances))\n(define (count-instances) instances)\n(define (add a [b 1] #:times [k 1]) (* k (+ a b)))\n"))))
(define user (build-path dir "user.rkt"))
(void (with-output-to-file user
  (λ () (write-string (format "#lang racket/base\n(require (file ~s))\n(provide add count-instances)\n(define-lazy \"target.rkt\" add count-instances)\n"
                              (path->string (simplify-path (path->complete-path "../fastcgi/private/util/lazy.rkt" (let-values ([(d n _) (split-path (syntax-source #'here))]) d)))))))))

;; user.rkt compiled as a module is: a module compiled in memory declares its submodules
;; (and so what they require) with itself.
(parameterize ([current-namespace (make-base-namespace)]) (managed-compile-zo user))
;; compiling ran the target's begin-for-syntax here: forget it
(environment-variables-set! (current-environment-variables) #"FCGI_LAZY_TEST_VISITED" #f)

(test-case "the module loads at the first call, then answers every call"
  (define ns (make-base-namespace))
  (parameterize ([current-namespace ns])
    (define add (dynamic-require user 'add))
    (define count-instances (dynamic-require user 'count-instances))
    (check-false (module-declared? target #f) "not loaded before the first call")
    (check-equal? (add 2) 3)
    (check-true (module-declared? target #f))
    (check-equal? (add 2 5 #:times 3) 21)
    (check-equal? (object-name add) 'add)
    ;; called under another namespace: the same instance, not a second one
    (parameterize ([current-namespace (make-base-namespace)])
      (check-equal? (count-instances) 1)
      (check-equal? (add 1 1) 2))
    (check-equal? (count-instances) 1)
    ;; add takes keywords, so it is exported as syntax: taking it must not have run the
    ;; target's compile-time side (begin-for-syntax), as dynamic-require of the name would
    (check-false (getenv "FCGI_LAZY_TEST_VISITED"))))

(test-case "a wrong call is the target's own error"
  (parameterize ([current-namespace (make-base-namespace)])
    (define add (dynamic-require user 'add))
    (check-exn exn:fail:contract? (λ () (add "x")))))

;; a target whose instantiation yields (as a large one's does, loading from disk): the
;; threads that ask for it meanwhile wait for it instead of finding it half made
(define slow-target (build-path dir "slow.rkt"))
(void (with-output-to-file slow-target
  (λ () (write-string "#lang racket/base\n(provide slow)\n(sleep 0.2)\n(define (slow x) (* 2 x))\n"))))
(define slow-user (build-path dir "slow-user.rkt"))
(void (with-output-to-file slow-user
  (λ () (write-string (format "#lang racket/base\n(require (file ~s))\n(provide slow)\n(define-lazy \"slow.rkt\" slow)\n"
                              (path->string (simplify-path (path->complete-path "../fastcgi/private/util/lazy.rkt" (let-values ([(d n _) (split-path (syntax-source #'here))]) d)))))))))
(parameterize ([current-namespace (make-base-namespace)]) (managed-compile-zo slow-user))

(test-case "first calls from many threads at once all get the loaded module"
  (parameterize ([current-namespace (make-base-namespace)])
    (define slow (dynamic-require slow-user 'slow))
    (define results (make-vector 10 #f))
    (define ths (for/list ([i (in-range 10)])
                  (thread (λ () (vector-set! results i (with-handlers ([exn:fail? exn-message] [exn:break? (λ (e) (quote broken))]) (slow i)))))))
    ;; the first caller is broken while it waits (a request timeout): the load goes on
    (sleep 0.05)
    (break-thread (car ths))
    (for-each thread-wait ths)
    (check-equal? (for/list ([i (in-range 1 10)]) (vector-ref results i))
                  (for/list ([i (in-range 1 10)]) (* 2 i)))
    (check-equal? (slow 21) 42 "and a call after the break")))

(delete-directory/files dir)
