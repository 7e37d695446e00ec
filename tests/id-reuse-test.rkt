#lang racket/base
;; A front may reuse a request id as soon as it has read that request's END_REQUEST (nginx
;; always uses id 1 and sends its next request on a kept connection at once). A handler
;; thread that has sent END_REQUEST but not yet returned still holds the id in the
;; connection's table for a moment; a new BEGIN_REQUEST with that id, read in that moment,
;; is a new request, not a protocol error (which closed the connection under the front:
;; seen in make reliability, where every handler has a thread of its own). The handler here
;; ends its request and goes on for a second, so the moment is long enough to be certain.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/engine/request.rkt"
         "lib/raw-peer.rkt")

;; A answers and ends its request itself, then goes on; B answers as usual.
(define (handler r)
  (define out (fastcgi-request-stdout r))
  (cond
    [(equal? (fastcgi-param r "MODE") #"A")
     (write-string "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nA" out)
     (flush-output out)
     (request-finish! r 0 'request-complete)
     (sleep 1)]
    [else (write-string "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nB" out)]))

(for ([lim (list (make-limits #:max-queue-delay 30) ; with shedding on, every handler has a thread
                 (make-limits))]
      [what '("handlers in threads" "the event loop")])
  (test-case (format "~a: an id reused right after its END_REQUEST starts a new request" what)
    (call-with-server handler #:limits lim
      (λ (path)
        (with-peer path
          (λ (p)
            (peer-send! p (request-bytes 1 #:params '(("MODE" . "A"))))
            (check-has #rx#"A$" (answer-stdout (peer-answer p 1)))
            ;; at once, the same id, while A's handler still runs
            (peer-send! p (request-bytes 1 #:params '(("MODE" . "B"))))
            (check-has #rx#"B$" (answer-stdout (peer-answer p 1 5)))
            (check-false (peer-eof? p 0.2) "the connection stays open")))))))
