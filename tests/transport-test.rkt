#lang racket/base
;; fastcgi/private/transport/transport.rkt, the transport layer's one face: it passes on its modules'
;; own procedures; and the layer under a server: the event loop at the descriptor limit.
;; Each module of the layer has its own test file (open-listener-test, listener-test,
;; inherited-socket-test, socket-io-test, listen-address-test, listener-options-test,
;; private-socket-test, allowed-clients-test, transport-exn-test).
(require racket/tcp
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/transport.rkt"
         (prefix-in t: "../fastcgi/private/transport/transport.rkt")
         (prefix-in m: (combine-in "../fastcgi/private/transport/open-listener.rkt"
                                   "../fastcgi/private/transport/listener.rkt"
                                   "../fastcgi/private/transport/inherited-socket.rkt"
                                   "../fastcgi/private/transport/socket-io.rkt"
                                   "../fastcgi/private/transport/private-socket.rkt"
                                   "../fastcgi/private/transport/allowed-clients.rkt"
                                   "../fastcgi/private/transport/listen-address.rkt")))

(test-case "transport.rkt passes on each module's own procedures"
  (for ([pair (list (cons t:open-listener m:open-listener) (cons t:listener-for m:listener-for)
                    (cons t:listener-accept m:listener-accept) (cons t:listener-close! m:listener-close!)
                    (cons t:inherited-listener m:inherited-listener)
                    (cons t:fd-listening-socket? m:fd-listening-socket?)
                    (cons t:socket-read! m:socket-read!) (cons t:socket-write! m:socket-write!)
                    (cons t:open-private-listener m:open-private-listener)
                    (cons t:private-connect m:private-connect)
                    (cons t:client-allowed? m:client-allowed?)
                    (cons t:parse-listen-address m:parse-listen-address))])
    (check-eq? (car pair) (cdr pair) (format "~a" (object-name (car pair))))))

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
