#lang racket/base
;; The servlet adapter's own quick paths (fastcgi/private/web.rkt) against the plain way:
;; - uri->url must give exactly what net/url's string->url gives, which it falls back to;
;; - read-params (headers and the params the adapter reads, through its cache of param
;;   name shapes) must give what a table look-up per param gives, and so must
;;   read-raw-params, which reads them in place from the bytes they came in;
;; - uri-bytes->url, which remembers the last URI, must give uri->url's url;
;; - read-form (fastcgi/private/web-form.rkt) must give the bindings and post data that
;;   web-server's own request reader gives, by a table checked against it.
(require net/url
         racket/list
         racket/port
         racket/promise
         racket/string
         rackunit
         web-server/http/request-structs
         web-server/safety-limits
         (only-in "../fastcgi/private/protocol.rkt" pairs->bytes)
         (only-in "../fastcgi/private/request.rkt" raw-params)
         "../fastcgi/private/web.rkt"
         "../fastcgi/private/web-form.rkt")

;; url->list : url -> list ; every field, path/params opened
(define (url->list u)
  (list (url-scheme u) (url-user u) (url-host u) (url-port u) (url-path-absolute? u)
        (for/list ([p (in-list (url-path u))]) (list (path/param-path p) (path/param-param p)))
        (url-query u) (url-fragment u)))

