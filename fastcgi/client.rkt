#lang racket/base
;; The public FastCGI client (`fastcgi/client`): the implementation and its contracts are in
;; private/transport/client.rkt, where `raco fastcgi request` and `raco fastcgi dev` use it
;; too without importing upward from the private layers.
(require "private/transport/client.rkt")
(provide (all-from-out "private/transport/client.rkt"))
