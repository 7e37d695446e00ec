#lang racket/base
;; fastcgi/private/util/limits.rkt: each field's default (as the manual's make-limits entry
;; documents it), and each keyword of make-limits setting its own field and no other.
(require racket/list
         rackunit
         "../fastcgi/private/util/limits.rkt")

;; keyword, accessor, documented default, another value
(define fields
  `((#:max-params-bytes ,limits-max-params-bytes ,(* 128 1024) 1000)
    (#:max-params-pairs ,limits-max-params-pairs 1000 10)
    (#:max-body ,limits-max-body ,(* 64 1024 1024) 0)
    (#:max-requests-per-connection ,limits-max-requests-per-connection 100 1)
    (#:max-concurrent ,limits-max-concurrent 1000 3)
    (#:max-connections ,limits-max-connections 1024 5)
    (#:stdin-buffer ,limits-stdin-buffer ,(* 256 1024) 4096)
    (#:connection-buffer ,limits-connection-buffer ,(* 1024 1024) 200000)
    (#:first-byte-timeout ,limits-first-byte-timeout 10 0.5)
    (#:idle-timeout ,limits-idle-timeout 120 1)
    (#:read-timeout ,limits-read-timeout 30 2)
    (#:write-timeout ,limits-write-timeout 30 3)
    (#:request-timeout ,limits-request-timeout #f 4)
    (#:request-memory ,limits-request-memory #f 65536)
    (#:max-queue-delay ,limits-max-queue-delay #f 0.25)
    (#:drain-timeout ,limits-drain-timeout 2 7)))

(test-case "limits: every field's default, in make-limits and default-limits"
  (check-equal? (length fields) (sub1 (vector-length (struct->vector default-limits))) "every field listed")
  (check-equal? (make-limits) default-limits)
  (for ([f (in-list fields)])
    (check-equal? ((second f) default-limits) (third f) (format "~a" (first f)))))

(test-case "limits: each keyword sets its own field, the others keep their defaults"
  (for ([f (in-list fields)])
    (define l (keyword-apply make-limits (list (first f)) (list (fourth f)) '()))
    (for ([g (in-list fields)])
      (check-equal? ((second g) l) (if (eq? g f) (fourth f) (third g))
                    (format "~a set, ~a read" (first f) (first g))))))
