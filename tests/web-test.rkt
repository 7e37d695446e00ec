#lang racket/base
;; The servlet adapter's own URI parser (fastcgi/private/web.rkt, uri->url): its quick
;; path must give exactly what net/url's string->url gives, which it falls back to.
(require net/url
         rackunit
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
