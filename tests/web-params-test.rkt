#lang racket/base
;; fastcgi/private/servlet/web-params.rkt against the plain way: read-params (headers and the params
;; the adapter reads, through its cache of param name shapes) must give what a table
;; look-up per param gives, and so must read-raw-params, which reads them in place from the
;; bytes they came in.
(require racket/list
         racket/string
         rackunit
         web-server/http/request-structs
         (only-in "../fastcgi/private/protocol/protocol.rkt" pairs->bytes)
         (only-in "../fastcgi/private/engine/request.rkt" raw-params)
         "../fastcgi/private/servlet/web-params.rkt")

;; The plain way: each param's header name computed anew, each special param the first
;; occurrence in the list.
(define (reference-header-name name)
  (cond
    [(equal? name #"CONTENT_TYPE") #"Content-Type"]
    [(equal? name #"CONTENT_LENGTH") #"Content-Length"]
    [(regexp-match #rx#"^HTTP_(.+)$" name)
     => (λ (m) (string->bytes/latin-1
                (string-join (map string-titlecase (string-split (bytes->string/latin-1 (cadr m)) "_" #:trim? #f))
                             "-")))]
    [else #f]))

(define (reference-read params)
  (values
   (for*/list ([p (in-list params)]
               [name (in-value (reference-header-name (car p)))]
               #:when (and name (not (and (zero? (bytes-length (cdr p)))
                                          (regexp-match? #rx#"^CONTENT_" (car p))))))
     (cons name (cdr p)))
   (for/vector ([s (in-vector special-names)])
     (cond [(assoc s params) => cdr] [else #f]))))

(define (check-read params)
  (define-values (hs special) (read-params params))
  (define-values (ref-hs ref-special) (reference-read params))
  (check-equal? (for/list ([h (in-list hs)]) (cons (header-field h) (header-value h))) ref-hs
                (format "headers of ~s" params))
  (check-equal? special ref-special (format "special params of ~s" params)))

;; params as nginx sends them (fewer of them), for the chosen cases below
(define nginx-params
  '((#"QUERY_STRING" . #"") (#"REQUEST_METHOD" . #"GET") (#"CONTENT_TYPE" . #"")
    (#"CONTENT_LENGTH" . #"") (#"SCRIPT_NAME" . #"/") (#"REQUEST_URI" . #"/")
    (#"REMOTE_ADDR" . #"127.0.0.1") (#"REMOTE_PORT" . #"40000")
    (#"SERVER_ADDR" . #"127.0.0.1") (#"SERVER_PORT" . #"8080") (#"HTTP_HOST" . #"x:8080")
    (#"HTTP_ACCEPT_LANGUAGE" . #"en")))

(test-case "read-params on chosen params"
  (define nginx nginx-params)
  (check-read nginx)
  (check-read nginx)                    ; the second time through the cached shape
  (check-read (list-set nginx 2 '(#"CONTENT_TYPE" . #"text/plain")))
  ;; same number of params, other names: a new shape
  (check-read (list-set nginx 11 '(#"HTTP_COOKIE" . #"a=b")))
  (check-read (list-set nginx 0 '(#"HTTP_X_A" . #"1")))
  ;; a name twice: both headers kept in order; the first value wins for a special param
  (check-read (append nginx '((#"HTTP_HOST" . #"second") (#"REQUEST_URI" . #"/second"))))
  (check-read '())
  (check-read '((#"HTTP_" . #"x") (#"HTTP__" . #"y") (#"http_host" . #"z") (#"CONTENT_TYPE" . #"")))
  (define-values (hs special) (read-params nginx))
  (check-equal? (vector-ref special 1) #"/")
  (check-equal? (header-value (headers-assq* #"host" hs)) #"x:8080"))

(test-case "read-params equals the plain way on 20000 random param lists"
  (define names
    (append (vector->list special-names)
            '(#"CONTENT_TYPE" #"CONTENT_LENGTH" #"HTTP_HOST" #"HTTP_USER_AGENT" #"HTTP_ACCEPT"
              #"HTTP_X_FORWARDED_FOR" #"DOCUMENT_ROOT" #"SERVER_PROTOCOL" #"HTTPS" #"HTTP_")))
  (define values* '(#"" #"x" #"/a?b" #"text/plain" #"12"))
  (define rng (make-pseudo-random-generator))
  (parameterize ([current-pseudo-random-generator rng]) (random-seed 20261122))
  (for ([i (in-range 20000)])
    (define params
      (for/list ([k (in-range (random 12 rng))])
        ;; fresh, mutable copies, as the engine's parser makes them
        (cons (bytes-copy (list-ref names (random (length names) rng)))
              (bytes-copy (list-ref values* (random (length values*) rng))))))
    (define-values (hs special) (read-params params))
    (define-values (ref-hs ref-special) (reference-read params))
    (unless (and (equal? (for/list ([h (in-list hs)]) (cons (header-field h) (header-value h))) ref-hs)
                 (equal? special ref-special))
      (check-read params))))

;; read-raw : params -> (or/c #f (list headers special)) ; read-raw-params of their bytes
(define (read-raw params)
  (define bs (pairs->bytes params))
  ;; framed, as in a longer buffer
  (define framed (bytes-append #"\1\2\3" bs #"\4\5"))
  (define-values (hs sp) (read-raw-params (raw-params framed 3 (+ 3 (bytes-length bs)))))
  (and sp (list hs sp)))

(define (header-pairs hs) (for/list ([h (in-list hs)]) (cons (header-field h) (header-value h))))

(test-case "read-raw-params: in place, the same as read-params, and the same headers again"
  (define nginx nginx-params)
  (read-params nginx)                   ; the shape is kept
  (define r1 (read-raw nginx))
  (check-not-false r1 "params of the last shape are read in place")
  (define-values (ref-hs ref-special) (reference-read nginx))
  (check-equal? (header-pairs (car r1)) ref-hs)
  (check-equal? (cadr r1) ref-special)
  ;; another client port only: the very same headers (not a header value), equal specials
  (define r2 (read-raw (list-set nginx 7 '(#"REMOTE_PORT" . #"40001"))))
  (check-eq? (car r2) (car r1))
  (check-equal? (cadr r2) ref-special)
  (check-true (immutable? (vector-ref (cadr r2) 1)) "values are immutable byte strings")
  ;; a header value changes: new headers, right values
  (define other (list-set nginx 11 '(#"HTTP_ACCEPT_LANGUAGE" . #"fr")))
  (define r3 (read-raw other))
  (check-false (eq? (car r3) (car r1)))
  (check-equal? (header-pairs (car r3)) (let-values ([(h s) (reference-read other)]) h))
  ;; and back
  (check-equal? (header-pairs (car (read-raw nginx))) ref-hs)
  ;; other names, or one more or one fewer param: not this shape
  (check-false (read-raw (list-set nginx 11 '(#"HTTP_COOKIE" . #"a=b"))))
  (check-false (read-raw (append nginx '((#"HTTP_X" . #"1")))))
  (check-false (read-raw (drop-right nginx 1)))
  (check-false (read-raw '())))

(test-case "read-raw-params equals the plain way on 20000 random param lists"
  ;; each list is read once through read-params (which keeps its shape), then in place
  ;; twice: once fresh, once against the memo the first made, with some values changed
  (define names
    (append (vector->list special-names)
            '(#"CONTENT_TYPE" #"CONTENT_LENGTH" #"HTTP_HOST" #"HTTP_USER_AGENT" #"HTTP_ACCEPT"
              #"DOCUMENT_ROOT" #"HTTP_")))
  (define values* '(#"" #"x" #"/a?b" #"text/plain" #"12" #"xyz"))
  (define rng (make-pseudo-random-generator))
  (define (pick l) (list-ref l (random (length l) rng)))
  (define bad 0)
  (for ([i (in-range 20000)])
    (define params
      (for/list ([k (in-range (add1 (random 10 rng)))])
        (cons (bytes-copy (pick names)) (bytes-copy (pick values*)))))
    (read-params params)
    (define changed (for/list ([p (in-list params)])
                      (if (zero? (random 3 rng)) (cons (car p) (bytes-copy (pick values*))) p)))
    (for ([ps (in-list (list params changed params))])
      (define got (read-raw ps))
      (define-values (ref-hs ref-special) (reference-read ps))
      (unless (and got (equal? (header-pairs (car got)) ref-hs) (equal? (cadr got) ref-special))
        (set! bad (add1 bad))
        (when (= bad 1)
          (check-equal? (and got (header-pairs (car got))) ref-hs (format "headers of ~s" ps))
          (check-equal? (and got (cadr got)) ref-special (format "specials of ~s" ps))))))
  (check-equal? bad 0 "lists read wrong in place"))
