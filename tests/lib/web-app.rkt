#lang racket/base
;; What the web-server apps of the integration tests (tests/integration/nginx-test.rkt,
;; apache-test.rkt, cgi-fcgi-test.rkt) share: a plain-text answer and a form field.
(require web-server/http
         web-server/http/bindings)
(provide text
         binding-value)

;; text : natural bytes string [(listof header)] -> response
(define (text code message body [headers '()])
  (response/full code message (current-seconds) #"text/plain; charset=utf-8" headers
                 (list (string->bytes/utf-8 body))))

;; binding-value : request symbol -> (or/c string #f)
(define (binding-value req name)
  (define b (assq name (request-bindings req)))
  (and b (string? (cdr b)) (cdr b)))
