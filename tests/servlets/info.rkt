#lang info
;; These are applications that tests/servlet-test.rkt, tests/servlet-hostile-test.rkt and
;; tests/sessions-test.rkt serve, not tests: `raco test tests` must not run them (insta.rkt
;; would start an HTTP server and block).
(define test-omit-paths 'all)
