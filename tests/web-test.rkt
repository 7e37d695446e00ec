#lang racket/base
;; The servlet adapter's own quick paths (fastcgi/private/web.rkt) against the plain way:
;; - uri->url must give exactly what net/url's string->url gives, which it falls back to;
;; - read-params (headers and the params the adapter reads, through its cache of param
;;   name shapes) must give what a table look-up per param gives.
(require net/url
         racket/list
         racket/string
         rackunit
         web-server/http/request-structs
         "../fastcgi/private/web.rkt")

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

(test-case "read-params on chosen params"
  (define nginx
    '((#"QUERY_STRING" . #"") (#"REQUEST_METHOD" . #"GET") (#"CONTENT_TYPE" . #"")
      (#"CONTENT_LENGTH" . #"") (#"SCRIPT_NAME" . #"/") (#"REQUEST_URI" . #"/")
      (#"SERVER_PROTOCOL" . #"HTTP/1.1") (#"REMOTE_ADDR" . #"127.0.0.1")
      (#"SERVER_ADDR" . #"127.0.0.1") (#"SERVER_PORT" . #"8080") (#"HTTP_HOST" . #"x:8080")
      (#"HTTP_ACCEPT_LANGUAGE" . #"en")))
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
