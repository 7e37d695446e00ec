#lang racket/base
;; web-server's unchecked struct procedures, as its own request reader uses them: the
;; `private` submodules of web-server/http/request-structs and response-structs give the
;; request, header and binding constructors and accessors without their contracts, which
;; cost on every request, and on each of its headers, many times what the constructors
;; themselves do (the response's output procedure is wrapped again besides). Those
;; submodules are not documented, so each binding is checked here once, at load, against
;; the contracted one (util/probes.rkt): the same arity, and a value it makes reads back
;; through the contracted accessors (or it answers as the contracted one does). One that
;; is not as expected gives way to the contracted one, with one log line. A public struct
;; of another number of fields than the adapter fills is refused at load.
;; Each name below is a macro: applied, it calls the private procedure, or the contracted
;; one after a failed check, on a flag set at load. A call through a variable that held
;; the one chosen costs measurably more than the private one imported; the flag does not.
;; Also Racket's own parameterization-key (of the primitive module '#%paramz), the mark
;; under which a continuation holds its parameterization (servlet.rkt's resume-as-now).
(require (for-syntax racket/base)
         net/url-structs
         racket/port
         racket/promise
         web-server/http/request-structs
         web-server/http/response-structs
         (prefix-in raw: (only-in (submod web-server/http/request-structs private)
                                  make-request make-header request-uri binding:form
                                  header-value headers-assq*))
         (prefix-in raw: (only-in (submod web-server/http/response-structs private)
                                  response-output))
         (only-in '#%paramz parameterization-key)
         "../util/probes.rkt")
(provide make-request/raw
         make-header/raw
         binding:form/raw
         request-uri/raw
         header-value/raw
         headers-assq*/raw
         response-output/raw
         continuation-parameterization-key
         define-checked
         constructor-holds?
         same-holds?
         parameterization-key-probe)

;; (define-checked name ok? raw public): name applied is raw applied where ok? (a
;; variable set once, at load) holds, else public; name alone is the one of the two.
(define-syntax-rule (define-checked name ok? raw public)
  (define-syntax (name stx)
    (syntax-case stx ()
      [(_ . args) #'(if ok? (raw . args) (public . args))]
      [_ #'(if ok? raw public)])))

;; constructor-holds? : string procedure procedure natural (listof any)
;;                      (listof (any -> any)) [(listof any)] -> boolean
;; Whether raw takes n arguments and a value it makes of args reads back through readers
;; (reads-back-probe); if not, the line. public must take n arguments: the adapter fills
;; n fields by position, and there is no other way to build the struct.
(define (constructor-holds? what raw public n args readers [expected args])
  (assumption-required! (format "web-server's ~a struct" what)
                        (λ () (arity-probe public n))
                        "this fastcgi fills it by position and does not run on this web-server")
  (assumption-holds? (format "web-server's unchecked ~a constructor" what)
                     (λ () (let ([a (arity-probe raw n)])
                             (if (eq? a #t) (reads-back-probe raw args readers expected) a)))
                     "using the contracted one"))

;; same-holds? : string procedure procedure (listof list) [(any -> any)] -> boolean
;; Whether raw takes public's arguments and answers as public does (seen through view)
;; for each list of arguments in cases; if not, the line.
(define (same-holds? what raw public cases [view values])
  (assumption-holds?
       (format "web-server's unchecked ~a" what)
       (λ ()
         (define a (arity-probe raw (procedure-arity public)))
         (cond
           [(not (eq? a #t)) a]
           [(for/or ([args (in-list cases)])
              (define got (view (apply raw args)))
              (define want (view (apply public args)))
              (and (not (equal? got want))
                   (format "answers ~.s for ~.s, where the contracted one answers ~.s" got args want)))]
           [else #t]))
       "using the contracted one"))

;; Sample values of the right kinds, each field distinct from the others.
(define sample-url (url "http" #f "probe.example" 8080 #t (list (path/param "p" '())) '((q . "1")) #f))
(define sample-header (header #"Probe-Name" #"probe value"))
(define sample-binding (binding:form #"k" #"v"))

(define-checked make-header/raw header-ok? raw:make-header make-header)
(define header-ok?
  (constructor-holds? "header" raw:make-header make-header 2
                      (list #"Probe-Name" #"probe value") (list header-field header-value)))

(define-checked binding:form/raw binding-ok? raw:binding:form binding:form)
(define binding-ok?
  (constructor-holds? "binding:form" raw:binding:form binding:form 2
                      (list #"k" #"v") (list binding-id binding:form-value)))

;; the bindings are given as a promise, which the contracted accessor wraps: read forced
(define-checked make-request/raw request-ok? raw:make-request make-request)
(define request-ok?
  (constructor-holds? "request" raw:make-request make-request 8
                      (list #"PROBE" sample-url (list sample-header) (delay (list sample-binding))
                            #"post" "192.0.2.1" 8080 "192.0.2.2")
                      (list request-method request-uri request-headers/raw
                            (λ (r) (force (request-bindings/raw-promise r)))
                            request-post-data/raw request-host-ip request-host-port request-client-ip)
                      (list #"PROBE" sample-url (list sample-header) (list sample-binding)
                            #"post" "192.0.2.1" 8080 "192.0.2.2")))

(define-checked request-uri/raw uri-ok? raw:request-uri request-uri)
(define uri-ok?
  (same-holds? "request-uri" raw:request-uri request-uri
               (list (list (make-request #"GET" sample-url '() (delay '()) #f "192.0.2.1" 80 "192.0.2.2")))))

(define-checked header-value/raw value-ok? raw:header-value header-value)
(define value-ok?
  (same-holds? "header-value" raw:header-value header-value (list (list sample-header))))

(define-checked headers-assq*/raw assq-ok? raw:headers-assq* headers-assq*)
(define assq-ok?
  (same-holds? "headers-assq*" raw:headers-assq* headers-assq*
               (list (list #"probe-name" (list (header #"Other" #"x") sample-header))
                     (list #"Absent" (list sample-header))
                     (list #"Probe-Name" '()))))

;; the output procedure is compared by what it writes (the contracted one is a wrapper)
(define-checked response-output/raw output-ok? raw:response-output response-output)
(define output-ok?
  (same-holds? "response-output" raw:response-output response-output
               (list (list (response 200 #"OK" 0 #f '() (λ (out) (write-bytes #"probe" out)))))
               (λ (output) (call-with-output-bytes output))))

;; parameterization-key-probe : any -> (or/c #t string)
;; #t when, in the marks of a continuation within a parameterize, key's first mark is a
;; parameterization in which the parameter has the value the parameterize gave it.
(define probe-parameter (make-parameter 'outside))
(define (parameterization-key-probe key)
  (define p (continuation-mark-set-first
             (parameterize ([probe-parameter 'inside]) (current-continuation-marks)) key #f))
  (cond
    [(not (parameterization? p)) (format "its mark in a continuation is ~.s, not a parameterization" p)]
    [(not (eq? (call-with-parameterization p probe-parameter) 'inside))
     "the parameterization under it is not the continuation's"]
    [else #t]))

;; continuation-parameterization-key : (or/c continuation-mark-key #f)
;; #f where the probe fails: a continuation resumed by a later request then sees, as
;; current-fastcgi-request, the request that captured it (the line says so).
(define continuation-parameterization-key
  (and (assumption-holds? "Racket's parameterization-key ('#%paramz)"
                          (λ () (parameterization-key-probe parameterization-key))
                          "within a resumed continuation, current-fastcgi-request is the request that captured it")
       parameterization-key))
