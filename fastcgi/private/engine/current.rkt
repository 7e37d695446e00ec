#lang racket/base
;; current-fastcgi-request, in a module of its own: the public API (main.rkt) provides it
;; without loading the web-server adapter (web.rkt), which a raw application never needs.
(provide current-fastcgi-request)

;; current-fastcgi-request : (parameter/c (or/c fastcgi-request #f))
;; Inside a servlet: the raw FastCGI request being served (params, role, abort-evt).
(define current-fastcgi-request (make-parameter #f))
