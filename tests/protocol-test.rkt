#lang racket/base
;; The codec's facade (fastcgi/private/protocol/protocol.rkt) as a whole: management answers, whose
;; records carry encoded pairs. Each codec module has its own test file, named after it:
;; protocol-record-test, protocol-pairs-test, protocol-decoder-test, fast-bytes-test.
(require "lib/protocol-bytes.rkt"
         rackunit
         "../fastcgi/private/protocol/protocol.rkt")

(test-case "management answers: exact GET_VALUES_RESULT, UNKNOWN_TYPE, END_REQUEST bytes"
  (check-equal? (record->bytes 'get-values-result 0
                               (pairs->bytes '(("FCGI_MPXS_CONNS" . "1"))))
                #"\1\n\0\0\0\22\6\0\17\1FCGI_MPXS_CONNS1\0\0\0\0\0\0")
  (check-equal? (record->bytes 'get-values-result 0
                               (pairs->bytes '(("FCGI_MAX_CONNS" . "10") ("FCGI_MAX_REQS" . "50"))))
                #"\1\n\0\0\0\43\5\0\16\2FCGI_MAX_CONNS10\15\2FCGI_MAX_REQS50\0\0\0\0\0")
  (check-equal? (record->bytes 'unknown-type 0 (unknown-type-content 42))
                #"\1\v\0\0\0\b\0\0\52\0\0\0\0\0\0\0")
  (check-equal? (parse-unknown-type (unknown-type-content 42)) 42)
  (check-equal? (parse-unknown-type (unknown-type-content 'stdout)) 'stdout)
  (check-equal? (end-request-content 0 'request-complete) #"\0\0\0\0\0\0\0\0")
  (check-equal? (end-request-content #x01020304 'overloaded) #"\1\2\3\4\2\0\0\0")
  (check-equal? (end-request-content #xFFFFFFFF 'unknown-role) #"\377\377\377\377\3\0\0\0")
  (check-equal? (record->bytes 'end-request 1 (end-request-content 0 'cant-mpx-conn))
                #"\1\3\0\1\0\b\0\0\0\0\0\0\1\0\0\0")
  (define-values (app proto) (parse-end-request #"\0\0\1\0\3\0\0\0"))
  (check-equal? (list app proto) '(256 unknown-role))
  (check-exn protocol-error? (λ () (parse-end-request #"\0\0\0"))))
