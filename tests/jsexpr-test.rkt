#lang racket/base
;; jsexpr.rkt against the `json` collection: what one writes the other reads back equal,
;; both ways, for a table of values and for generated ones; malformed text is an
;; exn:fail:read, never a wrong value.
(require (prefix-in j: json)
         rackunit
         "../fastcgi/private/util/jsexpr.rkt")

(define table
  (list (hasheq 'a 1 'b (list 1.5 -2 "x\"y\\z\n\t\r\b\f\u0001\u007f é 😀 /" #t #f 'null) 'c (hasheq))
        '() "" 0 -12 1e21 3.25 123456789012345678901234567890
        (hasheq 'workers (list (hasheq 'pid 12 'state "idle" 'memory 'null)))))

;; gen : natural -> jsexpr ; a pseudo-random value of depth at most d
(define (gen d)
  (case (if (zero? d) (random 5) (random 7))
    [(0) (- (random 2000000) 1000000)]
    [(1) (/ (- (random 2000000) 1000000) 64.0)]
    [(2) (list->string (for/list ([i (random 8)]) (integer->char (random-char))))]
    [(3) (list-ref '(#t #f null) (random 3))]
    [(4) ""]
    [(5) (for/list ([i (random 4)]) (gen (sub1 d)))]
    [else (for/hasheq ([i (random 4)]) (values (string->symbol (format "k~a" (random 100))) (gen (sub1 d))))]))
(define (random-char)
  (let loop () (define n (random #x11000)) (if (<= #xD800 n #xDFFF) (loop) n)))

(test-case "what jsexpr.rkt writes, json reads back equal, and the other way"
  (random-seed 27)
  (for ([v (in-sequences (in-list table) (in-producer (λ () (gen 4))))] [i (in-range 600)])
    (check-equal? (j:string->jsexpr (jsexpr->string v)) v (format "written: ~s" v))
    (check-equal? (string->jsexpr (j:jsexpr->string v)) v (format "read: ~s" v))
    (check-equal? (bytes->jsexpr (jsexpr->bytes v)) v)))

(test-case "read-json reads one value from a port and eof after it"
  (define in (open-input-string " {\"a\": [1, 2.5e1, \"\\ud83d\\ude00\"]} \n [true] "))
  (check-equal? (read-json in) (hasheq 'a (list 1 25.0 "😀")))
  (check-equal? (read-json in) '(#t))
  (check-true (eof-object? (read-json in))))

(test-case "malformed JSON is exn:fail:read"
  (for ([s (in-list '("{\"a\":1} x" "{\"a\" 1}" "[1,]" "\"abc" "tru" "01x" "{1:2}" "" "[\"\\q\"]"))])
    (check-exn exn:fail:read? (λ () (string->jsexpr s)) s)))

(test-case "what is not a jsexpr is refused"
  (check-exn exn:fail:contract? (λ () (jsexpr->string (vector 1))))
  (check-exn exn:fail:contract? (λ () (jsexpr->string +inf.0))))
