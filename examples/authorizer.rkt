#lang racket/base
;; A FastCGI Authorizer: the front asks it about each request before serving it (lighttpd
;; "mode" => "authorizer", Apache mod_fcgid FcgidAuthorizer). A valid bearer token is
;; granted (200) and the user's name is passed on to the next stage as REMOTE_USER; no
;; token is 401 with a challenge, an unknown token 403. The front then serves the request
;; (a static file, another app) or sends the denial to the client.
;;   raco fastcgi serve examples/authorizer.rkt --listen unix:/tmp/auth.sock
;; The tokens come from EXAMPLE_TOKENS ("token=user,token=user"); the default pair is for
;; trying it out only.
(require fastcgi
         racket/string
         web-server/http)
(provide start fastcgi-roles)

(define fastcgi-roles '(authorizer))

;; tokens : hash string -> string, read once at start
(define tokens
  (for/hash ([pair (in-list (string-split (or (getenv "EXAMPLE_TOKENS") "demo-token=demo")
                                          ","))]
             #:when (regexp-match? #rx"^[^=]+=[^=]+$" pair))
    (define kv (string-split pair "="))
    (values (car kv) (cadr kv))))

;; bearer-token : request -> (or/c string #f)
(define (bearer-token req)
  (define h (headers-assq* #"Authorization" (request-headers/raw req)))
  (define m (and h (regexp-match #rx#"^[Bb]earer +([^ ]+) *$" (header-value h))))
  (and m (bytes->string/utf-8 (cadr m) #\?)))

;; deny : natural bytes (listof header) -> response
(define (deny code message headers)
  (response/full code message (current-seconds) #"text/plain; charset=utf-8" headers
                 (list (bytes-append message #"\n"))))

;; start : request -> response ; 200 granting, 401 or 403
(define (start req)
  (define token (bearer-token req))
  (define user (and token (hash-ref tokens token #f)))
  (cond
    [user (response/authorized #:variables `((REMOTE_USER . ,user)))]
    [token (deny 403 #"Forbidden" '())]
    [else (deny 401 #"Unauthorized"
                (list (header #"WWW-Authenticate" #"Bearer realm=\"example\"")))]))
