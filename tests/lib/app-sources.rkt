#lang racket/base
;; The apps of the tests that start `raco fastcgi serve` to see it start or fail
;; (fail-fast-test, check-test): one that loads and answers "ok", one that raises at load.
;; And lines, for the one-line errors those tests look for.
(require racket/string)
(provide good-source
         broken-source
         lines)

(define good-source
  (string-append "#lang racket/base\n(require fastcgi)\n(provide fastcgi-handler)\n"
                 "(define (fastcgi-handler r)\n"
                 "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

(define broken-source
  (string-append "#lang racket/base\n(provide fastcgi-handler)\n(define (fastcgi-handler r) (void))\n"
                 "(error 'app \"broken at load\")\n"))

;; lines : string -> (listof string) ; the non-empty lines
(define (lines text) (filter (λ (l) (not (string=? l ""))) (string-split text "\n")))
