#lang racket/base
;; fastcgi/private/engine/request-output.rkt: a request's STDOUT, STDERR and end, over pipes
;; (tests/lib/pipe-conn.rkt): a small answer in one write with its END_REQUEST, a large
;; one in whole records, the server's own answer in place of a buffered head, the end at
;; once, writes after the end, the closing trailer of a stopping server; and, end to end,
;; STDERR from the handler and the threads it starts.
(require racket/list
         racket/port
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         (only-in "../fastcgi/private/engine/request.rkt" fastcgi-request-state request-output-started?
                  fastcgi-request-status request-finish! request-end-now!
                  request-respond-status! request-refuse! handler-error-port call-as-handler-of)
         "../fastcgi/private/engine/wire.rkt"
         (submod "../fastcgi/private/engine/wire.rkt" for-tests)
         "lib/connection-handler.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; record-types : peer -> (listof symbol) ; the types of the records until END_REQUEST
(define (record-types p)
  (let loop ([acc '()])
    (define r (peer-read-record p 5))
    (cond [(not (record? r)) (reverse (cons r acc))]
          [(eq? (record-type r) 'end-request) (reverse (cons 'end-request acc))]
          [else (loop (cons (record-type r) acc))])))

(test-case "a small answer stays buffered, then leaves with its empty STDOUT and END_REQUEST"
  (define writes '())
  (define-values (c in out) (make-pipe-conn/ports))
  (define r (make-live-request c 1))
  (define stdout (fastcgi-request-stdout r))
  (write-bytes (bytes-append ok-head #"small") stdout)
  (check-false (byte-ready? in) "nothing sent before the end")
  (check-true (request-finish! r 0 'request-complete))
  (check-false (request-finish! r 0 'request-complete) "once")
  (define p (ports->peer in out))
  (define a (peer-answer p 1))
  (check-equal? (answer-stdout a) (bytes-append ok-head #"small"))
  (check-equal? (answer-stdout-sizes a) (list (+ (bytes-length ok-head) 5) 0) "one record, then the empty one")
  (check-equal? (fastcgi-request-state r) 'done))

(test-case "a large answer, mutable or not: whole records of at most 65535 bytes, nothing lost"
  (for ([imm? '(#f #t)])
    (define-values (c p) (make-pipe-conn))
    (define r (make-live-request c 1))
    (define body (apply bytes (for/list ([i 200000]) (modulo i 251))))
    (define reader (thread (λ () (peer-answer p 1))))
    (define-values (got) (let ([ch (make-channel)])
                           (thread (λ () (channel-put ch (peer-answer p 1))))
                           (write-bytes ok-head (fastcgi-request-stdout r))
                           (write-bytes (if imm? (bytes->immutable-bytes body) body) (fastcgi-request-stdout r))
                           (request-finish! r 0 'request-complete)
                           (sync/timeout 10 ch)))
    (kill-thread reader)
    (check-equal? (answer-stdout got) (bytes-append ok-head body) (format "immutable: ~a" imm?))
    (check-true (andmap (λ (n) (<= n 65535)) (answer-stdout-sizes got)))
    (check-equal? (last (answer-stdout-sizes got)) 0)))

(test-case "request-respond-status!: before anything left, the status page replaces the buffered head"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1))
  (write-bytes #"Status: 200 OK\r\n\r\nhalf an answer" (fastcgi-request-stdout r))
  (request-respond-status! r 503)
  (define a (peer-answer p 1))
  (check-status a 503)
  (check-false (regexp-match? #rx#"half an answer" (answer-stdout a)))
  (check-equal? (fastcgi-request-status r) 503 "the status the access log shows"))

(test-case "request-respond-status!: after some of the answer left, the request just ends, app status 1"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1))
  (define reader (let ([ch (make-channel)]) (thread (λ () (channel-put ch (peer-answer p 1)))) ch))
  (write-bytes ok-head (fastcgi-request-stdout r))
  (write-bytes (make-bytes 70000 65) (fastcgi-request-stdout r))   ; over one record: some left
  (check-true (request-output-started? r))
  (request-respond-status! r 500)
  (define a (sync/timeout 10 reader))
  (check-equal? (cgi-status (answer-stdout a)) 200 "the head that left stays")
  (check-equal? (answer-app-status a) 1))

(test-case "request-refuse!: the status of the reason, the page from cgi.rkt"
  (for ([row (in-list '((body-over 413) (handler-raised 500) (handler-timeout 503) (shed 503)))])
    (define-values (c p) (make-pipe-conn))
    (define r (make-live-request c 1))
    (request-refuse! r (car row))
    (check-status (peer-answer p 1) (cadr row))))

(test-case "request-end-now!: END_REQUEST with the app status, an empty STDOUT first if some left; once"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1))
  (check-true (request-end-now! r 1))
  (check-false (request-end-now! r 1))
  (check-equal? (record-types p) '(end-request) "nothing sent before: no STDOUT")
  (define r2 (make-live-request c 2))
  (write-bytes (make-bytes 70000 65) (fastcgi-request-stdout r2))
  (define reader (let ([ch (make-channel)]) (thread (λ () (channel-put ch (record-types p)))) ch))
  (request-end-now! r2 3)
  (define types (sync/timeout 10 reader))
  (check-equal? (take-right types 2) '(stdout end-request))
  (check-not-false (sync/timeout 0 (fastcgi-request-abort-evt r2)) "the request is aborted"))

(test-case "after the end, writes fail: exn:fail:fastcgi:aborted"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1))
  (request-finish! r 0 'request-complete)
  (check-exn exn:fail:fastcgi:aborted? (λ () (write-bytes #"late" (fastcgi-request-stdout r))))
  (check-exn exn:fail:fastcgi:aborted? (λ () (write-bytes #"late" (fastcgi-request-stderr r)))))

(test-case "STDERR: the request's port, and handler-error-port for the thread that serves it"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1))
  (write-bytes #"own" (fastcgi-request-stderr r))
  (check-eq? (fastcgi-request-stderr r) (fastcgi-request-stderr r) "made once")
  (define t (thread (λ () (call-as-handler-of r (λ () (write-bytes #"+cell" handler-error-port))))))
  (thread-wait t)
  (request-finish! r 0 'request-complete)
  (check-equal? (answer-stderr (peer-answer p 1)) #"own+cell"))

(test-case "a stopping server's last answer on a kept connection ends with an empty GET_VALUES_RESULT"
  (define-values (c p) (make-pipe-conn))
  (set-server-closing?! (conn-server c) #t)
  (define r (make-live-request c 1 #:keep? #t))
  (request-finish! r 0 'request-complete)
  (check-equal? (answer-app-status (peer-answer p 1)) 0)
  (define trailer (peer-read-record p 2))
  (check-equal? (list (record-type trailer) (record-id trailer) (record-content trailer))
                '(get-values-result 0 #"")))

;; -- end to end, through an in-process server ---------------------------------------------
(with-server
  #:limits (make-limits #:max-connections 50 #:max-concurrent 40)
  (λ (path)
    (test-case "STDERR records carry what the handler writes to current-error-port"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "stderr")))
          (define a (peer-answer p 1))
          (check-equal? (answer-stderr a) #"oops: something went wrong")
          (check-equal? (cgi-body (answer-stdout a)) #"fine"))))

    (test-case "STDERR also carries what threads started by the handler write, on later requests too"
      (with-peer path
        (λ (p)
          (for ([id '(1 2)])
            (peer-send! p (request-bytes id #:params (params "MODE" "stderr-thread")))
            (define a (peer-answer p id))
            (check-equal? (answer-stderr a) #"from a thread;own port")))))))
