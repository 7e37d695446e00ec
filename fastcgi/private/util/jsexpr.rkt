#lang racket/base
;; JSON for the status board, the control lines and the metrics, written and read here
;; rather than with the `json` collection: that one loads racket/contract, which the manager
;; and a raw worker otherwise never load, and every process holds what it loads
;; (bench/RESULTS.md, memory). The same names and values as `json`'s: a jsexpr is #t, #f,
;; 'null, a string, an exact integer, a finite flonum, a list of jsexprs or a hasheq from
;; symbols to jsexprs. Non-ASCII text is written as UTF-8; control characters are escaped.
(provide json-null
         jsexpr->bytes
         jsexpr->string
         write-json
         read-json
         string->jsexpr
         bytes->jsexpr)

;; json-null : -> 'null ; as `json`'s parameter is called
(define (json-null) 'null)

;; write-json : jsexpr [output-port] -> void
(define (write-json x [out (current-output-port)])
  (let loop ([x x])
    (cond
      [(hash? x)
       (write-bytes #"{" out)
       (for ([(k v) (in-hash x)] [i (in-naturals)])
         (unless (zero? i) (write-bytes #"," out))
         (write-string* (if (symbol? k) (symbol->string k) k) out)
         (write-bytes #":" out)
         (loop v))
       (write-bytes #"}" out)]
      [(list? x)
       (write-bytes #"[" out)
       (for ([v (in-list x)] [i (in-naturals)])
         (unless (zero? i) (write-bytes #"," out))
         (loop v))
       (write-bytes #"]" out)]
      [(string? x) (write-string* x out)]
      [(eq? x #t) (write-bytes #"true" out)]
      [(eq? x #f) (write-bytes #"false" out)]
      [(eq? x 'null) (write-bytes #"null" out)]
      [(exact-integer? x) (write-string (number->string x) out)]
      [(and (real? x) (rational? x)) (write-string (number->string (exact->inexact x)) out)]
      [else (raise-argument-error 'write-json "jsexpr?" x)]))
  (void))

;; write-string* : string output-port -> void ; a JSON string literal
(define (write-string* s out)
  (write-bytes #"\"" out)
  (let loop ([start 0] [i 0])
    (cond
      [(= i (string-length s)) (write-string s out start i)]
      [else
       (define c (string-ref s i))
       (define esc (case c
                     [(#\") "\\\""] [(#\\) "\\\\"] [(#\newline) "\\n"] [(#\return) "\\r"]
                     [(#\tab) "\\t"] [(#\backspace) "\\b"] [(#\page) "\\f"]
                     [else (and (or (char<? c #\space) (char=? c #\rubout))
                                (string-append "\\u" (hex4 (char->integer c))))]))
       (cond
         [esc (write-string s out start i) (write-string esc out) (loop (add1 i) (add1 i))]
         [else (loop start (add1 i))])]))
  (write-bytes #"\"" out))

;; hex4 : natural -> string ; four hex digits
(define (hex4 n)
  (define h (number->string n 16))
  (string-append (make-string (- 4 (string-length h)) #\0) h))

;; jsexpr->bytes : jsexpr -> bytes
(define (jsexpr->bytes x)
  (define out (open-output-bytes))
  (write-json x out)
  (get-output-bytes out))

;; jsexpr->string : jsexpr -> string
(define (jsexpr->string x) (bytes->string/utf-8 (jsexpr->bytes x)))

;; string->jsexpr : string -> jsexpr ; bytes->jsexpr : bytes -> jsexpr
;; One value and nothing but white space after it, else exn:fail:read.
(define (string->jsexpr s) (read-whole (open-input-string s)))
(define (bytes->jsexpr b) (read-whole (open-input-bytes b)))

(define (read-whole in)
  (define v (read-json in))
  (skip-space! in)
  (unless (eof-object? (peek-char in)) (bad in "text after the value"))
  (if (eof-object? v) (bad in "no value") v))

;; read-json : [input-port] -> (or/c jsexpr eof)
(define (read-json [in (current-input-port)])
  (skip-space! in)
  (if (eof-object? (peek-char in)) eof (read-value in)))

(define (bad in what)
  (raise (exn:fail:read (format "read-json: bad JSON: ~a" what) (current-continuation-marks) '())))

(define (skip-space! in)
  (when (memv (peek-char in) '(#\space #\tab #\newline #\return))
    (read-char in)
    (skip-space! in)))

;; expect! : input-port string -> void ; these characters next, else an error
(define (expect! in word)
  (for ([c (in-string word)])
    (unless (eqv? (read-char in) c) (bad in (format "expected ~a" word)))))

(define (read-value in)
  (skip-space! in)
  (define c (peek-char in))
  (case c
    [(#\{) (read-char in) (read-object in)]
    [(#\[) (read-char in) (read-array in)]
    [(#\") (read-char in) (read-string* in)]
    [(#\t) (expect! in "true") #t]
    [(#\f) (expect! in "false") #f]
    [(#\n) (expect! in "null") 'null]
    [else (if (and (char? c) (or (char-numeric? c) (char=? c #\-))) (read-number in) (bad in "unexpected character"))]))

;; read-items : input-port char (input-port -> any) -> list ; up to the closing char
(define (read-items in close read-item)
  (skip-space! in)
  (cond
    [(eqv? (peek-char in) close) (read-char in) '()]
    [else
     (let loop ([acc (list (read-item in))])
       (skip-space! in)
       (define c (read-char in))
       (cond
         [(eqv? c #\,) (loop (cons (read-item in) acc))]
         [(eqv? c close) (reverse acc)]
         [else (bad in (format "expected , or ~a" close))]))]))

(define (read-array in) (read-items in #\] read-value))

(define (read-object in)
  (for/hasheq ([kv (in-list (read-items in #\} read-member))]) (values (car kv) (cdr kv))))

(define (read-member in)
  (skip-space! in)
  (unless (eqv? (read-char in) #\") (bad in "expected a key"))
  (define k (string->symbol (read-string* in)))
  (skip-space! in)
  (unless (eqv? (read-char in) #\:) (bad in "expected :"))
  (cons k (read-value in)))

;; read-string* : input-port -> string ; after the opening quote
(define (read-string* in)
  (define out (open-output-string))
  (let loop ()
    (define c (read-char in))
    (cond
      [(eof-object? c) (bad in "unterminated string")]
      [(char=? c #\") (get-output-string out)]
      [(char=? c #\\)
       (define e (read-char in))
       (case e
         [(#\" #\\ #\/) (write-char e out)]
         [(#\n) (write-char #\newline out)] [(#\r) (write-char #\return out)]
         [(#\t) (write-char #\tab out)] [(#\b) (write-char #\backspace out)]
         [(#\f) (write-char #\page out)]
         [(#\u) (write-char (read-escaped-char in) out)]
         [else (bad in "bad escape")])
       (loop)]
      [else (write-char c out) (loop)])))

;; read-escaped-char : input-port -> char ; after \u, a surrogate pair joined
(define (read-escaped-char in)
  (define (hex)
    (define s (read-string 4 in))
    (or (and (string? s) (= 4 (string-length s)) (string->number s 16)) (bad in "bad \\u escape")))
  (define n (hex))
  (cond
    [(and (<= #xD800 n #xDBFF) (equal? (peek-string 2 0 in) "\\u"))
     (read-string 2 in)
     (define lo (hex))
     (if (<= #xDC00 lo #xDFFF)
         (integer->char (+ #x10000 (arithmetic-shift (- n #xD800) 10) (- lo #xDC00)))
         #\uFFFD)]
    [(<= #xD800 n #xDFFF) #\uFFFD]
    [else (integer->char n)]))

;; read-number : input-port -> number ; an integer exact, a fraction or exponent a flonum
(define (read-number in)
  (define m (regexp-match #rx#"^-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]+)?" in))
  (unless m (bad in "bad number"))
  (define n (string->number (bytes->string/latin-1 (car m)) 10))
  (if (or (cadr (cdr m)) (cadddr m)) (exact->inexact n) n))
