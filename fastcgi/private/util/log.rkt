#lang racket/base
;; The `fastcgi` logger, and escaping so that no untrusted byte reaches a log line raw.
(provide fastcgi-logger
         log-fastcgi-fatal log-fastcgi-error log-fastcgi-warning
         log-fastcgi-info log-fastcgi-debug
         log-escape)

(define-logger fastcgi)

;; log-escape : (or/c bytes? string? any/c) -> string
;; Printable ASCII stays; every other byte (control characters, DEL, non-ASCII, and the
;; backslash itself) becomes \xHH, so a log line is always one line of plain ASCII.
(define (log-escape v)
  (define bs (cond [(bytes? v) v]
                   [(string? v) (string->bytes/utf-8 v)]
                   [else (string->bytes/utf-8 (format "~a" v))]))
  (if (for/and ([b (in-bytes bs)]) (and (<= 32 b 126) (not (= b 92))))
      (bytes->string/latin-1 bs)
      (let ([out (open-output-string)])
        (for ([b (in-bytes bs)])
          (if (and (<= 32 b 126) (not (= b 92)))
              (write-char (integer->char b) out)
              (write-string (string-append "\\x" (if (< b 16) "0" "")
                                           (number->string b 16))
                            out)))
        (get-output-string out))))
