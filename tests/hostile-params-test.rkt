#lang racket/base
;; HOSTILE.md 5, 11, 12 and 14: what a BEGIN_REQUEST and its PARAMS may carry (an unknown
;; role, pair lengths past the end or of 2 GiB, NUL, CR, LF and invalid UTF-8), against an
;; in-process engine; each test then checks that a good request is still answered on a new
;; connection and, where the connection should stay open, on the same one. The shared
;; handler and checks are in tests/lib/hostile.rkt.
(require rackunit
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

(call-with-engine
 (λ (path srv)
   (test-case "5: unknown role: UNKNOWN_ROLE; kept connection goes on, unkept one closes"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:role 7))
         (define a (peer-answer p 1))
         (check-equal? (answer-protocol-status a) 'unknown-role)
         (check-equal? (answer-stdout a) #"")
         (check-same-connection p)))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:role 65535 #:keep? #f))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'unknown-role)
         (check-true (peer-eof? p))))
     (check-good-request path))

   (test-case "11: pair lengths past the end of the params: 400, no handler, no partial map"
     (define runs (unbox handler-runs))
     (with-peer path
       (λ (p)
         (for ([bad (list #"\4\10NAMEvalu" #"\4" #"\1\1A" #"\200\0\0\4\1ABCDx\5\200")])
           (define good (pairs->bytes (params "GOOD" "1")))
           (peer-send! p (begin-bytes 1) (stream->bytes 'params 1 (bytes-append good bad))
                       (stream->bytes 'stdin 1 #""))
           (check-status (peer-answer p 1) 400))
         (check-equal? (unbox handler-runs) runs "no handler ran")
         (check-same-connection p)))
     (check-good-request path))

   (test-case "12: 4-byte lengths 0x7FFFFFFF and 0xFFFFFFFF rejected; a straddle parses"
     (define runs (unbox handler-runs))
     (with-peer path
       (λ (p)
         (for ([len (list #"\177\377\377\377" #"\377\377\377\377" #"\200\0\377\377")])
           (define before (memory-use))
           (peer-send! p (begin-bytes 1)
                       (stream->bytes 'params 1 (bytes-append len #"\1" #"NAMEV"))
                       (stream->bytes 'stdin 1 #""))
           (check-status (peer-answer p 1) 400)
           (check-true (< (- (memory-use) before) (* 16 1024 1024)) "nothing of 2 GiB allocated"))
         ;; a huge length whose 4 bytes straddle two records
         (peer-send! p (begin-bytes 1) (record->bytes 'params 1 #"\4\377\377")
                     (record->bytes 'params 1 #"\377\377NAME") (record->bytes 'params 1 #"")
                     (stream->bytes 'stdin 1 #""))
         (check-status (peer-answer p 1) 400)
         (check-equal? (unbox handler-runs) runs)
         ;; a legitimate straddle: a 4-byte value length split 2+2, a name split in two
         (define value (make-bytes 300 66))
         (define pair (bytes-append #"\4\200\0\1\54" #"LONG" value))
         (peer-send! p (begin-bytes 1) (record->bytes 'params 1 (subbytes pair 0 3))
                     (record->bytes 'params 1 (subbytes pair 3 7))
                     (record->bytes 'params 1 (subbytes pair 7)) (record->bytes 'params 1 #"")
                     (stream->bytes 'stdin 1 #""))
         (define a (peer-answer p 1))
         (check-status a 200)
         (check-has (regexp (format "\"LONG\"=#\"~a\"" (make-string 300 #\B))) (answer-stdout a))
         (check-same-connection p)))
     (check-good-request path))

   (test-case "14: NUL, CR, LF, ESC and invalid UTF-8 in params: kept as bytes, escaped in logs"
     (define nasty #"a\0b\r\nc\ed\377\376e")
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (peer-send! p (request-bytes 1 #:params (list (cons nasty nasty)
                                                            (cons "REQUEST_URI" nasty)
                                                            (cons "REQUEST_METHOD" nasty))))
              (define a (peer-answer p 1))
              (check-status a 200)
              (check-has (regexp (regexp-quote (format "~s=~s" nasty nasty))) (answer-stdout a))
              ;; the same bytes in a rejected request's log line
              (peer-send! p (request-bytes 2 #:params (list (cons "REQUEST_URI" nasty)
                                                            (cons "CONTENT_LENGTH" nasty))))
              (check-status (peer-answer p 2) 400)
              (check-same-connection p))))))
     (check-true (pair? log))
     (check-log-clean log)
     (check-good-request path))))
