#lang racket/base
;; The module convention, interface-version 'v2, for tests/current-test.rkt: run in its own
;; folder (a parameterize around it, which its continuations capture), it suspends once
;; and then answers which raw request it saw at first and which once resumed.
(require web-server/managers/lru
         web-server/servlet
         "../../fastcgi/main.rkt")
(provide interface-version manager start)

(define interface-version 'v2)

(define manager
  (make-threshold-LRU-manager (λ (req) (response/xexpr "expired")) (* 64 1024 1024)))

;; seen : -> (list natural bytes) ; the raw request's id and X param
(define (seen)
  (define r (current-fastcgi-request))
  (list (fastcgi-request-id r) (fastcgi-param r "X")))

(define (start req)
  (define first (seen))
  (send/suspend (λ (k-url) (response/output (λ (out) (write k-url out)))))
  (define later (seen))
  (response/output (λ (out) (write (list first later) out))))
