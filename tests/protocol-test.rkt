#lang racket/base
;; The codec (fastcgi/private/protocol.rkt): byte-vector tables in the style of Go's
;; net/http/fcgi fcgi_test.go, hostile pair lengths, and a random-chunking property.
(require racket/list
         rackunit
         "../fastcgi/private/protocol.rkt")

;; decode-all : bytes -> (listof record) ; the whole stream fed at once
(define (decode-all bs)
  (define d (make-decoder))
  (decoder-feed! d bs)
  (begin0 (drain! d '()) (check-equal? (decoder-buffered d) 0 "bytes left over")))

;; drain! : decoder (listof record) -> (listof record) ; acc newest first, result in order
(define (drain! d acc)
  (define r (decoder-next! d))
  (if r (drain! d (cons r acc)) (reverse acc)))

;; stream-bytes : (output-port -> any) -> bytes
(define (stream-bytes write!)
  (define out (open-output-bytes))
  (write! out)
  (get-output-bytes out))

(define (protocol-error? e) (exn:fail:fastcgi:protocol? e))

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

(test-case "bytes-range=?: as comparing the two slices, at every offset and length"
  (define a (apply bytes (for/list ([i 40]) (random 3))))
  (define b (apply bytes (for/list ([i 40]) (random 3))))
  (for* ([i (in-range 0 12)] [j (in-range 0 12)] [n (in-range 0 28)])
    (check-equal? (bytes-range=? a i b j n) (equal? (subbytes a i (+ i n)) (subbytes b j (+ j n)))
                  (format "~s ~a ~s ~a ~a" a i b j n))
    (check-true (bytes-range=? a i a i n)))
  (check-true (bytes-range=? #"abcdefgh" 0 #"xabcdefghx" 1 8))
  (check-false (bytes-range=? #"abcdefgh" 0 #"xabcdefgXx" 1 8) "last byte differs")
  (check-false (bytes-range=? #"abcdefgh" 0 #"xaXcdefghx" 1 8) "within the first 4-byte step"))

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

;; -- records ------------------------------------------------------------------------------
(test-case "records: exact header bytes and padding"
  (for ([row (in-list
              '((stdout 1 5 #"\1\6\0\1\0\5\3\0")
                (stdin 300 1000 #"\1\5\1\54\3\350\0\0")
                (begin-request 65535 8 #"\1\1\377\377\0\10\0\0")
                (params 1 0 #"\1\4\0\1\0\0\0\0")
                (stdout 1 65535 #"\1\6\0\1\377\377\1\0")
                (42 0 1 #"\1\52\0\0\0\1\7\0")))])
    (check-equal? (apply record-header (drop-right row 1)) (last row) (format "~s" row)))
  (check-equal? (record-header 'stdin 1 65535 255) #"\1\5\0\1\377\377\377\0")
  (check-equal? (for/list ([n '(0 1 7 8 9 15 16 65528 65535)]) (padding-for n))
                '(0 7 1 0 7 1 0 0 1))
  (check-equal? (record->bytes 'stdout 1 #"hello") #"\1\6\0\1\0\5\3\0hello\0\0\0")
  (check-equal? (stream-bytes (λ (o) (write-record 'stderr 2 #"xxabcyy" o 2 5)))
                #"\1\7\0\2\0\3\5\0abc\0\0\0\0\0")
  (check-exn exn:fail:contract? (λ () (record->bytes 'stdout 1 (make-bytes 65536)))))

(test-case "records: content 65535 with padding 255, then the next record"
  (define content (apply bytes (for/list ([i 65535]) (modulo i 251))))
  (define bs (bytes-append (record-header 'stdin 7 65535 255) content (make-bytes 255 #xAA)
                           (record->bytes 'stdin 7 #"")))
  (check-equal? (bytes-length bs) (+ 8 65535 255 8))
  (define recs (decode-all bs))
  (check-equal? (length recs) 2)
  (check-equal? (bytes-length (record-content (first recs))) 65535)
  (check-equal? (first recs) (record 'stdin 7 content))
  (check-equal? (second recs) (record 'stdin 7 #"")))

(test-case "records: a 66000-byte stream is 65528 + 472 bytes, then the empty record"
  ;; Go's test splits at 65535 with padding; this codec writes 65528-byte records, which
  ;; need no padding. (66000 - 65528 = 472, also a multiple of 8.)
  (define content (apply bytes (for/list ([i 66000]) (modulo i 256))))
  (define bs (stream-bytes (λ (o) (write-stream 'stdin 300 content o))))
  (check-equal? bs (bytes-append #"\1\5\1\54\377\370\0\0" (subbytes content 0 65528)
                                 #"\1\5\1\54\1\330\0\0" (subbytes content 65528)
                                 #"\1\5\1\54\0\0\0\0"))
  (define recs (decode-all bs))
  (check-equal? (map (λ (r) (bytes-length (record-content r))) recs) '(65528 472 0))
  (check-equal? (apply bytes-append (map record-content recs)) content)
  (define odd (stream-bytes (λ (o) (write-stream 'stdout 1 (make-bytes 72001 1) o #:end? #f))))
  (check-equal? (map (λ (r) (bytes-length (record-content r))) (decode-all odd)) '(65528 6473))
  (check-equal? (bytes-length odd) (+ 8 65528 8 6473 7)))

(test-case "records: an empty stream is just the empty record"
  (check-equal? (stream-bytes (λ (o) (write-stream 'stdout 1 #"" o))) #"\1\6\0\1\0\0\0\0"))

(test-case "records: a version other than 1 is a protocol error"
  (for ([v '(0 2 255)])
    (define d (make-decoder))
    (decoder-feed! d (bytes v 1 0 1 0 8 0 0))
    (check-exn protocol-error? (λ () (decoder-next! d)) (format "version ~a" v))))

(test-case "records: partial header and partial content give #f until complete"
  (define bs (record->bytes 'params 9 #"abc"))
  (define d (make-decoder))
  (for ([b (in-bytes (subbytes bs 0 (sub1 (bytes-length bs))))])
    (decoder-feed! d (bytes b))
    (check-false (decoder-next! d)))
  (decoder-feed! d (subbytes bs (sub1 (bytes-length bs))))
  (check-equal? (decoder-next! d) (record 'params 9 #"abc"))
  (check-false (decoder-next! d)))

(test-case "decoder-header-problem: what the header alone refuses, before any content"
  (define (problem header begun?)
    (define d (make-decoder))
    (decoder-feed! d header)
    (decoder-header-problem d begun?))
  (check-false (problem #"\1\5\0\1\377" #f) "a partial header shows nothing yet")
  (for ([type '(params stdin data abort-request)])
    (check-equal? (problem (record-header type 1 65535 0) #f)
                  (format "~a record before any BEGIN_REQUEST" type))
    (check-false (problem (record-header type 1 65535 0) #t)))
  (check-equal? (problem (record-header 'begin-request 0 8 0) #f) "BEGIN_REQUEST with request id 0")
  (check-equal? (problem (record-header 'begin-request 3 65535 255) #t) "BEGIN_REQUEST with content length 65535")
  (check-equal? (problem (record-header 'begin-request 3 0 0) #f) "BEGIN_REQUEST with content length 0")
  (for ([header (list (record-header 'begin-request 3 8 0) (record-header 'get-values 0 500 0)
                      (record-header 200 0 9000 0) (record-header 'end-request 1 8 0))])
    (check-false (problem header #f) (format "~s" header)))
  ;; the next record's header, after a whole one
  (define d (make-decoder))
  (decoder-feed! d (bytes-append (record->bytes 'begin-request 1 (begin-request-content 'responder #t))
                                 (record-header 'begin-request 1 9 0)))
  (check-false (decoder-header-problem d #f) "the whole record comes first")
  (check-equal? (decoder-view! d) 'begin-request)
  (check-equal? (decoder-header-problem d #t) "BEGIN_REQUEST with content length 9"))

(test-case "records: decoder-read! from a port"
  (define bs (bytes-append (record->bytes 'stdin 1 (make-bytes 40000 3))
                           (record->bytes 'data 2 #"x")))
  (define d (make-decoder))
  (define in (open-input-bytes bs))
  (let loop ([acc '()])
    (define r (decoder-next! d))
    (cond [r (loop (cons r acc))]
          [(eof-object? (decoder-read! d in))
           (check-equal? (reverse acc) (list (record 'stdin 1 (make-bytes 40000 3))
                                             (record 'data 2 #"x")))]
          [else (loop acc)])))

(test-case "management answers: exact GET_VALUES_RESULT, UNKNOWN_TYPE, END_REQUEST bytes"
  (check-equal? (record->bytes 'get-values-result 0
                               (pairs->bytes '(("FCGI_MPXS_CONNS" . "1"))))
                #"\1\n\0\0\0\22\6\0\17\1FCGI_MPXS_CONNS1\0\0\0\0\0\0")
  (check-equal? (record->bytes 'get-values-result 0
                               (pairs->bytes '(("FCGI_MAX_CONNS" . "10") ("FCGI_MAX_REQS" . "50"))))
                #"\1\n\0\0\0\43\5\0\16\2FCGI_MAX_CONNS10\15\2FCGI_MAX_REQS50\0\0\0\0\0")
  (check-equal? (record->bytes 'unknown-type 0 (unknown-type-content 42))
                #"\1\v\0\0\0\b\0\0\52\0\0\0\0\0\0\0")
  (check-equal? (parse-unknown-type (unknown-type-content 42)) 42)
  (check-equal? (parse-unknown-type (unknown-type-content 'stdout)) 'stdout)
  (check-equal? (end-request-content 0 'request-complete) #"\0\0\0\0\0\0\0\0")
  (check-equal? (end-request-content #x01020304 'overloaded) #"\1\2\3\4\2\0\0\0")
  (check-equal? (end-request-content #xFFFFFFFF 'unknown-role) #"\377\377\377\377\3\0\0\0")
  (check-equal? (record->bytes 'end-request 1 (end-request-content 0 'cant-mpx-conn))
                #"\1\3\0\1\0\b\0\0\0\0\0\0\1\0\0\0")
  (define-values (app proto) (parse-end-request #"\0\0\1\0\3\0\0\0"))
  (check-equal? (list app proto) '(256 unknown-role))
  (check-exn protocol-error? (λ () (parse-end-request #"\0\0\0"))))

(test-case "begin-request content both ways"
  (check-equal? (begin-request-content 'responder #t) #"\0\1\1\0\0\0\0\0")
  (check-equal? (begin-request-content 'filter #f) #"\0\3\0\0\0\0\0\0")
  (check-equal? (begin-request-content 99 #f) #"\0\143\0\0\0\0\0\0")
  (for ([row '((#"\0\1\1\0\0\0\0\0" responder #t) (#"\0\2\0\0\0\0\0\0" authorizer #f)
               (#"\0\3\377\0\0\0\0\0" filter #t) (#"\1\0\0\0\0\0\0\0" 256 #f))])
    (define-values (role keep?) (parse-begin-request (first row)))
    (check-equal? (list role keep?) (rest row)))
  (check-exn protocol-error? (λ () (parse-begin-request #"\0\1\0\0\0\0\0")))
  (check-exn protocol-error? (λ () (parse-begin-request (make-bytes 9 0)))))

;; -- random chunking ----------------------------------------------------------------------
;; random-stream : natural -> (values bytes (listof record))
;; Records of random types and ids: whole streams through write-stream (0..70000 bytes),
;; and single records with random padding (filled with junk, which must be skipped).
(define (random-stream n)
  (define out (open-output-bytes))
  (define expected
    (append*
     (for/list ([_ n])
       (define type (list-ref '(1 2 3 4 5 6 7 8 9 10 11 42 200) (random 13)))
       (define sym (if (<= 1 type 11) (type->symbol type) type))
       (define id (if (zero? (random 4)) (random 3) (random 65536)))
       (cond
         [(zero? (random 2))
          (define content (random-bytes (random-length 70000)))
          (write-stream type id content out)
          (append (for/list ([i (in-range 0 (bytes-length content) 65528)])
                    (record sym id (subbytes content i (min (bytes-length content) (+ i 65528)))))
                  (list (record sym id #"")))]
         [else
          (define content (random-bytes (random-length 65535)))
          (define pad (random 256))
          (write-bytes (record-header type id (bytes-length content) pad) out)
          (write-bytes content out)
          (write-bytes (make-bytes pad (random 256)) out)
          (list (record sym id content))]))))
  (values (get-output-bytes out) expected))

;; random-length : natural -> natural ; small sizes are as likely as large ones
(define (random-length max)
  (case (random 4)
    [(0) 0]
    [(1) (random 1 20)]
    [(2) (random 1 2000)]
    [else (random 0 (add1 max))]))

(define (random-bytes n)
  (define bs (make-bytes n (random 256)))
  (for ([_ (in-range (min n 64))]) (bytes-set! bs (random n) (random 256)))
  bs)

;; decode-chunked : bytes -> (listof record) ; fed in random chunks of 1..100000 bytes
(define (decode-chunked bs)
  (define d (make-decoder))
  (let loop ([i 0] [acc '()])
    (cond
      [(= i (bytes-length bs))
       (check-equal? (decoder-buffered d) 0)
       (reverse acc)]
      [else
       (define j (min (bytes-length bs)
                      (+ i (if (zero? (random 3)) (random 1 100) (random 1 100001)))))
       (decoder-feed! d (subbytes bs i j))
       (loop j (let drain ([acc acc])
                 (define r (decoder-next! d))
                 (if r (drain (cons r acc)) acc)))])))

;; decode-all/bytewise : bytes -> (listof record) ; one byte per feed
(define (decode-all/bytewise bs)
  (define d (make-decoder))
  (for/fold ([acc '()] #:result (reverse acc)) ([b (in-bytes bs)])
    (decoder-feed! d (bytes b))
    (define r (decoder-next! d))
    (if r (cons r acc) acc)))

;; drain-prefix : bytes -> (listof record) ; the complete records of a prefix, fed whole
(define (drain-prefix bs)
  (define d (make-decoder))
  (decoder-feed! d bs)
  (drain! d '()))

(test-case "random chunking: every split decodes to the same records"
  (random-seed 20240607)
  (for ([round 4])
    (define-values (bs expected) (random-stream 50))
    (check-equal? (decode-all bs) expected "fed whole")
    (for ([split 6])
      (check-equal? (decode-chunked bs) expected (format "round ~a, split ~a" round split)))
    (define tiny (subbytes bs 0 (min (bytes-length bs) 3000)))
    (check-equal? (decode-all/bytewise tiny) (drain-prefix tiny) "byte by byte")))

(test-case "records: read into decoder-room!'s space in pieces, told by decoder-filled!"
  (define stream (bytes-append (record->bytes 'stdout 1 (make-bytes 3000 65))
                               (record->bytes 'stdout 1 #"")
                               (record->bytes 'end-request 1 (end-request-content 0 'request-complete))))
  (define d (make-decoder))
  (define got
    (let loop ([i 0] [acc '()])
      (define r (decoder-next! d))
      (cond
        [r (loop i (cons r acc))]
        [(= i (bytes-length stream)) (reverse acc)]
        [else
         (define-values (buf start end) (decoder-room! d))
         (check-true (< start end) "there is room")
         ;; at most 7 bytes a read, as a trickling peer sends
         (define n (min 7 (- end start) (- (bytes-length stream) i)))
         (bytes-copy! buf start stream i (+ i n))
         (decoder-filled! d n)
         (loop (+ i n) acc)])))
  (check-equal? (map record-type got) '(stdout stdout end-request))
  (check-equal? (record-content (car got)) (make-bytes 3000 65)))
