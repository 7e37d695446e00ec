#lang racket/base
;; fastcgi/private/servlet/web-url.rkt against the plain way: uri->url must give exactly what
;; net/url's string->url gives, which it falls back to; uri-bytes->url, which remembers the
;; last URI, must give uri->url's url. Each call gives a url of its own (url structs are
;; mutable): what a servlet does to its request's url, no later request sees.
(require net/url
         rackunit
         "../fastcgi/private/servlet/web-url.rkt")

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

(test-case "uri->url keeps the parts of plain URIs: the same parts again, immutable, still right"
  (define plain '("/" "/a" "/a/b/c.html?id=42&page=3" "/x?y=1&z" "/A_Z-0.9~" "/?a=b&c="))
  (for ([s (in-list plain)])
    (define u1 (uri->url s))
    (define u2 (uri->url (string-copy s)))
    (check-eq? (url-path u2) (url-path u1) (format "~a: the kept path" s))
    (check-eq? (url-query u2) (url-query u1) (format "~a: the kept query" s))
    (check-false (eq? u2 u1) (format "~a: a url of its own" s))
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
  (check-false (eq? (url-path (uri->url long)) (url-path (uri->url long))) "a URI over 256 characters is not kept"))

(test-case "a url changed by its servlet changes no later one's (url structs are mutable)"
  (for ([parse (list uri->url (λ (s) (uri-bytes->url (string->bytes/utf-8 s))))])
    (define u1 (parse "/m/n?k=v"))
    (set-url-path! u1 (list (path/param "changed" '())))
    (set-url-query! u1 '())
    (check-equal? (url->list (parse "/m/n?k=v")) (url->list (string->url "/m/n?k=v")))))

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


(test-case "uri-bytes->url gives uri->url's url, the last one again for the same bytes"
  (for ([s (in-list '("/" "/a/b?x=1" "/a/b?x=1" "/%7e" "/a%20b" "/caf\u00e9" "/" "//x" "/a/b?x=1"))])
    (define bs (string->bytes/utf-8 s))
    (check-equal? (url->list (uri-bytes->url bs)) (url->list (uri->url s)) s)
    (check-equal? (url->list (uri-bytes->url (bytes-copy bs))) (url->list (string->url s)) s))
  (check-eq? (url-path (uri-bytes->url #"/kept")) (url-path (uri-bytes->url (bytes-copy #"/kept"))))
  ;; bytes that are not UTF-8 decode with U+FFFD, as before
  (check-equal? (url->list (uri-bytes->url #"/a\377b")) (url->list (uri->url "/a\uFFFDb"))))

