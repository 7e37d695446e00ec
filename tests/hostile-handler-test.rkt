#lang racket/base
;; HOSTILE.md 23 and 24: a handler that raises, hangs, or ignores the break that ends it,
;; against an in-process engine; each test then checks that the connection and a new one
;; still serve. The shared handler and checks are in tests/lib/hostile.rkt.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         (only-in "../fastcgi/private/engine/wire.rkt" server-running)
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

(call-with-engine
 (λ (path srv)
   (test-case "23: a handler raises: 500, one END_REQUEST, escaped error line, connection usable"
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (for ([mode '("raise" "raise-value")] [id '(1 2)])
                (peer-send! p (request-bytes id #:params (params "MODE" mode)))
                (define a (peer-answer p id))
                (check-status a 500)
                (check-equal? (cgi-body (answer-stdout a)) #"500 Internal Server Error\n")
                (check-equal? (answer-app-status a) 0))
              ;; output already left: no 500 page can follow, the request ends (status 1)
              (peer-send! p (request-bytes 3 #:params (params "MODE" "raise-after-output")))
              (define a (peer-answer p 3))
              (check-status a 200)
              (check-equal? (answer-app-status a) 1)
              (check-same-connection p)
              (check-equal? (filter (λ (r) (eq? (record-type r) 'end-request)) (peer-extras p)) '()))))))
     (define errors (filter (λ (v) (eq? (vector-ref v 0) 'error)) log))
     (check-equal? (length errors) 3 (format "~s" log))
     (check-true (for/or ([v errors]) (regexp-match? #rx"boom\\\\x0d\\\\x0aFAKE" (vector-ref v 1))))
     (check-log-clean log)
     (check-good-request path))))

;; a request timeout of its own, apart from 20's write deadline
;; (hostile-timeouts-test.rkt): with both at the same time, the break could end the
;; flooding handler before it reports
(call-with-engine
 #:limits (make-limits #:request-timeout 1 #:idle-timeout 5)
 (λ (path srv)
   (test-case "24: a handler that hangs: 503 at the request timeout; the connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "hang")))
         (check-equal? (next-event) 'started)
         (define t0 (current-inexact-milliseconds))
         (define a (peer-answer p 1 5))
         (check-status a 503)
         (check-true (< (- (current-inexact-milliseconds) t0) 2500))
         (check-same-connection p)))
     (check-true (wait-for 2 (λ () (zero? (unbox (server-running srv))))) "the handler's slot is free")
     (check-good-request path))

   (test-case "24: a handler that ignores the break: its request ends 5 s later, the connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "hang-ignoring-breaks")))
         (check-equal? (next-event) 'started)
         (define a (peer-answer p 1 10))
         ;; nothing of its answer had left: the front still gets a 503 page (an
         ;; END_REQUEST with no STDOUT would be a 502 for nginx)
         (check-true (regexp-match? #rx#"^Status: 503 " (answer-stdout a)) (format "~s" (answer-stdout a)))
         (check-equal? (next-event) 'aborted "the handler learns its request ended")
         (check-same-connection p 2)))
     (check-true (wait-for 2 (λ () (zero? (unbox (server-running srv))))) "the handler's slot is free")
     (check-good-request path))))
