#lang racket/base
;; The framing items of HOSTILE.md (1-4, 6, 7, 9, 10) against the connection engine: each
;; hostile input closes the connection without running a handler (or is skipped, or
;; answered), logs why on one escaped line, and a good request is still answered on a new
;; connection. A raw peer (tests/lib/raw-peer.rkt) against an in-process server on a unix
;; socket; the handler is tests/lib/connection-handler.rkt's.
(require rackunit
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/connection-handler.rkt"
         "lib/raw-peer.rkt")

;; -- hostile framing (HOSTILE.md items 1-4, 6, 7, 9, 10) ---------------------------------
(define-values (check-logged check-not-logged) (make-log-checks))

(with-server
  (λ (path)
    ;; check-hostile : bytes (or/c regexp #f) -> void
    ;; The server closes the connection without running a handler, logs the reason, and
    ;; still answers on a new connection.
    (define (check-hostile bs rx #:half-close? [half-close? #f])
      (define runs (unbox handler-runs))
      (with-peer path
        (λ (p)
          (peer-send! p bs)
          (when half-close? (peer-shutdown-write! p))
          (check-true (peer-eof? p 3) (format "~s" bs))
          (check-equal? (filter (λ (r) (eq? (record-type r) 'stdout)) (peer-extras p)) '())))
      (if rx (check-logged rx) (check-not-logged))
      (check-equal? (unbox handler-runs) runs)
      (check-good-request path))

    (test-case "1: fewer than 8 header bytes, then EOF: closed quietly"
      (check-hostile #"\1\1\0\1\0" #f #:half-close? #t)
      (check-hostile #"" #f #:half-close? #t))

    (test-case "2: version other than 1: closed"
      (check-hostile (bytes-append #"\2" (subbytes (begin-bytes 1) 1)) #rx"protocol error.*version 2"))

    (test-case "3: STDIN, PARAMS or DATA before any BEGIN_REQUEST: closed"
      (for ([type '(stdin params data)])
        (check-hostile (record->bytes type 1 #"abc") #rx"protocol error.*before any BEGIN_REQUEST")))

    (test-case "4: BEGIN_REQUEST with id 0, or content length other than 8: closed"
      (check-hostile (begin-bytes 0) #rx"protocol error.*id 0")
      (for ([n '(0 7 9)])
        (check-hostile (record->bytes 'begin-request 1 (make-bytes n 1))
                       #rx"protocol error.*content length")))

    (test-case "3 and 4 from the header alone: closed at once, the declared content not awaited"
      ;; Only the 8-byte header, declaring 65535 bytes of content that never come: the
      ;; header is enough to refuse the record, so the server closes within the 3 s that
      ;; check-hostile waits (first-byte-timeout is 10 s) and grows no buffer for it.
      (for ([type '(stdin params data)])
        (check-hostile (record-header type 1 65535 0) #rx"protocol error.*before any BEGIN_REQUEST"))
      (check-hostile (record-header 'begin-request 0 8 0) #rx"protocol error.*id 0")
      (check-hostile (record-header 'begin-request 1 65535 255) #rx"protocol error.*content length 65535")
      ;; after a request was served on the connection too
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "A" "1")))
          (check-equal? (cgi-status (answer-stdout (peer-answer p 1))) 200)
          (peer-send! p (record-header 'begin-request 2 60000 0))
          (check-true (peer-eof? p 3))))
      (check-logged #rx"protocol error.*content length 60000"))

    (test-case "6: a second BEGIN_REQUEST for a live id: closed"
      (check-hostile (bytes-append (begin-bytes 1) (record->bytes 'params 1 #"\1\1ab") (begin-bytes 1))
                     #rx"protocol error.*second BEGIN_REQUEST"))

    (test-case "7: records for ids that are not live are consumed and skipped"
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1)
                      (record-header 'stdin 9 5 200) #"stray" (make-bytes 200 1)
                      (record->bytes 'params 5 #"\1\1ab") (abort-bytes 7) (record->bytes 'data 4 #"x")
                      (stream->bytes 'params 1 (pairs->bytes (params "OK" "1")))
                      (stream->bytes 'stdin 1 #"body"))
          (check-has #rx#"OK=1\nbody=body$" (answer-stdout (peer-answer p 1)))
          (check-equal? (peer-extras p) '())))
      (check-good-request path))

    (test-case "9: content length 65535 with padding 255, in PARAMS and STDIN"
      (with-peer path
        (λ (p)
          (define pair (pairs->bytes (list (cons "LONG" (make-bytes (- 65535 1 4 4) 97)))))
          (check-equal? (bytes-length pair) 65535)
          (define body (make-bytes 65535 98))
          (peer-send! p (begin-bytes 1)
                      (record-header 'params 1 65535 255) pair (make-bytes 255 9)
                      (record->bytes 'params 1 #"")
                      (record-header 'stdin 1 65535 255) body (make-bytes 255 9)
                      (record->bytes 'stdin 1 #""))
          (define out (cgi-body (answer-stdout (peer-answer p 1))))
          (check-equal? (bytes-length out)
                        (+ (bytes-length #"id=1 role=responder keep=#t\nLONG=\nbody=") 65526 65535))))
      (check-good-request path))

    (test-case "10: unknown type on id 0 answered, on a live id skipped"
      (with-peer path
        (λ (p)
          (peer-send! p (record->bytes 200 0 #""))
          (check-equal? (record-content (peer-read-record p)) #"\310\0\0\0\0\0\0\0")
          ;; types an application sends, or a stream's, on id 0 (a management record):
          ;; not understood as management records, so answered too, as libfcgi does
          (peer-send! p (request-bytes 1 #:params (params "A" "1")))
          (check-equal? (cgi-status (answer-stdout (peer-answer p 1))) 200)
          (for ([type '(stdout stderr end-request get-values-result unknown-type params stdin data abort-request)])
            (peer-send! p (record->bytes type 0 (make-bytes 8 0)))
            (define rec (peer-read-record p))
            (check-equal? (record-type rec) 'unknown-type (format "~a" type))
            (check-equal? (record-id rec) 0)
            (check-equal? (record-content rec) (unknown-type-content type) (format "~a" type)))
          ;; on a live id, an unknown type is skipped and the request goes on
          (peer-send! p (begin-bytes 2) (record->bytes 200 2 #"xyz")
                      (stream->bytes 'params 2 (pairs->bytes (params "B" "2")))
                      (stream->bytes 'stdin 2 #""))
          (define a (peer-answer p 2))
          (check-has #rx#"B=2" (answer-stdout a))
          (check-equal? (peer-extras p) '())))
      (check-good-request path))))

