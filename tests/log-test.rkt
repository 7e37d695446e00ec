#lang racket/base
;; fastcgi/private/util/log.rkt: the `fastcgi` logger and log-escape, on a table of inputs: no
;; untrusted byte reaches a log line raw. (Where the lines go: logging-test, log-file-test;
;; lines a peer can make many of: log-limit-test.)
(require rackunit
         "../fastcgi/private/util/log.rkt")

(test-case "log-escape: printable ASCII stays, every other byte and the backslash become \\xHH"
  (for ([row (in-list
              (list (list #"GET /index.html?a=1" "GET /index.html?a=1")
                    (list "plain text" "plain text")
                    (list #"" "")
                    (list #"a\r\nFAKE line" "a\\x0d\\x0aFAKE line")
                    (list #"\0\t\e[31m" "\\x00\\x09\\x1b[31m")
                    (list #"del\177" "del\\x7f")
                    (list #"back\\slash" "back\\x5cslash")
                    (list "caf\u00e9" "caf\\xc3\\xa9")          ; a string: its UTF-8 bytes
                    (list #"\377\200" "\\xff\\x80")
                    (list 'a-symbol "a-symbol")                  ; anything else: as ~a shows it
                    (list '(1 "x\ny") "(1 x\\x0ay)")))])
    (check-equal? (log-escape (car row)) (cadr row) (format "~s" (car row)))))

(test-case "log-escape: every result is one line of printable ASCII"
  (define all (apply bytes (for/list ([b 256]) b)))
  (define out (log-escape all))
  (check-true (regexp-match? #px"^[ -~]*$" out))
  (check-equal? (string-length out) (+ 94 (* 4 162)) "94 printable bytes stay, 162 take 4 characters"))

(test-case "the fastcgi logger: its levels reach a receiver, with the topic fastcgi"
  (define rx (make-log-receiver fastcgi-logger 'debug 'fastcgi))
  (log-fastcgi-debug "d ~a" 1)
  (log-fastcgi-info "i ~a" 2)
  (log-fastcgi-warning "w ~a" 3)
  ;; (error and fatal too, but a test would print them on stderr)
  (define got (for/list ([i 3]) (sync/timeout 1 rx)))
  (check-equal? (map (λ (v) (and v (vector-ref v 0))) got) '(debug info warning))
  (check-equal? (map (λ (v) (and v (vector-ref v 1))) got)
                '("fastcgi: d 1" "fastcgi: i 2" "fastcgi: w 3"))
  (check-equal? (logger-name fastcgi-logger) 'fastcgi))
