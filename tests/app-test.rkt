#lang racket/base
;; fastcgi/private/worker/app.rkt: loading the application file, on files written to a temp dir:
;; a raw app, a servlet, their roles, and each mistake's one clear error; and the servlet
;; settings' defaults. (The app served: servlet-test; what loading costs: footprint-test;
;; a broken app at start: fail-fast-test.)
(require racket/file
         rackunit
         "../fastcgi/private/worker/app.rkt"
         "../fastcgi/private/util/limits.rkt")

(define dir (make-temporary-file "fcgi-app-~a" 'directory))

;; app-file : string string -> path ; a file of this text in the temp dir
(define (app-file name text)
  (define f (build-path dir name))
  (call-with-output-file f #:exists 'truncate (λ (o) (write-string text o)))
  f)

;; load-error : path -> string ; the message of the user error load-app raises
(define (load-error f)
  (with-handlers ([exn:fail:user? exn-message])
    (load-app f default-limits)
    "no error"))

(test-case "a raw app: its fastcgi-handler, its roles (Responder by default), no servlet"
  (define-values (h roles s)
    (load-app (app-file "raw.rkt" "#lang racket/base (provide fastcgi-handler) (define (fastcgi-handler r) 'raw)")
              default-limits))
  (check-equal? (h 'r) 'raw)
  (check-equal? roles '(responder))
  (check-false s)
  (define-values (h2 roles2 s2)
    (load-app (app-file "filter.rkt" "#lang racket/base (provide fastcgi-handler fastcgi-roles)
                                      (define fastcgi-roles '(filter responder)) (define (fastcgi-handler r) 'f)")
              default-limits))
  (check-equal? roles2 '(filter responder)))

(test-case "a servlet: a handler made by the adapter, and the servlet as loaded"
  (define-values (h roles s)
    (load-app (app-file "servlet.rkt" "#lang racket/base (require web-server/http) (provide start)
                                       (define (start req) (response/xexpr '(p \"hi\")))")
              default-limits (make-servlet-settings #:worker-id 2)))
  (check-pred procedure? h)
  (check-equal? roles '(responder))
  (check-not-false s))

(test-case "each mistake: one clear line"
  (for ([row (in-list
              (list (list "none.rkt" #f #rx"^raco-fastcgi: application file not found: .*none[.]rkt$")
                    (list "insta.rkt" "#lang web-server/insta\n(define (start r) 1)"
                          #rx"written in #lang web-server/insta, which starts an HTTP server of its own")
                    (list "neither.rkt" "#lang racket/base (define x 1)"
                          #rx"provides neither `start` [(]a servlet: request -> response[)] nor `fastcgi-handler` [(]raw[)]$")
                    (list "roles.rkt" "#lang racket/base (provide fastcgi-handler fastcgi-roles)
                                       (define fastcgi-roles '()) (define (fastcgi-handler r) 1)"
                          #rx"fastcgi-roles must be a non-empty list of [(]responder authorizer filter[)], got '[(][)]$")
                    (list "servlet-filter.rkt" "#lang racket/base (provide start fastcgi-roles)
                                                (define fastcgi-roles '(filter)) (define (start r) 1)"
                          #rx"fastcgi-roles must be a non-empty list of [(]responder authorizer[)], got '[(]filter[)]$")))])
    (define f (if (cadr row) (app-file (car row) (cadr row)) (build-path dir (car row))))
    (check-regexp-match (caddr row) (load-error f) (car row))))

(test-case "an app that raises at load and exports nothing: its own error, not 'provides neither'"
  ;; (dynamic-require with a failure thunk does not run a module for a name it lacks)
  (for ([load (list (λ (f) (load-app f default-limits)) preload-app)] [name '("raises.rkt" "raises2.rkt")])
    (define f (app-file name "#lang racket/base\n(error 'app \"broken at load\")\n"))
    (check-exn #rx"^app: broken at load$" (λ () (load f)))))

(test-case "servlet settings: serve/servlet's defaults; a secret given lasts"
  (define d default-servlet-settings)
  (check-equal? (list (servlet-settings-worker-id d) (servlet-settings-memory d) (servlet-settings-timeout d)
                      (servlet-settings-secret d) (servlet-settings-secret-lasting? d))
                (list 0 (* 128 1024 1024) (* 4 60 60) #f #f))
  (define s (make-servlet-settings #:secret #"0123456789abcdef"))
  (check-true (servlet-settings-secret-lasting? s))
  (check-false (servlet-settings-secret-lasting? (make-servlet-settings #:secret #"0123456789abcdef"
                                                                        #:secret-lasting? #f))))

(delete-directory/files dir)
