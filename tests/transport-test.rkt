#lang racket/base
;; The transport layer under the server: its event loop at the descriptor limit. Each
;; module of the layer has its own test file (open-listener-test, listener-test,
;; inherited-socket-test, socket-io-test, listen-address-test, listener-options-test).
(require racket/tcp
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol.rkt"
         "lib/transport.rkt")

(test-case "the server's event loop at the descriptor limit: logs, stops accepting a while, then serves"
  (define address #f)
  (define stop (serve/fastcgi-raw (lambda (r) (write-bytes #"Status: 200 OK\r\n\r\nserved" (fastcgi-request-stdout r)))
                                  #:listen "127.0.0.1:0" #:on-ready (lambda (a) (set! address a))))
  (define port (string->number (cadr (regexp-match #rx":([0-9]+)$" address))))
  ;; connected before the limit, the request waits in the backlog while accept fails
  (define-values (ci co) (tcp-connect "127.0.0.1" port))
  (write-bytes (bytes-append (record->bytes 'begin-request 1 (begin-request-content 'responder #f))
                             (record->bytes 'params 1 #"") (record->bytes 'stdin 1 #""))
               co)
  (flush-output co)
  (define warnings
    (at-fd-limit
     (lambda (release!)
       (sleep 0.35)
       (check-false (sync/timeout 0 ci) "nothing answered while no fd is free"))))
  (check-true (<= 2 warnings 6) (format "~a warnings in 0.35 s" warnings))
  (define d (make-decoder))
  (define out
    (let loop ([acc #""])
      (define r (decoder-next! d))
      (cond
        [(not r) (if (sync/timeout 5 ci) (if (eof-object? (decoder-read! d ci)) acc (loop acc)) acc)]
        [(eq? (record-type r) 'stdout) (loop (bytes-append acc (record-content r)))]
        [else (loop acc)])))
  (check-equal? out #"Status: 200 OK\r\n\r\nserved" "served once fds are free again")
  (close-input-port ci)
  (close-output-port co)
  (stop #:timeout 1))
