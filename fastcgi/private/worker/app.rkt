#lang racket/base
;; Loading an application file for `raco fastcgi serve` and `dev`.
;; A servlet app provides `start : request -> response`, or follows web-server's servlet
;; module convention (interface-version 'v1, 'v2 or 'stateless; see servlet.rkt); a raw app
;; provides `fastcgi-handler : fastcgi-request -> any`. Either may provide `fastcgi-roles`
;; (default '(responder)); a servlet may take 'responder and 'authorizer.
(require "../util/lazy.rkt"
         racket/path
         "../util/limits.rkt")
(provide load-app
         preload-app
         (struct-out servlet-settings)
         make-servlet-settings
         default-servlet-settings)

;; The web-server adapter, and web-server with it, load only for a servlet: a process
;; that serves a raw app (and the manager, which loads no app) stays without them.
(define-lazy "../servlet/web.rkt" servlet->handler)
(define-lazy "../servlet/servlet.rkt" load-servlet loaded-servlet-run)

;; How servlets keep their continuations (sessions.rkt, servlet.rkt). worker-id: this
;; process's number in the pool, which continuation ids carry (0 alone). memory and
;; timeout: the default continuation manager's (serve/servlet's: 128 MiB, 4 hours).
;; secret: the key that signs stateless servlets' URLs (#f: one made at start);
;; secret-lasting?: whether it outlives the process's pool (it came from --secret-file).
(struct servlet-settings (worker-id memory timeout secret secret-lasting?))

;; make-servlet-settings : keyword ... -> servlet-settings
(define (make-servlet-settings #:worker-id [worker-id 0]
                               #:memory [memory (* 128 1024 1024)]
                               #:timeout [timeout (* 4 60 60)]
                               #:secret [secret #f]
                               #:secret-lasting? [lasting? (and secret #t)])
  (servlet-settings worker-id memory timeout secret lasting?))

(define default-servlet-settings (make-servlet-settings))

;; insta-module? : path -> boolean ; #lang web-server/insta, which starts an HTTP server
;; when loaded (read here: servlet.rkt would load web-server into every process)
(define (insta-module? path)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (call-with-input-file path
      (λ (in)
        (regexp-match? #px#"^(?:\\s|;[^\n]*\n)*#lang[ ]+web-server/insta(?:\\s|$)" (read-bytes 4096 in))))))

;; load-app : path-string limits [servlet-settings] #:warn (string -> void)
;;            -> (values (fastcgi-request -> any) (listof symbol) (or/c loaded-servlet #f))
;; The third value: the servlet as servlet.rkt loaded it, #f for a raw app.
(define (load-app file lim [ss default-servlet-settings] #:warn [warn void])
  (define-values (path kind start raw roles) (app-exports file))
  (case kind
    [(servlet)
     (define s (load-servlet path
                             #:worker-id (servlet-settings-worker-id ss)
                             #:memory (servlet-settings-memory ss)
                             #:timeout (servlet-settings-timeout ss)
                             #:secret (servlet-settings-secret ss)
                             #:secret-lasting? (servlet-settings-secret-lasting? ss)
                             #:warn warn))
     (values (servlet->handler (loaded-servlet-run s) lim) roles s)]
    [else (values raw roles #f)]))

;; preload-app : path-string -> (or/c 'servlet 'raw)
;; The app's module instantiated, and checked as load-app checks it, with nothing made for
;; serving it (no servlet, no continuation manager): what a loader does before it forks
;; the workers (loader.rkt), whose load-app then finds the module there.
(define (preload-app file)
  (define-values (path kind start raw roles) (app-exports file))
  kind)

;; app-exports : path-string -> (values path (or/c 'servlet 'raw) any any (listof symbol))
;; The app file instantiated: its complete path, its kind, its start and fastcgi-handler
;; exports (or #f) and its roles. Raises a user error when it is not an app.
(define (app-exports file)
  (define path (simple-form-path file))
  (unless (file-exists? path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" file))
  (when (insta-module? path)
    (raise-user-error 'raco-fastcgi
                      "~a is written in #lang web-server/insta, which starts an HTTP server of its own: replace its first line with `#lang racket` followed by `(require web-server/servlet) (provide start)`, as web-server's tutorial says for leaving DrRacket"
                      file))
  ;; instantiated first: with a failure thunk, dynamic-require of a name the module does
  ;; not export would not run it, and an error it raises at load would go unseen
  (dynamic-require path #f)
  (define start (dynamic-require path 'start (λ () #f)))
  (define version (dynamic-require path 'interface-version (λ () #f)))
  (define raw (dynamic-require path 'fastcgi-handler (λ () #f)))
  (define roles (dynamic-require path 'fastcgi-roles (λ () '(responder))))
  (define servlet? (or (procedure? start) version))
  (define allowed (if servlet? '(responder authorizer) '(responder authorizer filter)))
  (unless (and (list? roles) (pair? roles) (andmap (λ (r) (memq r allowed)) roles))
    (raise-user-error 'raco-fastcgi "~a: fastcgi-roles must be a non-empty list of ~a, got ~e"
                      file allowed roles))
  (cond
    [servlet? (values path 'servlet start raw roles)]
    [(procedure? raw) (values path 'raw start raw roles)]
    [else
     (raise-user-error 'raco-fastcgi
                       "~a provides neither `start` (a servlet: request -> response) nor `fastcgi-handler` (raw)"
                       file)]))
