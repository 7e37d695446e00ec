#lang racket/base
;; Loading an application file for `raco fastcgi serve` and `dev`.
;; A servlet app provides `start : request -> response`; a raw app provides
;; `fastcgi-handler : fastcgi-request -> any`. Either may provide `fastcgi-roles` (default
;; '(responder)); a servlet may take 'responder and 'authorizer.
(require racket/lazy-require
         racket/path
         "limits.rkt")
(provide load-app)

;; The web-server adapter, and web-server with it, load only for a servlet: a process
;; that serves a raw app (and the manager, which loads no app) stays without them, about
;; 30 MiB less resident memory (bench/OPTIMISATIONS.md, round 12).
(lazy-require ["web.rkt" (servlet->handler)])

;; load-app : path-string limits -> (values (fastcgi-request -> any) (listof symbol))
(define (load-app file lim)
  (define path (simple-form-path file))
  (unless (file-exists? path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" file))
  (define start (dynamic-require path 'start (λ () #f)))
  (define raw (dynamic-require path 'fastcgi-handler (λ () #f)))
  (define roles (dynamic-require path 'fastcgi-roles (λ () '(responder))))
  (define allowed (if (procedure? start) '(responder authorizer) '(responder authorizer filter)))
  (unless (and (list? roles) (pair? roles) (andmap (λ (r) (memq r allowed)) roles))
    (raise-user-error 'raco-fastcgi "~a: fastcgi-roles must be a non-empty list of ~a, got ~e"
                      file allowed roles))
  (cond
    [(procedure? start) (values (servlet->handler start lim) roles)]
    [(procedure? raw) (values raw roles)]
    [else
     (raise-user-error 'raco-fastcgi
                       "~a provides neither `start` (a servlet: request -> response) nor `fastcgi-handler` (raw)"
                       file)]))
