#lang racket/base
;; fastcgi/private/transport/listen-address.rkt: the forms of a listen address, good ones round-trip,
;; bad ones raise naming the input. No socket is opened.
(require racket/string
         rackunit
         "../fastcgi/private/transport/listen-address.rkt"
         "../fastcgi/private/transport/transport-exn.rkt")

(test-case "parse-listen-address: good forms round-trip"
  (for ([(in expected) (in-hash (hash "unix:/tmp/x.sock" "unix:/tmp/x.sock"
                                      "unix:rel/x.sock" "unix:rel/x.sock"
                                      "127.0.0.1:9000" "127.0.0.1:9000"
                                      "localhost:9000" "localhost:9000"
                                      "[::1]:9000" "[::1]:9000"
                                      "*:9000" "*:9000"
                                      ":9000" "*:9000"
                                      "0.0.0.0:0" "0.0.0.0:0"
                                      "fd:0" "fd:0"))])
    (define spec (parse-listen-address in))
    (check-true (listen-spec? spec))
    (check-equal? (listen-spec->string spec) expected in)
    (check-equal? (parse-listen-address (listen-spec->string spec)) spec in)))

(test-case "parse-listen-address: bad forms raise naming the input"
  (for ([in (list "" "foo" "1.2.3.4:99999" "unix:" "[::1]" "fd:x" "foo:80" "::1:80"
                  "[1.2.3.4]:80" "1.2.3.4:" "1.2.3.4:-1" "unix:a\0b"
                  (string-append "unix:/" (make-string 200 #\a)))])
    (check-exn (lambda (e) (and (exn:fail:fastcgi:transport? e)
                                (string-contains? (exn-message e) (format "~s" in))))
               (lambda () (parse-listen-address in))
               in)))