;; parsed : (string -> url) string -> (or/c list 'error) ; string->url raises on some
;; inputs (e.g. "/.;x"), and then uri->url must raise too (the adapter answers 400)
(define (parsed parse s)
  (with-handlers ([exn:fail? (λ (e) 'error)]) (url->list (parse s))))

(define (check-same s)
  (check-equal? (parsed uri->url s) (parsed string->url s) s))

(test-case "uri->url equals string->url on chosen URIs"
  (for-each check-same
            '("/" "/a" "/a/b" "/a/" "/a//b" "//host/x" "/." "/.." "/a/." "/a/../b" "/.a/..b/c."
              "/?" "/?&" "/?a&&b" "/?=" "/?a=" "/?=b" "/?a=b=c" "/a?b?c" "/x?y=1&z"
              "/a/b/c.html?id=42&page=3" "/a%20b" "/a+b?x=1+2" "/a;p/b" "/a#f" "/a?x=%41"
              "/a:b@c" "/é" "/a?q=é" "/A_Z-0.9~" "/.;x")))

(test-case "uri->url keeps the urls of plain URIs: the same url again, immutable, still right"
  (define plain '("/" "/a" "/a/b/c.html?id=42&page=3" "/x?y=1&z" "/A_Z-0.9~" "/?a=b&c="))
  (for ([s (in-list plain)])
    (define u1 (uri->url s))
    (define u2 (uri->url (string-copy s)))
    (check-eq? u2 u1 (format "~a: the kept url" s))
    (check-equal? (parsed (λ (_) u2) s) (parsed string->url s) s)
    (for ([p (in-list (url-path u2))] #:when (string? (path/param-path p)))
      (check-true (immutable? (path/param-path p)) (format "~a: a segment cannot be changed" s)))
    (for ([q (in-list (url-query u2))] #:when (cdr q))
      (check-true (immutable? (cdr q)) (format "~a: a query value cannot be changed" s))))
  ;; a thousand other URIs go through the table, which empties when full: each is still
  ;; parsed right, the first time and the second
  (for* ([round (in-range 2)] [i (in-range 1000)])
    (check-same (format "/p~a/q?n=~a" i round)))
  (check-same "/a/b/c.html?id=42&page=3")
  ;; a long URI is parsed right and not kept
  (define long (string-append "/" (make-string 300 #\a)))
  (check-same long)
  (check-false (eq? (uri->url long) (uri->url long)) "a URI over 256 characters is not kept"))

(test-case "uri->url equals string->url on 100000 random URIs"
  (define alphabet (string->list "ab.-_~/?=&/.Z9%+;#:"))
  (define rng (make-pseudo-random-generator))
  (parameterize ([current-pseudo-random-generator rng]) (random-seed 20261121))
  (for ([i (in-range 100000)])
    (define s (list->string
               (cons #\/ (for/list ([k (in-range (random 14 rng))])
                           (list-ref alphabet (random (length alphabet) rng))))))
    (unless (equal? (parsed uri->url s) (parsed string->url s))
      (check-same s))))

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

(test-case "uri-bytes->url gives uri->url's url, the last one again for the same bytes"
  (for ([s (in-list '("/" "/a/b?x=1" "/a/b?x=1" "/%7e" "/a%20b" "/caf\u00e9" "/" "//x" "/a/b?x=1"))])
    (define bs (string->bytes/utf-8 s))
    (check-equal? (url->list (uri-bytes->url bs)) (url->list (uri->url s)) s)
    (check-equal? (url->list (uri-bytes->url (bytes-copy bs))) (url->list (string->url s)) s))
  (check-eq? (uri-bytes->url #"/kept") (uri-bytes->url (bytes-copy #"/kept")))
  ;; bytes that are not UTF-8 decode with U+FFFD, as before
  (check-equal? (url->list (uri-bytes->url #"/a\377b")) (url->list (uri->url "/a\uFFFDb"))))

;; read-form on a table: method, URI, headers, body -> bindings (form: name value; file:
;; name filename headers content) and post data, or the message of the exn:fail:network
;; it raises. Each row's expectation is what web-server's own reader
;; (read-bindings&post-data/raw) gives for it, with these limits.
(define form-safety
  (make-safety-limits #:max-request-body-length 1000 #:max-form-data-file-length 1000
                      #:form-data-file-memory-threshold 10))

(define multipart-body
  (bytes-append #"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nfirst\r\n"
                #"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n"
                #"Content-Type: text/plain\r\n\r\nhello world, more than ten\r\n"
                #"--XyZ--\r\n"))
(define multipart-file
  '(file #"f" #"a.txt" ((#"Content-Disposition" . #"form-data; name=\"f\"; filename=\"a.txt\"")
                        (#"Content-Type" . #"text/plain"))
         #"hello world, more than ten"))
(define form-type '(#"Content-Type" . #"application/x-www-form-urlencoded"))

(define form-rows
  `(;; a GET: its query's bindings (not a bare name), never a body
    (#"GET" "/?a=1&b" () #"" ((form #"a" #"1")) #f)
    (#"get" "/?a=1&b=2" (,form-type (#"Content-Length" . #"3")) #"c=3"
            ((form #"a" #"1") (form #"b" #"2")) #f)
    ;; a form: its bindings, then the query's; the body is the post data
    (#"POST" "/?q=1" (,form-type (#"Content-Length" . #"11")) #"x=1&y=%41&z"
             ((form #"x" #"1") (form #"y" #"A") (form #"z" #"") (form #"q" #"1")) #"x=1&y=%41&z")
    ;; a body that is not a form: the query's bindings, the body as post data
    (#"POST" "/?q=1" ((#"Content-Type" . #"text/plain") (#"Content-Length" . #"5")) #"hello"
             ((form #"q" #"1")) #"hello")
    (#"PUT" "/?q=1" ((#"Content-Length" . #"5")) #"hello" ((form #"q" #"1")) #"hello")
    (#"POST" "/" ((#"Content-Length" . #"0")) #"" () #"")
    ;; no Content-Length: no bindings at all, no post data
    (#"POST" "/?q=1" () #"hello" () #f)
    (#"POST" "/?q=1" (,form-type) #"x=1" () #f)
    ;; multipart: the query's bindings, then the parts (a file past the memory threshold
    ;; spooled to a file); no post data
    (#"PUT" "/?q=1" ((#"Content-Type" . #"multipart/form-data; boundary=XyZ")) ,multipart-body
            ((form #"q" #"1") (form #"note" #"first") ,multipart-file) #f)
    (#"POST" "/" ((#"Content-Type" . #"multipart/form-data;boundary=XyZ") (#"Content-Length" . #"1"))
             ,multipart-body ((form #"note" #"first") ,multipart-file) #f)
    ;; what cannot be read
    (#"POST" "/" ((#"Content-Length" . #"10")) #"short" "read-bindings: port closed prematurely")
    (#"POST" "/" ((#"Content-Length" . #"2000")) #"short" "read-bindings: body length exceeds limit")
    (#"POST" "/" ((#"Content-Length" . #"x1")) #"short"
             "read-bindings: POST request contained a non-numeric content-length")
    (#"POST" "/" ((#"Content-Type" . #"multipart/form-data; boundary=x")) #"not multipart"
             "read-mime-multipart: port closed prematurely")
    (#"POST" "/" ((#"Content-Type" . ,(bytes-append #"multipart/form-data; boundary=" (make-bytes 141 65))))
             #"x" "read-mime-multipart: boundary too long")))

;; form-result : promise (or/c bytes #f) -> list ; the bindings opened, and the post data
(define (form-result bindings data)
  (list (for/list ([b (in-list (force bindings))])
          (if (binding:form? b)
              (list 'form (binding-id b) (binding:form-value b))
              (list 'file (binding-id b) (binding:file-filename b)
                    (for/list ([h (in-list (binding:file-headers b))]) (cons (header-field h) (header-value h)))
                    (if (binding:file/port? b)
                        (port->bytes (binding:file/port-in b))
                        (binding:file-content b)))))
        data))

(test-case "read-form: query, form body, other body, multipart, and bodies it cannot read"
  (for ([row (in-list form-rows)])
    (define-values (method uri headers body) (values (list-ref row 0) (list-ref row 1) (list-ref row 2) (list-ref row 3)))
    (define expected (if (= (length row) 6) (list (list-ref row 4) (list-ref row 5)) (list-ref row 4)))
    (define got
      (with-handlers ([exn:fail:network? exn-message])
        (call-with-values
         (λ () (read-form (open-input-bytes body) method (string->url uri)
                          (for/list ([h (in-list headers)]) (header (car h) (cdr h)))
                          1000 form-safety))
         form-result)))
    (check-equal? got expected (format "~a ~a ~s" method uri headers))))
