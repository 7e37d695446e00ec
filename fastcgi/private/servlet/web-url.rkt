#lang racket/base
;; The servlet adapter's REQUEST_URI as a url (web.rkt, and relay.rkt for the
;; continuation a URL names): string->url, with a quicker way for plain URIs and the urls
;; of the last ones kept.
(require net/url-string net/url-structs)
(provide uri-bytes->url
         uri->url)

;; uri-bytes->url : bytes -> url
;; uri->url of the bytes decoded as UTF-8 (an invalid sequence as U+FFFD). The last URI
;; whose url was kept is remembered with its bytes: a front sends the same URI again and
;; again, and comparing the bytes spares decoding them and hashing the string.
(define (uri-bytes->url bs)
  (define last (unbox last-uri))
  (cond
    [(and last (bytes=? (car last) bs)) (cdr last)]
    [else
     (define s (bytes->string/utf-8 bs #\uFFFD))
     (define u (uri->url s))
     ;; only a kept url: its strings are immutable, so it may be given again
     (when (eq? u (hash-ref kept-urls s #f))
       (set-box! last-uri (cons (bytes->immutable-bytes bs) u)))
     u]))

(define last-uri (box #f))

;; uri->url : string -> url
;; string->url, with a quicker way for the usual shape: an absolute path of plain segments
;; and an optional query of plain name or name=value pairs (letters, digits, `-._~`; no
;; escapes, `+`, `;` or fragment). Those give the very same url as string->url (a test
;; compares them) in less time, and are kept: the same URI again gets the same url (url
;; structs are immutable, and so are the strings in a kept one) for the cost of a hash of
;; the string and a look-up. At most max-kept-urls of at most
;; max-kept-uri-length characters are kept; when the table is full it is emptied.
(define (uri->url s)
  (or (hash-ref kept-urls s #f)
      (let ([m (if (string=? s "/") root-match (regexp-match plain-uri s))])
        (cond
          [m
           (define u (plain-url m))
           (when (<= (string-length s) max-kept-uri-length)
             (when (>= (hash-count kept-urls) max-kept-urls) (hash-clear! kept-urls))
             (hash-set! kept-urls (string->immutable-string s) u))
           u]
          [else (string->url s)]))))

(define kept-urls (make-hash))
(define max-kept-urls 256)
(define max-kept-uri-length 256)

;; plain-url : (list string string (or/c string #f)) -> url ; from a match of plain-uri
(define (plain-url m)
  (url #f #f #f #f #t
       (for/list ([seg (in-list (regexp-split #rx"/" (cadr m)))])
         (path/param (cond [(string=? seg ".") 'same] [(string=? seg "..") 'up]
                           [else (string->immutable-string seg)])
                     '()))
       (let ([q (caddr m)])
         (if (or (not q) (string=? q ""))
             '()
             (for/list ([pair (in-list (regexp-split #rx"&" q))])
               (define nv (regexp-match #rx"^([^=]*)(?:=(.*))?$" pair))
               (cons (string->symbol (cadr nv)) (and (caddr nv) (string->immutable-string (caddr nv)))))))
       #f))

(define root-match '("/" "" #f))
(define plain-uri
  (let ([c "[A-Za-z0-9._~-]"])
    (pregexp (string-append "^/((?:" c "+/?)*)"  ; not "//": that would start a host
                            "(?:[?]((?:" c "+(?:=" c "*)?(?:&" c "+(?:=" c "*)?)*)?))?$"))))
