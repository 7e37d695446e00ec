#lang racket/base
;; A scripted browser for the servlet tests: fetch a page over HTTP (lib.rkt's bounded
;; client, a fresh connection each time), parse the XHTML that response/xexpr writes, and
;; find what a person would click: links by their text, forms with their action and the
;; names of their fields, in page order. Pages compare after normalize-page, which hides
;; the URLs (continuation ids differ from run to run and from server to server).
(require net/uri-codec
         racket/list
         racket/string
         xml
         "lib.rkt")
(provide (struct-out page)
         (struct-out form)
         browse
         submit
         page-title
         page-text
         page-links
         page-forms
         page-elements
         element-text
         find-link
         location-path
         normalize-page
         continuation-owner)

;; A fetched page: the path asked for, the status, the Location header (or #f), the body
;; and its parse (#f when the body is not well-formed XML).
(struct page (path status location body xexpr))

;; A form of a page: its action and the names of its text fields, in page order.
(struct form (action fields) #:transparent)

;; browse : port-number string #:timeout seconds -> page ; GET path on a fresh connection
(define (browse port path #:timeout [timeout 20])
  (response->page path (http-request port path #:timeout timeout)))

;; submit : port-number form (listof string) #:timeout seconds -> page
;; POSTs the values, one per field of the form in order, as application/x-www-form-urlencoded.
(define (submit port f values #:timeout [timeout 20])
  (unless (= (length values) (length (form-fields f)))
    (error 'submit "the form at ~a has fields ~s, given ~a values"
           (form-action f) (form-fields f) (length values)))
  (define body (alist->form-urlencoded
                (for/list ([name (in-list (form-fields f))] [v (in-list values)])
                  (cons (string->symbol name) v))))
  (response->page (form-action f)
                  (http-request port (form-action f) #:method "POST" #:timeout timeout
                                #:data (string->bytes/utf-8 body)
                                #:headers '("Content-Type: application/x-www-form-urlencoded"))))

;; response->page : string http-response -> page
(define (response->page path r)
  (define body (http-response-body r))
  (page path (http-response-status r) (http-response-header r "Location") body (parse-xhtml body)))

;; parse-xhtml : bytes -> (or/c xexpr #f)
(define (parse-xhtml body)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (xml->xexpr (document-element (read-xml (open-input-bytes body))))))

;; page-elements : page symbol -> (listof xexpr) ; every element with that tag, in page order
(define (page-elements p tag)
  (if (page-xexpr p) (elements (page-xexpr p) tag) '()))

;; elements : xexpr symbol -> (listof xexpr)
(define (elements x tag)
  (cond
    [(and (pair? x) (symbol? (car x)))
     (define kids (element-children x))
     (define inner (append-map (λ (k) (elements k tag)) kids))
     (if (eq? (car x) tag) (cons x inner) inner)]
    [else '()]))

;; element-children : xexpr -> list ; what follows the tag and its attribute list
(define (element-children x)
  (define rest (cdr x))
  (if (and (pair? rest) (list? (car rest)) (andmap pair? (car rest))
           (or (null? (car rest)) (symbol? (caar (car rest)))))
      (cdr rest)
      rest))

;; attribute : xexpr symbol -> (or/c string #f)
(define (attribute x name)
  (define rest (cdr x))
  (and (pair? rest) (list? (car rest))
       (let ([a (assq name (filter (λ (p) (and (pair? p) (symbol? (car p)))) (car rest)))])
         (and a (cadr a)))))

;; element-text : xexpr -> string ; the text inside, elements apart by a space (entities,
;; which parse as strings of their own, are not), whitespace collapsed
(define (element-text x)
  (define (strings x)
    (cond
      [(string? x) (list x)]
      [(and (pair? x) (symbol? (car x))) (append (list " ") (append-map strings (element-children x)) (list " "))]
      [(exact-integer? x) (list (string (integer->char x)))]
      [else '()]))
  (string-normalize-spaces (string-append* (strings x))))

;; page-title : page -> (or/c string #f)
(define (page-title p)
  (define ts (page-elements p 'title))
  (and (pair? ts) (element-text (car ts))))

;; page-text : page -> string ; the body's text, whitespace collapsed
(define (page-text p)
  (define bs (page-elements p 'body))
  (if (pair? bs) (element-text (car bs)) ""))

;; page-links : page -> (listof (cons string string)) ; (text . href) of every link
(define (page-links p)
  (for/list ([a (in-list (page-elements p 'a))] #:when (attribute a 'href))
    (cons (element-text a) (attribute a 'href))))

;; page-forms : page -> (listof form) ; the submit buttons are not fields
(define (page-forms p)
  (for/list ([f (in-list (page-elements p 'form))])
    (form (attribute f 'action)
          (for/list ([i (in-list (elements f 'input))]
                     #:when (attribute i 'name)
                     #:unless (equal? (attribute i 'type) "submit"))
            (attribute i 'name)))))

;; find-link : page string -> (or/c string #f) ; the href of the first link with that text
(define (find-link p text)
  (define l (assoc text (page-links p)))
  (and l (cdr l)))

;; location-path : string -> string ; a Location or href without its scheme and host
(define (location-path loc)
  (define m (regexp-match #rx"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*(/.*)?$" loc))
  (cond
    [(not m) loc]
    [(cadr m) (cadr m)]
    [else "/"]))

;; normalize-page : page -> any
;; The status and the parsed page with every href and action replaced by "URL" (a 3xx is
;; its status alone): what two servers of the same servlet must agree on.
(define (normalize-page p)
  (define (norm x)
    (cond
      [(and (pair? x) (symbol? (car x)))
       (define rest (cdr x))
       (if (and (pair? rest) (list? (car rest)) (andmap pair? (car rest))
                (or (null? (car rest)) (symbol? (caar (car rest)))))
           (list* (car x)
                  (for/list ([a (in-list (car rest))])
                    (if (memq (car a) '(href action)) (list (car a) "URL") a))
                  (map norm (cdr rest)))
           (cons (car x) (map norm rest)))]
      [else x]))
  (if (<= 300 (page-status p) 399)
      (list (page-status p))
      (list (page-status p) (and (page-xexpr p) (norm (page-xexpr p))))))

;; continuation-owner : string -> (or/c natural #f)
;; The worker that holds the continuation of a URL served by `raco fastcgi serve`: the low
;; 32 bits of the instance id, the first number of the k parameter.
(define (continuation-owner href)
  (define m (regexp-match #px"\\(\"k\" \\. \"\\(([0-9]+) " (uri-decode (location-path href))))
  (and m (bitwise-and (string->number (cadr m)) #xFFFFFFFF)))

(module+ test
  (require rackunit)
  ;; html : string string -> bytes ; a page like the blog's, with these URLs
  (define (html href action)
    (string->bytes/utf-8
     (string-append "<html><head><title>My Blog</title></head><body><h1>My Blog</h1>"
                    "<div class=\"post\"><a href=\"" href "\">First &amp; Post</a><p>a &lt;b&gt;<i>c</i></p></div>"
                    "<form action=\"" action "\"><input name=\"input_0\" type=\"text\"/><input name=\"input_1\"/>"
                    "<input type=\"submit\"/></form></body></html>")))
  (define k-url "/;((%22k%22%20.%20%22(4294967299%201%2058)%22))")
  (define p (page "/" 200 #f #"" (parse-xhtml (html k-url "/x"))))
  (check-equal? (page-title p) "My Blog")
  (check-equal? (page-text p) "My Blog First & Post a <b> c")
  (check-equal? (find-link p "First & Post") k-url)
  (check-equal? (page-forms p) (list (form "/x" '("input_0" "input_1"))))
  (check-equal? (continuation-owner (find-link p "First & Post")) 3)
  (check-equal? (continuation-owner "/plain") #f)
  (check-equal? (location-path "http://127.0.0.1:80/a;b?c") "/a;b?c")
  (check-equal? (location-path "/a") "/a")
  (check-false (parse-xhtml #"<html><p></html>"))
  (check-equal? (normalize-page p) (normalize-page (page "/" 200 #f #"" (parse-xhtml (html "/other" "/y")))))
  (check-equal? (normalize-page (page "/" 303 "/a" #"" #f)) (normalize-page (page "/" 303 "/b" #"" #f)))
  (check-not-equal? (normalize-page p) (normalize-page (struct-copy page p [status 500]))))
