#lang racket/base
;; The servlet adapter's REQUEST_URI as a url (web.rkt, and relay.rkt for the
;; continuation a URL names): string->url, with a quicker way for plain URIs, whose parts
;; are kept. Every call gives a url of its own: url structs are mutable (set-url-path! and
;; the like), and a servlet that changed its request's url must not change a later one's.
(require net/url-string net/url-structs)
(provide uri-bytes->url
         uri->url)

;; uri-bytes->url : bytes -> url
;; uri->url of the bytes decoded as UTF-8 (an invalid sequence as U+FFFD).
(define (uri-bytes->url bs)
  (define last (unbox last-uri))
  (cond
    [(and last (bytes=? (car last) bs)) (parts->url (cdr last))]
    [else
     (define s (bytes->string/utf-8 bs #\uFFFD))
     (define parts (plain-parts s))
     (cond
       [parts
        (set-box! last-uri (cons (bytes->immutable-bytes bs) parts))
        (parts->url parts)]
       [else (string->url s)])]))

;; The last plain URI's bytes and parts: a front sends the same URI again and again, and
;; comparing the bytes spares decoding them and hashing the string. One entry, its bytes
;; immutable; the pair is replaced whole (a handler on another thread reads either one).
(define last-uri (box #f))

;; uri->url : string -> url
;; string->url, with a quicker way for the usual shape: an absolute path of plain segments
;; and an optional query of plain name or name=value pairs (letters, digits, `-._~`; no
;; escapes, `+`, `;` or fragment). Those give a url equal to string->url's (a test
;; compares them) in less time.
(define (uri->url s)
  (define parts (plain-parts s))
  (if parts (parts->url parts) (string->url s)))

;; plain-parts : string -> (or/c parts #f) ; #f for a URI that is not plain
;; parts: (cons (listof path/param) (listof (cons symbol (or/c string #f)))), the path and
;; query of the url.
(define (plain-parts s)
  (or (hash-ref kept-urls s #f)
      (let ([m (if (string=? s "/") root-match (regexp-match plain-uri s))])
        (and m
             (let ([parts (match->parts m)])
               (when (<= (string-length s) max-kept-uri-length)
                 (when (>= (hash-count kept-urls) max-kept-urls) (hash-clear! kept-urls))
                 (hash-set! kept-urls (string->immutable-string s) parts))
               parts)))))

;; The parts of plain URIs, by URI: the same URI again costs a hash of the string and a
;; look-up instead of a regexp match and a list of segments (strings, symbols, structs).
;; Bounded: at most max-kept-urls URIs (which come from the client) of at most
;; max-kept-uri-length characters; when full, the table is emptied. Shared by every
;; request: nothing in the parts can change (lists and pairs, path/param structs,
;; immutable strings, symbols), and each request gets its own url struct around them.
(define kept-urls (make-hash))
(define max-kept-urls 256)
(define max-kept-uri-length 256)

;; parts->url : parts -> url ; a new url of a plain URI's parts
;; The struct's own constructor: the contracted one would check every segment again, on
;; every request, and wrap the url in a chaperone that each field access goes through.
;; (The setters a servlet may call on it are still the contracted ones.)
(define (parts->url parts) (make-url/unchecked #f #f #f #f #t (car parts) (cdr parts) #f))
(define make-url/unchecked (struct-type-make-constructor struct:url))

;; match->parts : (list string string (or/c string #f)) -> parts ; from a match of plain-uri
(define (match->parts m)
  (cons (for/list ([seg (in-list (regexp-split #rx"/" (cadr m)))])
          (path/param (cond [(string=? seg ".") 'same] [(string=? seg "..") 'up]
                            [else (string->immutable-string seg)])
                      '()))
        (let ([q (caddr m)])
          (if (or (not q) (string=? q ""))
              '()
              (for/list ([pair (in-list (regexp-split #rx"&" q))])
                (define nv (regexp-match #rx"^([^=]*)(?:=(.*))?$" pair))
                (cons (string->symbol (cadr nv)) (and (caddr nv) (string->immutable-string (caddr nv)))))))))

(define root-match '("/" "" #f))
(define plain-uri
  (let ([c "[A-Za-z0-9._~-]"])
    (pregexp (string-append "^/((?:" c "+/?)*)"  ; not "//": that would start a host
                            "(?:[?]((?:" c "+(?:=" c "*)?(?:&" c "+(?:=" c "*)?)*)?))?$"))))
