#lang racket/base
;; `make reliability` in miniature, in make test: every scenario of
;; tests/reliability/run.rkt at 5% of its duration (3 s each), through a real nginx and the
;; manager. The run itself decides pass or fail for each scenario (no request lost that the
;; fault did not take; the overload shed with fast 503s and recovered; uploads, downloads
;; and descriptors fine after clients left); this test asserts that it passed all of them
;; and that its results name every scenario.
(require racket/file
         racket/runtime-path
         racket/string
         rackunit
         "integration/lib.rkt")

(define-runtime-path run-file "reliability/run.rkt")

(test-case "make reliability at 5% of its durations: every check passes"
  (call-with-temp-dir
   "fcgi-relt"
   (λ (dir)
     (define results (build-path dir "RESULTS.md"))
     (define-values (status out err)
       (run-program (find-executable-path "racket")
                    (list (path->string run-file) "--scale" "0.05" "--results" (path->string results))
                    #:timeout 400))
     (define text (bytes->string/utf-8 out #\?))
     (display text)
     (unless (eqv? status 0) (display (bytes->string/utf-8 err #\?)))
     (check-equal? status 0 "the run passed every check")
     (check-true (file-exists? results))
     (define md (file->string results))
     (for ([name '("steady 100" "steady 1000" "overload 3x" "recovery" "worker SIGKILLed"
                   "handler raises" "handler hangs" "mid-upload" "mid-download"
                   "front restarted" "reload" "reload under POSTs" "recycling by --max-requests"
                   "recycling by --max-memory" "graceful stop" "graceful stop under POSTs")])
       (check-true (string-contains? md name) (format "the results have the ~a row" name)))
     (check-false (regexp-match? #rx"FAIL" md) "no check failed"))))
