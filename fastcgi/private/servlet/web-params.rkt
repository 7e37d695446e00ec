#lang racket/base
;; The servlet adapter's reading of a request's params (web.rkt): the HTTP headers a
;; web-server request gets (HTTP_ACCEPT_LANGUAGE becomes Accept-Language; CONTENT_TYPE and
;; CONTENT_LENGTH become headers too) and the few params the adapter reads itself
;; (special-names), from the list of pairs (read-params) or in place from the bytes they
;; came in (read-raw-params). A front sends the same names request after request, so both
;; keep what they learnt of the last ones: header names, and the shapes of param lists.
(require racket/string
         (only-in racket/unsafe/ops unsafe-bytes->immutable-bytes!)
         ;; the struct's own constructor, as web-server's request.rkt uses it: the
         ;; contracted one checks values this module builds itself from checked bytes
         (only-in "web-private.rkt" make-header/raw)
         (only-in "../protocol/protocol.rkt" pair-head bytes-range=?)
         (only-in "../engine/request.rkt" raw-params-bs raw-params-start raw-params-end))
(provide read-params
         read-raw-params
         special-names)

;; param->header-name : bytes -> (or/c bytes #f)
;; The header name of a param (#f: none), through header-names. CONTENT_TYPE and
;; CONTENT_LENGTH map to the very byte strings #"Content-Type" and #"Content-Length" of
;; this module (read-params compares with eq?).
(define (param->header-name name)
  (define hit (hash-ref header-names name none))
  (cond
    [(not (eq? hit none)) hit]
    [else
     (define v (let ([h (compute-header-name name)]) (and h (bytes->immutable-bytes h))))
     (when (and (< (hash-count header-names) max-cached-names)
                (<= (bytes-length name) max-cached-name-bytes))
       (hash-set! header-names (bytes->immutable-bytes name) v))
     v]))

;; The header names made, by param name: a front sends the same dozen header names on
;; every request, and building one (split, titlecase, join) cost more than the rest of
;; the adapter's work on a header. Bounded, since the names come from the client: at most
;; max-cached-names names of at most max-cached-name-bytes each, the first ones seen.
;; Shared by every request: a cached name (a key too) is immutable, and the header names
;; go into the requests, so that no servlet can change one for the next request.
(define header-names (make-hash))
(define max-cached-names 256)
(define max-cached-name-bytes 256)
(define none (string->uninterned-symbol "none"))

;; compute-header-name : bytes -> (or/c bytes #f)
(define (compute-header-name name)
  (cond
    [(equal? name #"CONTENT_TYPE") #"Content-Type"]
    [(equal? name #"CONTENT_LENGTH") #"Content-Length"]
    [(and (> (bytes-length name) 5) (equal? (subbytes name 0 5) #"HTTP_"))
     (string->bytes/latin-1
      (string-join (for/list ([part (in-list (regexp-split #rx"_" (bytes->string/latin-1 (subbytes name 5))))])
                     (string-titlecase part))
                   "-"))]
    [else #f]))

;; The params the adapter reads, by slot in the vector read-params fills.
(define special-names
  #(#"REQUEST_METHOD" #"REQUEST_URI" #"QUERY_STRING" #"SCRIPT_NAME" #"PATH_INFO"
    #"SERVER_ADDR" #"SERVER_PORT" #"REMOTE_ADDR"))

;; special-slot : bytes -> (or/c natural #f)
(define (special-slot name)
  (for/first ([s (in-vector special-names)] [i (in-naturals)] #:when (bytes=? s name)) i))

;; A shape: the param names of a request in order, and what each one is to the adapter:
;; its header name (or #f) and its slot in special-names (or #f). A front sends the same
;; names in the same order request after request, so the adapter keeps the shapes it saw
;; (at most max-shapes, by number of params, one each, and only those whose names total
;; at most max-shape-bytes: names come from the client) and checks a request's names
;; against the shape with bytes=? instead of looking each one up in tables, which took
;; a good part of a servlet request (bench/OPTIMISATIONS.md, web-server's structures
;; without contracts, by the shape of the params). A shape never changes once made (its
;; names are immutable copies) but for its memo, which is replaced whole; a later shape of
;; the same length replaces an older one, so the table stays bounded.
(struct shape (names headers slots [memo #:mutable]))
(define shapes (make-hasheqv))
(define max-shapes 64)
(define max-shape-bytes 8192)

;; params-shape : (listof (cons bytes bytes)) natural -> shape
(define (params-shape params n)
  (define old (hash-ref shapes n #f))
  (cond
    [(and old (for/and ([p (in-list params)] [name (in-vector (shape-names old))])
                ;; eq?: the engine shares equal names between a connection's requests
                (or (eq? (car p) name) (bytes=? (car p) name))))
     (unless (eq? old (unbox last-shape)) (set-box! last-shape old))
     old]
    [else
     (define new
       (shape (for/vector #:length n ([p (in-list params)]) (bytes->immutable-bytes (car p))) ; no copy when immutable
              (for/vector #:length n ([p (in-list params)]) (param->header-name (car p)))
              (for/vector #:length n ([p (in-list params)]) (special-slot (car p)))
              #f))
     (when (and (or old (< (hash-count shapes) max-shapes))
                (<= (for/sum ([name (in-vector (shape-names new))]) (bytes-length name))
                    max-shape-bytes))
       (hash-set! shapes n new)
       (set-box! last-shape new))
     new]))

;; The shape kept last, which read-raw-params tries first: one entry, a shape of the table.
(define last-shape (box #f))

;; A shape's memo: the values of the last request read in place with it (by pair; #f where
;; the adapter wants none) and the headers made of them. Published whole, never changed:
;; handlers on other threads may read it meanwhile. Requests in a row with the same
;; values share its byte strings and its list of headers: all immutable (the values made
;; so, header structs), so that the servlet of one cannot change the next one's.
(struct memo (values headers))

;; read-raw-params : raw-params -> (values (or/c (listof header) #f) (or/c vector #f))
;; What read-params gives for these params, read in place: no list of pairs is made, a
;; value equal to the last request's is that one's byte string, and when every header
;; value is, so is the list of headers. Two #f when the params do not have the last
;; shape's names in its order: read-params of the list then. Making the list and reading
;; it each cost more than this read in place (bench/OPTIMISATIONS.md, What the last
;; request had).
(define (read-raw-params v)
  (define sh (unbox last-shape))
  (cond
    [(not sh) (values #f #f)]
    [else
     (define bs (raw-params-bs v))
     (define end (raw-params-end v))
     (define names (shape-names sh))
     (define hnames (shape-headers sh))
     (define slots (shape-slots sh))
     (define n (vector-length names))
     (define m (shape-memo sh))
     (define olds (and m (memo-values m)))
     (define vals (make-vector n #f))
     (define special (make-vector (vector-length special-names) #f))
     ;; walk : natural natural boolean -> (or/c boolean 'no) ; 'no: another shape;
     ;; else whether a header value differs from the memo's
     (define changed?
       (let walk ([i (raw-params-start v)] [k 0] [changed? #f])
         (cond
           [(= i end) (if (= k n) changed? 'no)]
           [(= k n) 'no]
           [else
            (define-values (nlen vlen i2) (pair-head bs i end))
            (define name (vector-ref names k))
            (cond
              [(string? nlen) 'no]   ; cannot happen: the engine checked them
              [(not (and (= nlen (bytes-length name)) (bytes-range=? bs i2 name 0 nlen))) 'no]
              [else
               (define hname (vector-ref hnames k))
               (define slot (vector-ref slots k))
               (define from (+ i2 nlen))
               (define next (+ from vlen))
               (cond
                 [(or hname slot)
                  (define old (and olds (vector-ref olds k)))
                  (define same? (and old (= (bytes-length old) vlen) (bytes-range=? bs from old 0 vlen)))
                  (define value (if same? old (unsafe-bytes->immutable-bytes! (subbytes bs from next))))
                  (vector-set! vals k value)
                  (when (and slot (not (vector-ref special slot))) (vector-set! special slot value))
                  (walk next (add1 k) (or changed? (and hname (not same?))))]
                 [else (walk next (add1 k) changed?)])])])))
     (cond
       [(eq? changed? 'no) (values #f #f)]
       [(and m (not changed?)) (values (memo-headers m) special)]
       [else
        (define headers
          (let loop ([k 0])
            (cond
              [(= k n) '()]
              [else
               (define name (vector-ref hnames k))
               (define value (vector-ref vals k))
               (if (and name (not (and (zero? (bytes-length value))
                                       (or (eq? name #"Content-Type") (eq? name #"Content-Length")))))
                   (cons (make-header/raw name value) (loop (add1 k)))
                   (loop (add1 k)))])))
        (set-shape-memo! sh (memo vals headers))
        (values headers special)])]))

;; read-params : (listof (cons bytes bytes)) -> (values (listof header) vector)
;; The request's headers, and the value of each of special-names (first occurrence wins,
;; as with request-param; #f for one not sent). HTTP_ACCEPT_LANGUAGE becomes
;; Accept-Language; CONTENT_TYPE and CONTENT_LENGTH become headers too (when not empty).
;; Order is kept; a name sent twice stays twice.
(define (read-params params)
  (define sh (params-shape params (length params)))
  (define special (make-vector (vector-length special-names) #f))
  (define headers
    (let loop ([ps params] [i 0])
      (cond
        [(null? ps) '()]
        [else
         (define value (cdar ps))
         (define slot (vector-ref (shape-slots sh) i))
         (when (and slot (not (vector-ref special slot))) (vector-set! special slot value))
         (define name (vector-ref (shape-headers sh) i))
         (if (and name (not (and (zero? (bytes-length value))
                                 (or (eq? name #"Content-Type") (eq? name #"Content-Length")))))
             (cons (make-header/raw name value) (loop (cdr ps) (add1 i)))
             (loop (cdr ps) (add1 i)))])))
  (values headers special))
