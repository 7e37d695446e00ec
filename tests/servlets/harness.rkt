#lang racket/base
;; What the servlet tests share (tests/servlet-test.rkt, tests/servlet-hostile-test.rkt):
;; the apps of this folder compiled once, `raco fastcgi serve APP` as a subprocess with a
;; bounded wait for its readiness, a browser-like client over FastCGI and over HTTP (for
;; web-server's own serve/servlet), and the HTML reading that following links and forms
;; needs. Not a test itself (info.rkt keeps `raco test` out of this folder).
(require compiler/cm
         net/uri-codec
         net/url
         racket/file
         racket/list
         racket/string
         xml
         "../../fastcgi/client.rkt"
         "../integration/lib.rkt")
(provide app-path
         compile-apps!
         raco-path
         (struct-out server)
         start-server
         wait-server-ready
         stop-server!
         server-log
         (struct-out resp)
         fcgi-browser
         http-browser
         resp-header
         resp-xexpr
         resp-text
         link
         form-action
         form-inputs
         normalize
         normalize-url
         continuation-param
         call-with-serve/servlet
         wait-until)

(define here (let-values ([(dir _n _d) (split-path (variable-reference->module-source (#%variable-reference)))]) dir))

;; app-path : string -> path ; an app of this folder
(define (app-path name) (simplify-path (build-path here name)))

;; compile-apps! : (listof string) -> void
;; Compiles the apps (to compiled/ here), so that each server process loads them instead of
;; compiling them anew.
(define (compile-apps! names)
  (for ([n (in-list names)]) (managed-compile-zo (app-path n))))

(define raco-path
  (let ([p (find-executable-path "raco")])
    (unless p (error 'harness "raco is not on PATH"))
    (path->string p)))

;; ---------------------------------------------------------------------------------------
;; Servers as processes.

;; A `raco fastcgi serve` process: its proc (integration/lib.rkt), its socket address and
;; its folder (the socket and its stderr file live there).
(struct server (proc address dir))

;; start-server : string (listof string) #:dir path #:env (listof (cons string string))
;;                #:name string -> server
;; `raco fastcgi serve APP ARGS... --listen unix:DIR/NAME.sock`; ARGS default to
;; --single-process. Returns at once: wait-server-ready waits.
(define (start-server app args #:dir dir #:env [env '()] #:name [name "s"])
  (define sock (path->string (build-path dir (string-append name ".sock"))))
  (define vars (environment-variables-copy (current-environment-variables)))
  (for ([kv (in-list env)])
    (environment-variables-set! vars (string->bytes/utf-8 (car kv)) (string->bytes/utf-8 (cdr kv))))
  (define p
    (parameterize ([current-environment-variables vars])
      (start-process name raco-path
                     (append (list "fastcgi" "serve" (path->string (app-path app)) "--listen" (string-append "unix:" sock))
                             args)
                     #:dir dir)))
  (server p (string-append "unix:" sock) dir))

;; server-log : server -> string ; its stderr so far
(define (server-log s) (file->string (proc-stderr-file (server-proc s))))

;; wait-server-ready : server [seconds] -> void
;; Until the log says it serves (single process) or a worker is ready (manager); an exit
;; or the deadline fails with the log.
(define (wait-server-ready s [secs 60])
  (define sp (proc-subprocess (server-proc s)))
  (wait-until secs (format "~a to serve" (server-address s))
              (λ ()
                (define log (server-log s))
                (cond
                  [(regexp-match? #rx"serving .* on unix:|worker [0-9]+ ready" log) #t]
                  [(not (eq? (subprocess-status sp) 'running))
                   (error 'harness "~a exited (~a) before serving:\n~a" (server-address s)
                          (subprocess-status sp) log)]
                  [else #f]))))

;; stop-server! : server -> (or/c natural #f) ; SIGTERM, then SIGKILL; the exit status
(define (stop-server! s) (stop-process! (server-proc s) #:timeout 5))

;; ---------------------------------------------------------------------------------------
;; Browsers: (browser method uri [form]) -> resp. form: an association list of strings,
;; sent url-encoded as a POST body (or appended as the query of a GET).

;; status: number; headers: (listof (cons lower-case-string string)); body: bytes
(struct resp (status headers body) #:transparent)

;; with-form : string string (or/c #f list) -> (values string (or/c #f bytes))
(define (with-form method uri form)
  (cond
    [(not form) (values uri #f)]
    [(equal? method "GET")
     (values (string-append (car (regexp-match #rx"^[^?#]*" uri)) "?" (alist->form-urlencoded* form)) #f)]
    [else (values uri (string->bytes/utf-8 (alist->form-urlencoded* form)))]))

(define (alist->form-urlencoded* form)
  (alist->form-urlencoded (for/list ([p (in-list form)]) (cons (string->symbol (car p)) (cdr p)))))

;; fcgi-browser : string #:timeout seconds #:params-extra list -> browser
;; Requests to a FastCGI address; params-extra replaces or adds params (fastcgi-request's).
(define ((fcgi-browser address #:timeout [timeout 10] #:params-extra [extra '()]) method uri [form #f])
  (define-values (uri* body) (with-form method uri form))
  (define-values (status headers bs)
    (fastcgi-request address #:method method #:uri uri* #:body (or body #"") #:timeout timeout
                     #:params-extra extra
                     #:headers (if body '(("Content-Type" . "application/x-www-form-urlencoded")) '())))
  (resp status (for/list ([h (in-list headers)]) (cons (string-downcase (car h)) (cdr h))) bs))

;; http-browser : port-number -> browser ; requests to 127.0.0.1:port over HTTP
(define ((http-browser port) method uri [form #f])
  (define-values (uri* body) (with-form method uri form))
  (define r (http-request port uri* #:method method #:data body #:timeout 10
                          #:headers (if body '("Content-Type: application/x-www-form-urlencoded") '())))
  (resp (http-response-status r) (http-response-headers r) (http-response-body r)))

;; resp-header : resp string -> (or/c string #f)
(define (resp-header r name)
  (define p (assoc (string-downcase name) (resp-headers r)))
  (and p (cdr p)))

;; resp-xexpr : resp -> xexpr ; the body as an xexpr (response/xexpr writes XML)
(define (resp-xexpr r)
  (parameterize ([permissive-xexprs #t]
                 [collapse-whitespace #f]
                 [xexpr-drop-empty-attributes #t])
    (xml->xexpr (document-element (read-xml (open-input-bytes (resp-body r)))))))

;; resp-text : resp -> string ; the text of the page, its pieces joined by spaces
(define (resp-text r)
  (string-join (let loop ([x (resp-xexpr r)])
                 (cond [(string? x) (list x)]
                       [(pair? x) (append-map loop (if (and (pair? (cdr x)) (list? (cadr x)) (andmap pair? (cadr x)))
                                                       (cddr x) (cdr x)))]
                       [else '()]))
               " "))

;; elements : xexpr symbol -> (listof xexpr) ; every element with that tag, in order
(define (elements x tag)
  (cond
    [(and (pair? x) (symbol? (car x)))
     (define kids (if (and (pair? (cdr x)) (list? (cadr x)) (andmap pair? (cadr x))) (cddr x) (cdr x)))
     (append (if (eq? (car x) tag) (list x) '()) (append-map (λ (k) (elements k tag)) kids))]
    [else '()]))

(define (attr e name)
  (define as (if (and (pair? (cdr e)) (list? (cadr e)) (andmap pair? (cadr e))) (cadr e) '()))
  (define a (assq name as))
  (and a (cadr a)))

;; link : resp string -> string ; the href of the link whose text is text
(define (link r text)
  (define a (for/first ([e (in-list (elements (resp-xexpr r) 'a))]
                        #:when (member text (cddr e)))
              (attr e 'href)))
  (unless a (error 'link "no link ~s in ~a" text (resp-body r)))
  a)

;; form-action : resp -> string ; the first form's action
(define (form-action r)
  (define f (for/first ([e (in-list (elements (resp-xexpr r) 'form))]) (attr e 'action)))
  (unless f (error 'form-action "no form in ~a" (resp-body r)))
  f)

;; form-inputs : resp -> (listof (cons string string)) ; named inputs and their values
(define (form-inputs r)
  (for/list ([e (in-list (elements (resp-xexpr r) 'input))] #:when (attr e 'name))
    (cons (attr e 'name) (or (attr e 'value) ""))))

;; ---------------------------------------------------------------------------------------
;; Comparing with web-server: continuation ids, salts and stuffed continuations differ
;; from one server to the other, the rest must not.

;; param-continuation : string -> (or/c #f string)
;; The k or c entry of one path parameter, as web-server reads it (tests only: `read`).
(define (param-continuation prm)
  (with-handlers ([(λ (e) #t) (λ (e) #f)])
    (define l (read (open-input-string prm)))
    (define v (and (list? l) (or (assoc "k" l) (assoc "c" l))))
    (and v (cdr v))))

;; continuation-param : string -> (or/c #f string) ; the k or c entry of a URL
(define (continuation-param s)
  (for*/or ([p (in-list (url-path (string->url s)))]
            [prm (in-list (path/param-param p))])
    (param-continuation prm)))

;; normalize-url : string -> string ; the continuation parameter replaced by K
(define (normalize-url s)
  (define u (string->url s))
  (url->string
   (struct-copy url u
                [path (for/list ([p (in-list (url-path u))])
                        (if (ormap param-continuation (path/param-param p))
                            (path/param (path/param-path p) '("K"))
                            p))])))

;; normalize : resp -> list ; status, type, location and page, continuations replaced
(define (normalize r)
  (list (resp-status r)
        (resp-header r "content-type")
        (let ([l (resp-header r "location")]) (and l (normalize-url l)))
        (if (regexp-match? #rx"^text/html" (or (resp-header r "content-type") ""))
            (let loop ([x (resp-xexpr r)])
              (cond
                [(and (pair? x) (symbol? (car x)) (pair? (cdr x)) (list? (cadr x)) (andmap pair? (cadr x)))
                 (define hidden-kont? (equal? (attr x 'name) "kont"))
                 (list* (car x)
                        (for/list ([a (in-list (cadr x))])
                          (cond [(memq (car a) '(href action)) (list (car a) (normalize-url (cadr a)))]
                                [(and hidden-kont? (eq? (car a) 'value)) (list 'value "KONT")]
                                [else a]))
                        (map loop (cddr x)))]
                [(pair? x) (map loop x)]
                [else x]))
            (resp-body r))))

;; call-with-serve/servlet : (request -> response) keyword-args (port -> any) -> any
;; web-server's serve/servlet on a free port of 127.0.0.1, every URL to the servlet, for
;; as long as proc runs.
(define (call-with-serve/servlet start proc #:stateless? [stateless? #f] #:stuffer [stuffer #f])
  (define port (car (free-ports 1)))
  (define cust (make-custodian))
  (define serve/servlet (dynamic-require 'web-server/servlet-env 'serve/servlet))
  (define options                       ; sorted by keyword, as keyword-apply wants them
    (append (list (cons '#:banner? #f) (cons '#:command-line? #t) (cons '#:launch-browser? #f)
                  (cons '#:listen-ip "127.0.0.1") (cons '#:port port) (cons '#:servlet-regexp #rx"")
                  (cons '#:stateless? stateless?))
            (if stuffer (list (cons '#:stuffer stuffer)) '())))
  (parameterize ([current-custodian cust])
    (thread (λ () (keyword-apply serve/servlet (map car options) (map cdr options) (list start)))))
  (dynamic-wind
   void
   (λ ()
     (wait-for-tcp port 20)
     (proc port))
   (λ () (custodian-shutdown-all cust))))

;; wait-until is integration/lib.rkt's
