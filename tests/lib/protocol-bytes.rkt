#lang racket/base
;; Helpers of the protocol tests (protocol-record, -pairs, -decoder and protocol-test).
(require (only-in "../../fastcgi/private/protocol/protocol.rkt" exn:fail:fastcgi:protocol?))
(provide stream-bytes protocol-error?)

;; stream-bytes : (output-port -> any) -> bytes ; what write! writes
(define (stream-bytes write!)
  (define out (open-output-bytes))
  (write! out)
  (get-output-bytes out))

(define (protocol-error? e) (exn:fail:fastcgi:protocol? e))
