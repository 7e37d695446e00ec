#lang racket/base
;; HOSTILE.md 18, 21 and 22: a request's body and its end (STDIN past CONTENT_LENGTH, an
;; ABORT_REQUEST mid-body, the peer gone mid-body or mid-handler), against an in-process
;; engine; each test then checks that a good request is still answered. The shared handler
;; and checks are in tests/lib/hostile.rkt.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

(call-with-engine
 (λ (path srv)
   (test-case "18: STDIN longer than CONTENT_LENGTH: 413, the rest skipped, connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "3") #:stdin (make-bytes 200000 1)))
         (check-status (peer-answer p 1) 413)
         (check-same-connection p)))
     (check-good-request path))

   (test-case "21: ABORT_REQUEST with KEEP_CONN off: one END_REQUEST, then the connection closes"
     (with-peer path
       (λ (p)
         (peer-send! p (begin-bytes 1 'responder #f)
                     (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                     (record->bytes 'stdin 1 (make-bytes 10 1)))
         (check-equal? (next-event) 'started)
         (peer-send! p (abort-bytes 1))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
         (check-pred exn:fail:fastcgi:aborted? (next-event))
         (check-true (peer-eof? p))
         (check-equal? (filter (λ (r) (eq? (record-type r) 'end-request)) (peer-extras p)) '()
                       "END_REQUEST only once")))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:keep? #f #:params (params "MODE" "abort-evt")))
         (check-equal? (next-event) 'started)
         (peer-send! p (abort-bytes 1))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
         (check-equal? (next-event) 'aborted)
         (check-true (peer-eof? p))))
     (check-good-request path))

   (test-case "22: the peer closes mid-body and mid-handler: the handler sees it, all released"
     (define log
       (call-with-log
        (λ ()
          (define p (peer-connect path))
          (peer-send! p (begin-bytes 1)
                      (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                      (record->bytes 'stdin 1 (make-bytes 10 1)))
          (check-equal? (next-event) 'started)
          (peer-close! p)
          (check-pred exn:fail:fastcgi:aborted? (next-event))
          (define q (peer-connect path))
          (peer-send! q (request-bytes 1 #:params (params "MODE" "abort-evt")))
          (check-equal? (next-event) 'started)
          (peer-close! q)
          (check-equal? (next-event) 'aborted)
          (check-released srv))))
     (check-false (memq 'error (levels log)) (format "~s" log))
     (check-good-request path))))
