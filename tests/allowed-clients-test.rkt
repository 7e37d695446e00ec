#lang racket/base
;; fastcgi/private/transport/allowed-clients.rkt: the allowed-clients table (entries, prefixes,
;; IPv4-mapped IPv6) and the warnings logged for invalid entries. No socket is opened;
;; over real connections it is tested in tests/security-test.rkt.
(require rackunit
         "../fastcgi/private/transport/allowed-clients.rkt"
         "../fastcgi/private/util/log.rkt")

(test-case "allowed clients"
  (define table
    '(("127.0.0.1" ("127.0.0.1") ("127.0.0.2" "::1"))
      ("127.0.0.0/8" ("127.9.9.9" "127.0.0.1") ("128.0.0.1" "::1"))
      ("::1" ("::1") ("127.0.0.1" "::2"))
      ("::1/128, 10.0.0.1" ("::1" "10.0.0.1") ("10.0.0.2"))
      ("::ffff:127.0.0.1" ("127.0.0.1") ("127.0.0.2"))
      ("::ffff:10.0.0.0/104" ("10.1.2.3") ("11.0.0.1"))
      ("2001:db8::/32" ("2001:db8::5") ("2001:db9::1" "1.2.3.4"))
      ("10.0.0.0/9 garbage" ("10.127.0.1") ("10.128.0.1" "garbage"))
      ("garbage, ,," () ("127.0.0.1" "::1" "0.0.0.0"))
      ("1.2.3.4/33" () ("1.2.3.4"))
      ("" () ("127.0.0.1" "::1"))))
  (for ([row (in-list table)])
    (define a (parse-allowed-clients (car row)))
    (check-true (client-allowed? a "unix") (car row))
    (for ([peer (in-list (cadr row))])
      (check-true (client-allowed? a peer) (format "~s allows ~a" (car row) peer)))
    (for ([peer (in-list (caddr row))])
      (check-false (client-allowed? a peer) (format "~s denies ~a" (car row) peer)))))

(test-case "allowed clients: invalid entries and an empty result are logged"
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (parse-allowed-clients "garbage, ,,")
  (define messages
    (let loop ([acc '()])
      (define v (sync/timeout 0.5 receiver))
      (if v (loop (cons (vector-ref v 1) acc)) (reverse acc))))
  (check-true (for/or ([m messages]) (regexp-match? #rx"invalid entry \"garbage\"" m)))
  (check-true (for/or ([m messages]) (regexp-match? #rx"every TCP client is denied" m))))
