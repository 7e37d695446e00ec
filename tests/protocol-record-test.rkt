#lang racket/base
;; fastcgi/private/protocol/protocol-record.rkt: exact record headers, padding, records written to a
;; port, and BEGIN_REQUEST content both ways.
(require "lib/protocol-bytes.rkt"
         racket/list
         rackunit
         "../fastcgi/private/protocol/protocol-record.rkt")

(test-case "records: exact header bytes and padding"
  (for ([row (in-list
              '((stdout 1 5 #"\1\6\0\1\0\5\3\0")
                (stdin 300 1000 #"\1\5\1\54\3\350\0\0")
                (begin-request 65535 8 #"\1\1\377\377\0\10\0\0")
                (params 1 0 #"\1\4\0\1\0\0\0\0")
                (stdout 1 65535 #"\1\6\0\1\377\377\1\0")
                (42 0 1 #"\1\52\0\0\0\1\7\0")))])
    (check-equal? (apply record-header (drop-right row 1)) (last row) (format "~s" row)))
  (check-equal? (record-header 'stdin 1 65535 255) #"\1\5\0\1\377\377\377\0")
  (check-equal? (for/list ([n '(0 1 7 8 9 15 16 65528 65535)]) (padding-for n))
                '(0 7 1 0 7 1 0 0 1))
  (check-equal? (record->bytes 'stdout 1 #"hello") #"\1\6\0\1\0\5\3\0hello\0\0\0")
  (check-equal? (stream-bytes (λ (o) (write-record 'stderr 2 #"xxabcyy" o 2 5)))
                #"\1\7\0\2\0\3\5\0abc\0\0\0\0\0")
  (check-exn exn:fail:contract? (λ () (record->bytes 'stdout 1 (make-bytes 65536)))))

(test-case "records: an empty stream is just the empty record"
  (check-equal? (stream-bytes (λ (o) (write-stream 'stdout 1 #"" o))) #"\1\6\0\1\0\0\0\0"))

(test-case "begin-request content both ways"
  (check-equal? (begin-request-content 'responder #t) #"\0\1\1\0\0\0\0\0")
  (check-equal? (begin-request-content 'filter #f) #"\0\3\0\0\0\0\0\0")
  (check-equal? (begin-request-content 99 #f) #"\0\143\0\0\0\0\0\0")
  (for ([row '((#"\0\1\1\0\0\0\0\0" responder #t) (#"\0\2\0\0\0\0\0\0" authorizer #f)
               (#"\0\3\377\0\0\0\0\0" filter #t) (#"\1\0\0\0\0\0\0\0" 256 #f))])
    (define-values (role keep?) (parse-begin-request (first row)))
    (check-equal? (list role keep?) (rest row)))
  (check-exn protocol-error? (λ () (parse-begin-request #"\0\1\0\0\0\0\0")))
  (check-exn protocol-error? (λ () (parse-begin-request (make-bytes 9 0)))))
