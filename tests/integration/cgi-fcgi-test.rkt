#lang racket/base
;; End to end with the real `cgi-fcgi -bind -connect` (libfcgi-bin, the reference C
;; client): the CGI variables of its environment become our params, its stdin our STDIN,
;; and our STDOUT and STDERR come back on its stdout and stderr. A servlet and a raw
;; handler are each served on a unix socket and on TCP.
(require racket/list
         racket/string
         web-server/dispatch
         web-server/http
         web-server/http/bindings
         "../../fastcgi/main.rkt"
         "../lib/web-app.rkt"
         "lib.rkt")

;; ---------------------------------------------------------------------------------------
;; The apps under test.

(define (hello req)
  (define who (assq 'who (request-bindings req)))
  (text 200 #"OK" (format "Hello, ~a!\n" (if who (cdr who) "nobody"))))

;; echo: what arrived as the body, summarised
(define (echo req)
  (define body (or (request-post-data/raw req) #""))
  (define type (headers-assq* #"Content-Type" (request-headers/raw req)))
  (text 200 #"OK" (format "type=~a length=~a sha1=~a\n"
                          (if type (header-value type) "-") (bytes-length body) (sha1-hex body))))

(define (form req)
  (text 200 #"OK" (format "Hello, ~a!\n" (extract-binding/single 'name (request-bindings req)))))

(define (big req)
  (define n (string->number (extract-binding/single 'size (request-bindings req))))
  (response/output (λ (out) (write-pattern n out)) #:mime-type #"application/octet-stream"))

(define (warn req)
  (write-string "careful: this went to FastCGI STDERR\n" (current-error-port))
  (text 200 #"OK" "warned\n"))

(define (boom req) (error 'boom "deliberate failure"))

(define (not-found req) (text 404 #"Not Found" "not found\n"))

(define-values (app app-url)
  (dispatch-rules
   [("hello") hello]
   [("echo") #:method "post" echo]
   [("form") #:method "post" form]
   [("big") big]
   [("warn") warn]
   [("boom") boom]
   [else not-found]))

;; raw-echo : fastcgi-request -> void ; a few params and the body's length, CGI-style
(define (raw-echo r)
  (define body (let loop ([n 0])
                 (define b (read-bytes 65536 (fastcgi-request-stdin r)))
                 (if (eof-object? b) n (loop (+ n (bytes-length b))))))
  (define (p name) (or (fastcgi-param r name) #"-"))
  (write-string
   (format "Status: 201 Created\r\nContent-Type: text/plain\r\nX-Role: ~a\r\n\r\n" (fastcgi-request-role r))
   (fastcgi-request-stdout r))
  (write-string
   (format "method=~a query=~a uri=~a content-length=~a body=~a keep=~a\n"
           (p "REQUEST_METHOD") (p "QUERY_STRING") (p "REQUEST_URI") (p "CONTENT_LENGTH") body
           (fastcgi-request-keep-conn? r))
   (fastcgi-request-stdout r)))

;; ---------------------------------------------------------------------------------------
;; The tests.

(module+ test
  (require rackunit)

  (define cgi-fcgi (require-program! "/usr/bin/cgi-fcgi" "libfcgi-bin"))

  ;; A parsed CGI answer: status (number), headers ((cons lowercased-name value) ...), body.
  (struct answer (status headers body stderr) #:transparent)

  ;; answer-header : answer string -> (or/c string #f)
  (define (answer-header a name)
    (define p (assoc (string-downcase name) (answer-headers a)))
    (and p (cdr p)))

  ;; parse-cgi : bytes bytes -> answer
  (define (parse-cgi out err)
    (define split (regexp-match-positions #rx#"\r\n\r\n" out))
    (unless split
      (error 'cgi-fcgi-test "no blank line after the headers in ~s" (subbytes out 0 (min 300 (bytes-length out)))))
    (define head (bytes->string/latin-1 (subbytes out 0 (caar split))))
    (define headers
      (for/list ([line (in-list (string-split head "\r\n"))])
        (define m (regexp-match #rx"^([^:]+): ?(.*)$" line))
        (unless m (error 'cgi-fcgi-test "bad header line ~s" line))
        (cons (string-downcase (cadr m)) (caddr m))))
    (define status-line (cdr (or (assoc "status" headers) (cons #f "200 OK"))))
    (answer (string->number (car (string-split status-line)))
            headers (subbytes out (cdar split)) err))

  ;; The CGI variables a test sets; any other CGI-looking variable of our own
  ;; environment is removed, so nothing leaks in as a header.
  (define (cgi-env method uri #:type [type #f] #:length [len #f])
    (define q (regexp-match #rx"^[^?]*\\?(.*)$" uri))
    (define inherited
      (for/list ([name (in-list (environment-variables-names (current-environment-variables)))]
                 #:when (regexp-match? #rx#"^(HTTP_|CONTENT_|REQUEST_|QUERY_|SCRIPT_|PATH_INFO)" name))
        (cons (bytes->string/latin-1 name) #f)))
    (append inherited
            `(("GATEWAY_INTERFACE" . "CGI/1.1") ("SERVER_PROTOCOL" . "HTTP/1.1")
              ("SERVER_NAME" . "localhost") ("SERVER_PORT" . "80") ("REMOTE_ADDR" . "127.0.0.1")
              ("REQUEST_METHOD" . ,method) ("REQUEST_URI" . ,uri)
              ("SCRIPT_NAME" . ,(car (regexp-match #rx"^[^?]*" uri)))
              ("QUERY_STRING" . ,(if q (cadr q) ""))
              ("CONTENT_TYPE" . ,type)
              ("CONTENT_LENGTH" . ,(and len (number->string len)))
              ("HTTP_USER_AGENT" . "cgi-fcgi-test"))))

  ;; fcgi : string string string #:body bytes #:type string -> answer
  ;; One request through cgi-fcgi; it must exit 0.
  (define (fcgi address method uri #:body [body #f] #:type [type #f])
    (define-values (code out err)
      (run-program cgi-fcgi (list "-bind" "-connect" address)
                   #:stdin (or body #"")
                   #:env (cgi-env method uri #:type type #:length (and body (bytes-length body)))
                   #:timeout 20))
    (unless (zero? code)
      (error 'cgi-fcgi-test "cgi-fcgi ~a ~a via ~a exited ~a; stderr: ~a" method uri address code err))
    (parse-cgi out err))

  (define (body-string a) (bytes->string/utf-8 (answer-body a) #\?))

  (define (check-servlet address)
    (test-case (format "~a: GET with a query" address)
      (define a (fcgi address "GET" "/hello?who=w%C3%B6rld&x=1"))
      (check-equal? (answer-status a) 200)
      (check-equal? (answer-header a "Status") "200 OK")
      (check-equal? (answer-header a "Content-Type") "text/plain; charset=utf-8")
      (check-equal? (body-string a) "Hello, wörld!\n")
      (check-equal? (answer-stderr a) #""))
    (test-case (format "~a: POST with a 300 KB body" address)
      (define body (pattern-bytes 3 (+ 3 (* 300 1024))))
      (define a (fcgi address "POST" "/echo" #:body body #:type "application/octet-stream"))
      (check-equal? (answer-status a) 200)
      (check-equal? (body-string a)
                    (format "type=application/octet-stream length=~a sha1=~a\n"
                            (bytes-length body) (sha1-hex body))))
    (test-case (format "~a: POST an urlencoded form" address)
      (define a (fcgi address "POST" "/form" #:body #"name=cgi-fcgi+%26+friends"
                      #:type "application/x-www-form-urlencoded"))
      (check-equal? (answer-status a) 200)
      (check-equal? (body-string a) "Hello, cgi-fcgi & friends!\n"))
    (test-case (format "~a: a 1 MiB answer" address)
      (define n (+ (* 1024 1024) 7))
      (define a (fcgi address "GET" (format "/big?size=~a" n)))
      (check-equal? (answer-status a) 200)
      (check-equal? (answer-header a "Content-Type") "application/octet-stream")
      (check-true (equal? (answer-body a) (pattern-bytes 0 n)) "the 1 MiB answer differs"))
    (test-case (format "~a: the servlet's stderr reaches cgi-fcgi's stderr" address)
      (define a (fcgi address "GET" "/warn"))
      (check-equal? (body-string a) "warned\n")
      (check-equal? (answer-stderr a) #"careful: this went to FastCGI STDERR\n"))
    (test-case (format "~a: a raising servlet is a 500" address)
      (define a (fcgi address "GET" "/boom"))
      (check-equal? (answer-status a) 500)
      (check-regexp-match #rx"^500 " (body-string a)))
    (test-case (format "~a: an unknown path is a 404" address)
      (define a (fcgi address "GET" "/nowhere"))
      (check-equal? (answer-status a) 404)
      (check-equal? (body-string a) "not found\n"))
    (test-case (format "~a: 20 requests in a row, one connection each" address)
      (for ([i (in-range 20)])
        (check-equal? (body-string (fcgi address "GET" (format "/hello?who=~a" i)))
                      (format "Hello, ~a!\n" i)))))

  (define (check-raw address)
    (test-case (format "~a: raw handler sees the CGI environment as params" address)
      (define body (make-bytes 70000 120))
      (define a (fcgi address "PUT" "/raw/thing?a=b&c" #:body body #:type "text/plain"))
      (check-equal? (answer-status a) 201)
      (check-equal? (answer-header a "X-Role") "responder")
      (check-equal? (body-string a)
                    "method=PUT query=a=b&c uri=/raw/thing?a=b&c content-length=70000 body=70000 keep=#f\n"))
    (test-case (format "~a: raw handler, GET without a body" address)
      (define a (fcgi address "GET" "/raw"))
      (check-equal? (answer-status a) 201)
      (check-equal? (body-string a) "method=GET query= uri=/raw content-length=- body=0 keep=#f\n")))

  (call-with-temp-dir
   "fcgi-cgi"
   (λ (dir)
     (define (serve-on start listen)
       (define address #f)
       (define stop (start (λ (a) (set! address a)) listen))
       (values stop (regexp-replace #rx"^unix:" address "")))
     (define servers
       (for*/list ([kind (list 'servlet 'raw)]
                   [listen (list (format "unix:~a" (build-path dir (format "~a.sock" kind)))
                                 "127.0.0.1:0")])
         (define-values (stop address)
           (serve-on (λ (ready listen)
                       (if (eq? kind 'servlet)
                           (serve/fastcgi app #:listen listen #:on-ready ready)
                           (serve/fastcgi-raw raw-echo #:listen listen #:on-ready ready)))
                     listen))
         (list kind stop address)))
     (dynamic-wind
      void
      (λ ()
        (for ([s (in-list servers)])
          (if (eq? (first s) 'servlet) (check-servlet (third s)) (check-raw (third s)))))
      (λ ()
        (for ([s (in-list servers)]) ((second s) #:timeout 2)))))))
