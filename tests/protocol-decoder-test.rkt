#lang racket/base
;; fastcgi/private/protocol/protocol-decoder.rkt: a stream of records (written by protocol-record.rkt)
;; cut into records, whole, in pieces and in random chunks.
(require "lib/protocol-bytes.rkt"
         racket/list
         rackunit
         "../fastcgi/private/protocol/protocol-decoder.rkt"
         "../fastcgi/private/protocol/protocol-record.rkt")

;; decode-all : bytes -> (listof record) ; the whole stream fed at once
(define (decode-all bs)
  (define d (make-decoder))
  (decoder-feed! d bs)
  (begin0 (drain! d '()) (check-equal? (decoder-buffered d) 0 "bytes left over")))

;; drain! : decoder (listof record) -> (listof record) ; acc newest first, result in order
(define (drain! d acc)
  (define r (decoder-next! d))
  (if r (drain! d (cons r acc)) (reverse acc)))

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
