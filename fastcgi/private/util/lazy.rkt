#lang racket/base
;; (define-lazy module-path name ...): each name is a procedure that loads module-path at
;; its first call and then calls that module's export of the same name. With #:values
;; before the names, each is a thunk that loads the module and gives that export's value. racket/lazy-require
;; does this too, but costs every process that loads it more memory than the modules it
;; keeps out (jsexpr.rkt says why that matters). The module is loaded into the registry of
;; the module that uses define-lazy, whatever the current namespace is when it is called,
;; so it is the same instance that module's other requires see.
;;
;; The exports are taken through a submodule that refers to them as values, not by
;; dynamic-require of their names: a procedure with keyword arguments is exported as
;; syntax, and dynamic-require of syntax instantiates the compile-time side of the module
;; and of everything it requires (for web-server's modules, a large part of a worker).
(require (for-syntax racket/base)
         ffi/unsafe/atomic)
(provide define-lazy)

(define-syntax (define-lazy stx)
  (syntax-case stx ()
    [(_ modpath #:values name ...)
     #'(define-lazy* modpath lazy-value name ...)]
    [(_ modpath name ...)
     #'(define-lazy* modpath lazy-procedure name ...)]))

;; (define-lazy* modpath wrap name ...) : wrap makes each name from the exports and its index
(define-syntax (define-lazy* stx)
  (syntax-case stx ()
    [(_ modpath wrap name ...)
     (let* ([names (syntax->list #'(name ...))]
            [sub (car (generate-temporaries '(lazy)))]
            ;; the submodule's body has no context of its own: racket/base's, from its language
            [body (datum->syntax #f `(module ,(syntax-e sub) racket/base
                                       (require (only-in ,(syntax->datum #'modpath) ,@(map syntax-e names)))
                                       (provide exports)
                                       (define (exports) (vector ,@(map syntax-e names)))))])
       (with-syntax ([submodule (datum->syntax stx (cons (datum->syntax stx 'module) (cdr (syntax-e body))))]
                     [sub-name (syntax-e sub)]
                     [(i ...) (for/list ([k (in-range (length names))]) k)])
         #'(begin
             submodule
             (define mpi (module-path-index-join '(submod "." sub-name) (variable-reference->module-path-index (#%variable-reference))))
             (define exports (lazy-exports mpi (#%variable-reference)))
             (define name (wrap exports i 'name)) ...)))]))

;; lazy-exports : module-path-index variable-reference -> (-> vector)
;; The submodule's exports, loaded at the first call, by one thread of its own that every
;; caller until then waits for. Racket does not guard a module's instantiation from a
;; second thread: one that asks while another is instantiating it finds its variables
;; unset ("name's binding is missing", "reference to a variable that is uninitialized"),
;; so a burst of first requests to a fresh process would all fail. The loading thread is not
;; the caller's, so a break or kill that ends the caller (a request timeout) cannot stop
;; an instantiation half done; it runs under the custodian of the module that used
;; define-lazy, so a request's custodian shut down does not end it either.
(define (lazy-exports mpi vr)
  (define cust (current-custodian))
  (define v #f)
  (define attempt #f)                   ; (or/c #f (cons thread (box (or/c #f exn))))
  (define (load! failure)
    (with-handlers ([(λ (e) #t) (λ (e) (set-box! failure e))])
      (set! v ((parameterize ([current-namespace (variable-reference->empty-namespace vr)])
                 (dynamic-require mpi 'exports))))))
  (λ ()
    (unless v
      (define a (call-as-atomic
                 (λ ()
                   (unless attempt
                     (define failure (box #f))
                     (set! attempt (cons (parameterize ([current-custodian cust])
                                           (thread (λ () (load! failure))))
                                         failure)))
                   attempt)))
      (thread-wait (car a))
      (unless v
        ;; failed: the next call tries again
        (call-as-atomic (λ () (when (eq? attempt a) (set! attempt #f))))
        (raise (or (unbox (cdr a))
                   (exn:fail (format "define-lazy: loading ~a ended before it was done"
                                     (module-path-index-resolve mpi))
                             (current-continuation-marks))))))
    v))

;; lazy-value : (-> vector) natural symbol -> (-> any) ; a thunk that gives the value
(define (lazy-value exports i sym)
  (procedure-rename (λ () (vector-ref (exports) i)) sym))

;; lazy-procedure : (-> vector) natural symbol -> procedure
(define (lazy-procedure exports i sym)
  (define proc #f)
  (define (get)
    (unless proc (set! proc (vector-ref (exports) i)))
    proc)
  (procedure-rename
   (make-keyword-procedure (λ (kws kw-args . rest) (keyword-apply (get) kws kw-args rest))
                           (λ args (apply (get) args)))
   sym))
