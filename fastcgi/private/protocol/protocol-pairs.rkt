#lang racket/base
;; FastCGI name-value pairs (the PARAMS stream, GET_VALUES and its result): checked,
;; looked up in place, parsed into a list, and encoded. A length read from the wire is
;; untrusted: it is checked against what is actually present before anything is allocated.
(require racket/list
         (only-in racket/unsafe/ops unsafe-bytes->immutable-bytes!)
         "../util/fast-bytes.rkt"
         "protocol-record.rkt")
(provide parse-pairs
         parse-params check-params params-ref pair-head
         pairs->bytes)

;; parse-pairs : bytes [natural natural] #:max-pairs natural -> (listof (cons bytes bytes))
;; The whole stream must be present. A declared length larger than what remains raises
;; before anything is allocated; so does a pair count over max-pairs. Order is kept.
;; (parse-params, below, with no previous request, and raising its message.)
(define (parse-pairs bs [start 0] [end (bytes-length bs)] #:max-pairs [max-pairs +inf.0])
  (define pairs (parse-params bs max-pairs '() start end))
  (if (string? pairs)
      (raise (exn:fail:fastcgi:protocol pairs (current-continuation-marks)))
      pairs))

;; pair-head : bytes natural natural -> (values natural natural natural)
;;                                       or (values string #f #f)
;; The name and value lengths of the pair at bs[i] and where its name starts, or the
;; problem as its message ("params: ...") when the pair does not fit before end.
(define (pair-head bs i end)
  (define i2 (+ i 2))
  (cond
    ;; the common case first: two 1-byte lengths, the pair whole
    [(and (<= i2 end) (< (bytes-ref bs i) 128) (< (bytes-ref bs (+ i 1)) 128)
          (<= (+ i2 (bytes-ref bs i) (bytes-ref bs (+ i 1))) end))
     (values (bytes-ref bs i) (bytes-ref bs (+ i 1)) i2)]
    [else (pair-head/slow bs i end)]))

(define (pair-head/slow bs i end)
  ;; the pair length at i, or #f (truncated) or 'long (a truncated 4-byte length)
  (define (len-at i)
    (cond
      [(>= i end) #f]
      [(< (bytes-ref bs i) 128) (bytes-ref bs i)]
      [(> (+ i 4) end) 'long]
      [else (+ (* (bitwise-and (bytes-ref bs i) #x7f) 16777216) (* (bytes-ref bs (+ i 1)) 65536)
               (* (bytes-ref bs (+ i 2)) 256) (bytes-ref bs (+ i 3)))]))
  (define (truncated what)
    (if (eq? what 'long) "params: truncated 4-byte name-value length" "params: truncated name-value length"))
  (define nlen (len-at i))
  ;; a length takes 4 bytes when its first has the top bit, whatever its value
  (define i1 (if (exact-integer? nlen) (+ i (if (< (bytes-ref bs i) 128) 1 4)) i))
  (define vlen (and (exact-integer? nlen) (len-at i1)))
  (define i2 (if (exact-integer? vlen) (+ i1 (if (< (bytes-ref bs i1) 128) 1 4)) i1))
  (cond
    [(not (exact-integer? nlen)) (values (truncated nlen) #f #f)]
    [(not (exact-integer? vlen)) (values (truncated vlen) #f #f)]
    [(> (+ i2 nlen vlen) end)
     (values (format "params: pair lengths ~a+~a exceed the ~a bytes left" nlen vlen (- end i2)) #f #f)]
    [else (values nlen vlen i2)]))

;; check-params : bytes natural [natural natural] -> (or/c natural string)
;; How many name-value pairs bs[start, end) holds, or the problem parse-params would
;; report, without making the pairs: the server checks a request's params with this and
;; makes them only when something asks for them (most handlers ask for none or a few).
(define (check-params bs max-pairs [start 0] [end (bytes-length bs)])
  (let loop ([i start] [count 0])
    (cond
      [(= i end) count]
      [(>= count max-pairs) (format "params: more than ~a name-value pairs" max-pairs)]
      [else
       (define-values (nlen vlen i2) (pair-head bs i end))
       (if (string? nlen) nlen (loop (+ i2 nlen vlen) (add1 count)))])))

;; params-ref : bytes natural natural bytes -> (or/c bytes #f)
;; The value of the first pair named name in bs[start, end), which check-params accepted,
;; as an immutable byte string; #f when there is none. Compared in place: no pair is made.
(define (params-ref bs start end name)
  (define len (bytes-length name))
  (let loop ([i start])
    (cond
      [(>= i end) #f]
      [else
       (define-values (nlen vlen i2) (pair-head bs i end))
       (cond
         [(string? nlen) #f]
         ;; in range: i2 + nlen <= end <= (bytes-length bs) (pair-head)
         [(and (= nlen len) (bytes-range=? bs i2 name 0 len))
          (unsafe-bytes->immutable-bytes! (subbytes bs (+ i2 nlen) (+ i2 nlen vlen)))]
         [else (loop (+ i2 nlen vlen))])])))

;; parse-params : bytes natural (listof (cons bytes bytes)) [natural natural]
;;                -> (or/c (listof (cons bytes bytes)) string)
;; The name-value pairs of bs[start, end), a problem as its message ("params: ..."), not
;; raised (a handler per request cost more than the parse). Byte strings are immutable: a
;; name or value equal to the one at the same place in `like` (the previous request's
;; params on the connection) is that same byte string, since a front sends the same
;; names, and mostly the same values, on every request, and a copy of each was most of
;; what parsing them allocated. So is a pair whose name and value are both the same, and a
;; tail of the list that is all the same.
(define (parse-params bs max-pairs like [start 0] [end (bytes-length bs)])
  ;; the slice bs[from, to) as an immutable byte string: old's own when equal
  (define (slice from to old)
    (if (and old (= (bytes-length old) (- to from))
             ;; in range: to <= (bytes-length bs) (pair-head), and old is that long
             (bytes-range=? bs from old 0 (- to from)))
        old
        (unsafe-bytes->immutable-bytes! (subbytes bs from to))))
  (let loop ([i start] [count 0] [like like])
    (cond
      [(= i end) '()]
      [(>= count max-pairs) (format "params: more than ~a name-value pairs" max-pairs)]
      [else
       (define-values (nlen vlen i2) (pair-head bs i end))
       (cond
         [(string? nlen) nlen]
         [else
          (define old (and (pair? like) (car like)))
          (define name (slice i2 (+ i2 nlen) (and old (car old))))
          (define value (slice (+ i2 nlen) (+ i2 nlen vlen) (and old (cdr old))))
          (define rest (loop (+ i2 nlen vlen) (add1 count) (if (pair? like) (cdr like) '())))
          (cond
            [(string? rest) rest]
            ;; the same pair as before: that pair, and that list when the rest is too
            [(and old (eq? name (car old)) (eq? value (cdr old)))
             (if (eq? rest (cdr like)) like (cons old rest))]
            [else (cons (cons name value) rest)])])])))

;; length-bytes : natural -> bytes
(define (length-bytes n)
  (cond [(< n 128) (bytes n)]
        [(<= n #x7fffffff) (bytes (bitwise-ior #x80 (arithmetic-shift n -24))
                                  (bitwise-and (arithmetic-shift n -16) 255)
                                  (bitwise-and (arithmetic-shift n -8) 255)
                                  (bitwise-and n 255))]
        [else (raise-argument-error 'pairs->bytes "length below 2^31" n)]))

;; pairs->bytes : (listof (cons (or/c bytes string) (or/c bytes string))) -> bytes
(define (pairs->bytes pairs)
  (define (->b v) (if (string? v) (string->bytes/utf-8 v) v))
  (apply bytes-append
         (append*
          (for/list ([p (in-list pairs)])
            (define n (->b (car p)))
            (define v (->b (cdr p)))
            (list (length-bytes (bytes-length n)) (length-bytes (bytes-length v)) n v)))))
