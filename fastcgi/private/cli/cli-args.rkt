#lang racket/base
;; The values of the commands' options (serve-cli.rkt, ctl.rkt), read from their text:
;; each one that does not parse is one error line naming its flag, never a stack trace.
(provide size-arg
         size-text
         positive-size-arg
         seconds-arg
         nonnegative-seconds-arg
         points-arg
         count-arg
         natural-arg
         octal-arg
         choice-arg
         log-level-arg
         log-file-arg
         secret-file-arg
         name-or-id
         url-path-arg)

;; size-arg : string string -> natural ; 64m, 512k, 1g, or bytes
(define (size-arg flag s)
  (define m (regexp-match #rx"^([0-9]+)([kKmMgG]?)$" s))
  (unless m (raise-user-error 'raco-fastcgi "~a: expected a size like 1048576, 512k, 64m or 1g, got ~s" flag s))
  (* (string->number (cadr m))
     (case (string-downcase (caddr m)) [("k") 1024] [("m") 1048576] [("g") 1073741824] [else 1])))

;; size-text : natural -> string ; as size-arg reads it: 64m, 512k, 1g, or bytes
(define (size-text n)
  (or (for/first ([unit (in-list '(1073741824 1048576 1024))]
                  [suffix (in-list '("g" "m" "k"))]
                  #:when (and (positive? n) (zero? (remainder n unit))))
        (format "~a~a" (quotient n unit) suffix))
      (number->string n)))

;; positive-size-arg : string string -> positive integer ; as size-arg, 0 refused
(define (positive-size-arg flag s)
  (define n (size-arg flag s))
  (unless (positive? n) (raise-user-error 'raco-fastcgi "~a: expected a size above 0, got ~s" flag s))
  n)

;; seconds-arg : string string -> positive real
(define (seconds-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (positive? n))
    (raise-user-error 'raco-fastcgi "~a: expected a positive number of seconds, got ~s" flag s))
  n)

;; nonnegative-seconds-arg : string string -> nonnegative real
(define (nonnegative-seconds-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (>= n 0))
    (raise-user-error 'raco-fastcgi "~a: expected a number of seconds (0 or more), got ~s" flag s))
  n)

;; points-arg : string string -> nonnegative real ; percentage points
(define (points-arg flag s)
  (define n (string->number s))
  (unless (and (real? n) (>= n 0))
    (raise-user-error 'raco-fastcgi "~a: expected a number of percentage points (0 or more), got ~s" flag s))
  n)

;; count-arg : string string -> positive integer
(define (count-arg flag s)
  (define n (string->number s))
  (unless (exact-positive-integer? n)
    (raise-user-error 'raco-fastcgi "~a: expected a positive integer, got ~s" flag s))
  n)

;; natural-arg : string string -> natural ; 0 or a positive integer
(define (natural-arg flag s)
  (define n (string->number s))
  (unless (exact-nonnegative-integer? n)
    (raise-user-error 'raco-fastcgi "~a: expected an integer (0 or more), got ~s" flag s))
  n)

;; octal-arg : string string -> natural
(define (octal-arg flag s)
  (or (string->number s 8)
      (raise-user-error 'raco-fastcgi "~a: expected an octal mode like 0660, got ~s" flag s)))

;; choice-arg : string string (listof symbol) string -> symbol
(define (choice-arg flag s choices expected)
  (define v (string->symbol s))
  (unless (memq v choices)
    (raise-user-error 'raco-fastcgi "~a: expected ~a, got ~s" flag expected s))
  v)

;; log-level-arg : string -> symbol ; fatal is taken too, though --help does not offer it
(define (log-level-arg s)
  (choice-arg "--log-level" s '(fatal error warning info debug) "error, warning, info or debug"))

;; log-file-arg : string -> string ; a complete path, or - (stdout)
(define (log-file-arg file)
  (if (equal? file "-") file (path->string (path->complete-path file))))

;; secret-file-arg : string -> string ; a complete path to a file that exists
(define (secret-file-arg file)
  (define f (path->complete-path file))
  (unless (file-exists? f) (raise-user-error 'raco-fastcgi "--secret-file: no such file: ~a" file))
  (path->string f))

;; name-or-id : string -> (or/c string natural) ; "33" is a uid/gid, "www-data" a name
(define (name-or-id s)
  (if (regexp-match? #rx"^[0-9]+$" s) (string->number s) s))

;; url-path-arg : string string -> string
(define (url-path-arg flag s)
  (unless (regexp-match? #rx"^/[^?# ]*$" s)
    (raise-user-error 'raco-fastcgi "~a: expected a path starting with /, got ~s" flag s))
  s)
