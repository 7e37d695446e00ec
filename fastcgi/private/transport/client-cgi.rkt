#lang racket/base
;; The HTTP side of the FastCGI client (client.rkt), over strings and bytes only: the
;; params a front like nginx sends for an HTTP request, and the parsing of the CGI answer
;; an application writes to STDOUT.
(require "../protocol/protocol.rkt")
(provide parse-cgi-response
         cgi-params
         override-params
         ->bytes)

;; parse-cgi-response : bytes -> (values natural (listof (cons string string)) bytes)
;; Header lines up to the first empty line (CRLF or LF), all kept in order, Status included;
;; the status comes from Status, else 302 with a Location, else 200.
(define (parse-cgi-response bs)
  (define len (bytes-length bs))
  (let loop ([i 0] [headers '()])
    (define nl (regexp-match-positions #rx#"\n" bs i))
    (define eol (if nl (caar nl) len))
    (define end (if (and (> eol i) (= 13 (bytes-ref bs (sub1 eol)))) (sub1 eol) eol))
    (define line (subbytes bs i end))
    (cond
      [(zero? (bytes-length line))
       (define hs (reverse headers))
       (values (response-status hs) hs (if nl (subbytes bs (cdar nl)) #""))]
      [(regexp-match #rx#"^([^:\t ]+)[\t ]*:[\t ]*(.*?)[\t ]*$" line)
       => (λ (m) (loop (if nl (cdar nl) len)
                       (cons (cons (bytes->string/utf-8 (cadr m) #\uFFFD)
                                   (bytes->string/utf-8 (caddr m) #\uFFFD))
                             headers)))]
      [else (raise-protocol-error 'parse-cgi-response "malformed header line ~s"
                                  (bytes->string/utf-8 line #\uFFFD))])))

;; response-status : (listof (cons string string)) -> natural
(define (response-status headers)
  (define (header name) (assf (λ (n) (string-ci=? n name)) headers))
  (cond
    [(header "Status")
     => (λ (h)
          (define m (regexp-match #rx"^([1-9][0-9][0-9])(?: |$)" (cdr h)))
          (unless m (raise-protocol-error 'parse-cgi-response "malformed Status ~s" (cdr h)))
          (string->number (cadr m)))]
    [(header "Location") 302]
    [else 200]))

;; cgi-params : string string (listof (cons string string)) (or/c #f natural) list -> list
;; The params a front like nginx sends for an HTTP request; extra pairs override by name.
(define (cgi-params method uri headers content-length extra)
  (define m (regexp-match #rx"^([^?#]*)(?:\\?([^#]*))?" uri))
  (define path (percent-decode (cadr m)))
  (define host (cond [(assf (λ (n) (string-ci=? n "Host")) headers) => cdr] [else "localhost"]))
  (define host-m (regexp-match #rx"^(.*):([0-9]+)$" host))
  (define (content-type)
    (cond [(assf (λ (n) (string-ci=? n "Content-Type")) headers) => cdr]
          [else "application/x-www-form-urlencoded"]))
  (define base
    (append
     `(("GATEWAY_INTERFACE" . "CGI/1.1") ("SERVER_SOFTWARE" . "racket-fastcgi")
       ("SERVER_PROTOCOL" . "HTTP/1.1") ("REQUEST_SCHEME" . "http")
       ("REQUEST_METHOD" . ,method) ("REQUEST_URI" . ,uri) ("DOCUMENT_URI" . ,path)
       ("SCRIPT_NAME" . "") ("PATH_INFO" . ,path) ("QUERY_STRING" . ,(or (caddr m) ""))
       ("SERVER_NAME" . ,(if host-m (cadr host-m) host))
       ("SERVER_PORT" . ,(if host-m (caddr host-m) "80"))
       ("SERVER_ADDR" . "127.0.0.1") ("REMOTE_ADDR" . "127.0.0.1") ("REMOTE_PORT" . "0"))
     (if content-length
         `(("CONTENT_LENGTH" . ,(number->string content-length))
           ("CONTENT_TYPE" . ,(content-type)))
         '())
     (for/list ([h (in-list headers)]
                #:unless (member (string-downcase (car h)) '("content-type" "content-length")))
       (cons (string-append "HTTP_" (regexp-replace* #rx"-" (string-upcase (car h)) "_"))
             (cdr h)))))
  (override-params base extra))

;; override-params : list list -> list ; pairs of extra replace same-named pairs, or are added
(define (override-params base extra)
  (for/fold ([acc base]) ([p (in-list extra)])
    (define name (->bytes (car p)))
    (if (assf (λ (n) (equal? (->bytes n) name)) acc)
        (map (λ (q) (if (equal? (->bytes (car q)) name) p q)) acc)
        (append acc (list p)))))

;; percent-decode : string -> bytes ; %XX escapes to bytes, the rest as UTF-8
(define (percent-decode s)
  (regexp-replace* #rx#"%([0-9a-fA-F][0-9a-fA-F])" (string->bytes/utf-8 s)
                   (λ (_ hex) (bytes (string->number (bytes->string/latin-1 hex) 16)))))

;; ->bytes : (or/c string bytes) -> bytes
(define (->bytes v) (if (string? v) (string->bytes/utf-8 v) v))
