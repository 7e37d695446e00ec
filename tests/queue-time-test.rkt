#lang racket/base
;; fastcgi/private/protocol/queue-time.rkt, by tables: the forms of HTTP_X_REQUEST_START that fronts
;; send, what is malformed, and the wait (clamped at 0; a time far ahead ignored).
(require rackunit
         "../fastcgi/private/protocol/queue-time.rkt")

;; rows: the param's value -> its wall-clock milliseconds, or #f
(define start-rows
  (list (list #"t=1700000000.123" 1700000000123.0)        ; nginx ${msec}
        (list #"1700000000.123" 1700000000123.0)
        (list #"t=1700000000.5" 1700000000500.0)
        (list #"t=1700000000" 1700000000000.0)            ; seconds
        (list #"t=1700000000123" 1700000000123.0)         ; milliseconds
        (list #"t=1700000000123456" 1700000000123.456)    ; microseconds (Apache's %t)
        (list #"1700000000123456789" 1700000000123.4568)  ; nanoseconds
        (list #" t=1700000000123 " 1700000000123.0)
        (list #f #f) (list #"" #f) (list #"t=" #f) (list #"t=abc" #f) (list #"t=-1700000000" #f)
        (list #"t=1700000000.123.4" #f) (list #"T=1700000000" #f) (list #"t=17e8" #f)
        (list #"t=12" #f)                                  ; 1970: a unit misread
        (list #"t=99999999999999999999" #f)                ; 20 digits
        (list #"t=1700000000 t=1700000001" #f)))

(test-case "request-start-ms: each form, and what is not one"
  (for ([row (in-list start-rows)])
    (define got (request-start-ms (car row)))
    (if (cadr row)
        (check-within got (cadr row) 0.001 (format "~s" (car row)))
        (check-false got (format "~s" (car row))))))

;; rows: value, taken at (wall ms) -> wait in ms, or #f
(define wait-rows
  (list (list #"t=1700000000.100" 1700000000350.0 250.0)
        (list #"t=1700000000100" 1700000000100.0 0.0)
        (list #"t=1700000000100" 1700000000000.0 0.0)     ; ahead by less than the tolerance
        (list #"t=1700000000100" 1699999999000.0 #f)      ; ahead by more: ignored
        (list #"t=1700000000100" 1700003600100.0 3600000.0)
        (list #"t=bad" 1700000000100.0 #f)
        (list #f 1700000000100.0 #f)))

(test-case "queue-time-ms: the wait, at least 0; far in the future or malformed: #f"
  (for ([row (in-list wait-rows)])
    (define got (queue-time-ms (car row) (cadr row)))
    (if (caddr row)
        (check-within got (caddr row) 0.01 (format "~s" row))
        (check-false got (format "~s" row)))))
