#lang racket/base
;; fastcgi/private/protocol/protocol-pairs.rkt, the name-value pairs (PARAMS): byte-vector tables in
;; the style of Go's net/http/fcgi fcgi_test.go, hostile pair lengths, and parse-params,
;; check-params and params-ref against the plain way.
(require "lib/protocol-bytes.rkt"
         racket/list
         rackunit
         (only-in "../fastcgi/private/protocol/protocol-record.rkt" exn:fail:fastcgi:protocol?)
         "../fastcgi/private/protocol/protocol-pairs.rkt")

;; -- name-value pairs ---------------------------------------------------------------------
(define name127 (make-bytes 127 (char->integer #\n)))
(define name128 (make-bytes 128 (char->integer #\N)))
(define value200 (make-bytes 200 (char->integer #\v)))

(test-case "pairs: exact encodings with 1- and 4-byte lengths"
  (for ([row (in-list
              `(((("a" . "b")) #"\1\1ab")
                (((#"" . #"")) #"\0\0")
                ((("SCRIPT_NAME" . "/x")) #"\v\2SCRIPT_NAME/x")
                (((,name127 . #"x")) ,(bytes-append #"\177\1" name127 #"x"))
                (((,name128 . #"x")) ,(bytes-append #"\200\0\0\200\1" name128 #"x"))
                (((,name127 . ,value200)) ,(bytes-append #"\177\200\0\0\310" name127 value200))
                (((,name128 . ,value200))
                 ,(bytes-append #"\200\0\0\200\200\0\0\310" name128 value200))
                ((("A" . "1") ("B" . "")) #"\1\1A1\1\0B")))])
    (define pairs (first row))
    (define expected (second row))
    (check-equal? (pairs->bytes pairs) expected)
    (define (->b v) (if (string? v) (string->bytes/utf-8 v) v))
    (check-equal? (parse-pairs expected)
                  (for/list ([p pairs]) (cons (->b (car p)) (->b (cdr p)))))))

(test-case "pairs: round trip keeps order and duplicates; start/end bounds"
  (define pairs (for/list ([i 300])
                  (cons (make-bytes (modulo (* i 7) 300) (modulo i 256))
                        (make-bytes (modulo (* i 13) 500) (modulo (* i 3) 256)))))
  (define all (append pairs (list (cons #"DUP" #"1") (cons #"DUP" #"2"))))
  (check-equal? (parse-pairs (pairs->bytes all)) all)
  (define bs (bytes-append #"junk" (pairs->bytes '(("X" . "y"))) #"tail"))
  (check-equal? (parse-pairs bs 4 (- (bytes-length bs) 4)) '((#"X" . #"y"))))

(test-case "pairs: declared lengths beyond what remains are protocol errors"
  (for ([bad (in-list
              (list #"\1"                            ; value length missing
                    #"\5\1abc"                       ; name runs past the end
                    #"\1\5ab"                        ; value runs past the end
                    #"\1\1ab\2"                      ; a good pair, then a truncated one
                    #"\200\0\0"                      ; truncated 4-byte name length
                    #"\1\200\0\0\1"                  ; truncated 4-byte value length
                    #"\200\0\1\0\1abc"               ; 256-byte name, 3 bytes present
                    (bytes-append #"\177\1" name127)))]) ; value byte missing
    (check-exn protocol-error? (λ () (parse-pairs bad)) (format "~s" bad))))

(test-case "pairs: lengths near 2^31 are rejected at once, without allocating"
  (for ([bad (in-list
              (list #"\377\377\377\377\1ab"          ; name length #x7FFFFFFF
                    #"\1\377\377\377\377ab"          ; value length #x7FFFFFFF
                    #"\377\377\377\377\377\377\377\377ab" ; both: no 32-bit overflow
                    #"\200\0\0\1\377\377\377\377a"   ; sum wraps in 32 bits only
                    #"\177\377\377\377\377"))])      ; 127-byte name, huge value
    (define t0 (current-inexact-milliseconds))
    (check-exn protocol-error? (λ () (parse-pairs bad)) (format "~s" bad))
    (check-true (< (- (current-inexact-milliseconds) t0) 50) "took too long")))

(test-case "pairs: max-pairs"
  (define three (pairs->bytes '(("a" . "1") ("b" . "2") ("c" . "3"))))
  (check-equal? (length (parse-pairs three #:max-pairs 3)) 3)
  (check-exn protocol-error? (λ () (parse-pairs three #:max-pairs 2)))
  (check-equal? (parse-pairs #"" #:max-pairs 0) '()))

;; parse-params (which parse-pairs calls) against the plain way, written here: the same
;; pairs, or the same message
(define (read-length bs i end)
  (cond
    [(>= i end) (error "params: truncated name-value length")]
    [(< (bytes-ref bs i) 128) (values (bytes-ref bs i) (+ i 1))]
    [(> (+ i 4) end) (error "params: truncated 4-byte name-value length")]
    [else (values (+ (* (bitwise-and (bytes-ref bs i) #x7f) 16777216) (* (bytes-ref bs (+ i 1)) 65536)
                     (* (bytes-ref bs (+ i 2)) 256) (bytes-ref bs (+ i 3)))
                  (+ i 4))]))
(define (parse-pairs/message bs max)
  (with-handlers ([exn:fail? exn-message])
    (let loop ([i 0] [acc '()] [count 0])
      (cond
        [(= i (bytes-length bs)) (reverse acc)]
        [(>= count max) (error (format "params: more than ~a name-value pairs" max))]
        [else
         (define-values (nlen i1) (read-length bs i (bytes-length bs)))
         (define-values (vlen i2) (read-length bs i1 (bytes-length bs)))
         (when (> (+ i2 nlen vlen) (bytes-length bs))
           (error (format "params: pair lengths ~a+~a exceed the ~a bytes left"
                          nlen vlen (- (bytes-length bs) i2))))
         (loop (+ i2 nlen vlen)
               (cons (cons (subbytes bs i2 (+ i2 nlen)) (subbytes bs (+ i2 nlen) (+ i2 nlen vlen))) acc)
               (add1 count))]))))

;; Streams for the params tests: bad ones (truncated lengths, pairs past the end) and a
;; good one with 1- and 4-byte lengths and a name sent twice; random pairs of a few
;; names and values, sometimes cut short, and random junk with 4-byte lengths.
(define bad-ones
  (list #"\1" #"\5\1abc" #"\1\5ab" #"\1\1ab\2" #"\200\0\0" #"\1\200\0\0\1" #"\200\0\1\0\1abc"
        #"\377\377\377\377\1ab" #"\1\377\377\377\377ab" #"\200\0\0\1\377\377\377\377a"))
(define good (pairs->bytes `((,name127 . #"") (,name128 . ,value200) (#"A" . #"1") (#"A" . #"2"))))
(define param-names '(#"A" #"B" #"HTTP_HOST" #"" #"X"))
(define param-values '(#"" #"1" #"22" #"value"))
(define (random-pairs)
  (for/list ([i (in-range (random 6))])
    (cons (list-ref param-names (random (length param-names)))
          (list-ref param-values (random (length param-values))))))
(define (maybe-cut b)
  (if (and (> (bytes-length b) 0) (zero? (random 3))) (subbytes b 0 (random (bytes-length b))) b))
(define (random-junk)
  (apply bytes (for/list ([i (in-range (random 12))])
                 (if (zero? (random 4)) (+ 128 (random 2)) (random 4)))))
;; plain-count : bytes natural -> (or/c natural string) ; what check-params should say
(define (plain-count bs max)
  (define plain (parse-pairs/message bs max))
  (if (string? plain) plain (length plain)))

(test-case "parse-params: as parse-pairs on good and bad streams, immutable strings"
  (for ([bs (in-list (cons good bad-ones))])
    (check-equal? (parse-params bs 1000 '()) (parse-pairs/message bs 1000) (format "~s" bs)))
  (for ([p (in-list (parse-params good 1000 '()))])
    (check-true (and (immutable? (car p)) (immutable? (cdr p)))))
  (define three (pairs->bytes '(("a" . "1") ("b" . "2") ("c" . "3"))))
  (check-equal? (parse-params three 2 '()) "params: more than 2 name-value pairs")
  (check-equal? (parse-params three 3 '()) (parse-pairs three)))

(test-case "parse-params: equal names and values are the previous request's strings"
  (define first (parse-params (pairs->bytes '(("HOST" . "x") ("PORT" . "1") ("URI" . "/a"))) 100 '()))
  (define second (parse-params (pairs->bytes '(("HOST" . "x") ("PORT" . "2") ("URI" . "/a") ("NEW" . "v")))
                               100 first))
  (check-equal? second '((#"HOST" . #"x") (#"PORT" . #"2") (#"URI" . #"/a") (#"NEW" . #"v")))
  (check-eq? (car (list-ref second 0)) (car (list-ref first 0)))
  (check-eq? (cdr (list-ref second 0)) (cdr (list-ref first 0)))
  (check-eq? (car (list-ref second 1)) (car (list-ref first 1)))
  (check-not-eq? (cdr (list-ref second 1)) (cdr (list-ref first 1)))
  (check-eq? (cdr (list-ref second 2)) (cdr (list-ref first 2)))
  ;; names that moved are compared by place only: equal, not shared
  (define third (parse-params (pairs->bytes '(("URI" . "/a") ("HOST" . "x"))) 100 first))
  (check-equal? third '((#"URI" . #"/a") (#"HOST" . #"x")))
  (check-not-eq? (car (list-ref third 0)) (car (list-ref first 2)))
  ;; a pair the same in name and value is the previous pair; an all-same tail, that tail
  (check-eq? (list-ref second 0) (list-ref first 0))
  (check-not-eq? (list-ref second 1) (list-ref first 1))
  (define fourth (parse-params (pairs->bytes '(("HOST" . "y") ("PORT" . "2") ("URI" . "/a") ("NEW" . "v")))
                               100 second))
  (check-equal? fourth '((#"HOST" . #"y") (#"PORT" . #"2") (#"URI" . #"/a") (#"NEW" . #"v")))
  (check-eq? (cdr fourth) (cdr second) "the tail after the changed pair is the previous one")
  (check-eq? (parse-params (pairs->bytes '(("HOST" . "y") ("PORT" . "2") ("URI" . "/a") ("NEW" . "v")))
                           100 fourth)
             fourth "the same params again: the same list")
  (check-equal? (parse-params (pairs->bytes '(("HOST" . "y") ("PORT" . "2"))) 100 fourth)
                '((#"HOST" . #"y") (#"PORT" . #"2")) "a shorter list is not the previous one's"))

(test-case "parse-params: random streams, with and without a previous request"
  (for ([k (in-range 2000)])
    (define prev (parse-params (pairs->bytes (random-pairs)) 100 '()))
    (define bs (maybe-cut (pairs->bytes (random-pairs))))   ; sometimes cut short: bad
    (define max (random 7))
    (check-equal? (parse-params bs max prev) (parse-pairs/message bs max) (format "~s max ~a" bs max))
    ;; and garbage, 4-byte lengths included
    (define junk (random-junk))
    (check-equal? (parse-params junk 100 prev) (parse-pairs/message junk 100) (format "~s" junk))))


;; check-params and params-ref against parse-pairs/message: the same count or the same
;; message, and the value of the first pair of that name
(define (first-value pairs name)
  (cond [(assoc name pairs) => cdr] [else #f]))
(test-case "check-params and params-ref: as the plain way, on chosen and random streams"
  (for ([bs (in-list (cons good bad-ones))])
    (check-equal? (check-params bs 1000) (plain-count bs 1000) (format "~s" bs)))
  (check-equal? (params-ref good 0 (bytes-length good) #"A") #"1" "the first of two")
  (check-true (immutable? (params-ref good 0 (bytes-length good) #"A")))
  (check-equal? (params-ref good 0 (bytes-length good) name128) value200 "4-byte lengths")
  (check-equal? (params-ref good 0 (bytes-length good) name127) #"")
  (check-false (params-ref good 0 (bytes-length good) #"B"))
  (check-false (params-ref good 0 (bytes-length good) #"AA"))
  (define three (pairs->bytes '(("a" . "1") ("b" . "2") ("c" . "3"))))
  (check-equal? (check-params three 2) "params: more than 2 name-value pairs")
  (check-equal? (check-params three 3) 3)
  (check-equal? (check-params #"" 0) 0)
  ;; a slice of a larger buffer: only bs[start, end) is read
  (define framed (bytes-append #"\3\3xyzabc" three #"\1\1cZ"))
  (check-equal? (check-params framed 10 8 (+ 8 (bytes-length three))) 3)
  (check-equal? (params-ref framed 8 (+ 8 (bytes-length three)) #"c") #"3")
  (check-false (params-ref framed 8 (+ 8 (bytes-length three)) #"xyz"))
  (for ([k (in-range 2000)])
    (define pairs (random-pairs))
    (define whole (pairs->bytes pairs))
    (define bs (maybe-cut whole))
    (define max (random 7))
    (check-equal? (check-params bs max) (plain-count bs max) (format "~s max ~a" bs max))
    (for ([name (in-list param-names)])
      (check-equal? (params-ref whole 0 (bytes-length whole) name) (first-value pairs name)
                    (format "~s in ~s" name whole)))
    (define junk (random-junk))
    (check-equal? (check-params junk 100) (plain-count junk 100) (format "~s" junk))))
