#lang racket/base
;; fastcgi/private/servlet/web-form.rkt: read-form must give the bindings and post data that
;; web-server's own request reader gives, by a table checked against it.
(require net/url
         racket/port
         racket/promise
         rackunit
         web-server/http/request-structs
         web-server/safety-limits
         "../fastcgi/private/servlet/web-form.rkt")

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
