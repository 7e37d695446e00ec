#lang racket/base
;; The bindings and raw post data of a servlet request, as web-server's own request reader
;; makes them (read-bindings&post-data/raw in web-server/http/request, which that module
;; exports only to its tests): a GET has its query's bindings and no post data; a body
;; of Content-Length bytes is the post data, and its bindings too when it is a form
;; (application/x-www-form-urlencoded, web-server's parse-bindings), before the query's;
;; a multipart/form-data body gives the query's bindings then its parts (fields, and
;; files spooled to a temporary file past the safety limits' threshold), no post data.
;; Multipart parsing is web-server's, reached through the request reader it exports
;; (make-read-request) on a head made here: the parts, their limits and the spooling
;; stay exactly as under serve/servlet. A body that cannot be read so raises
;; exn:fail:network (the adapter answers 400); the engine's own body errors pass through.
(require net/url-string
         net/url-structs
         racket/port
         racket/promise
         (only-in web-server/http/request make-read-request parse-bindings)
         (only-in web-server/http/request-structs request-bindings/raw-promise)
         ;; unchecked, as web.rkt builds its requests: the values come from checked bytes
         (only-in (submod web-server/http/request-structs private)
                  binding:form header-value headers-assq*)
         (only-in web-server/private/connection-manager connection)
         (only-in web-server/private/timer start-timer-manager timer)
         (only-in "../protocol/cgi.rkt" parse-content-length))
(provide read-form)

;; read-form : input-port bytes url (listof header) natural safety-limits
;;             -> (values (promise (listof binding)) (or/c bytes #f))
;; in holds the body; max-body is the safety limits' max-request-body-length.
(define (read-form in method uri headers max-body safety)
  (define query (delay (query-bindings uri)))
  (define type (let ([h (headers-assq* #"Content-Type" headers)]) (and h (header-value h))))
  (cond
    [(regexp-match? #rx#"^[Gg][Ee][Tt]$" method) (values query #f)]
    [(and type (regexp-match #rx#"multipart/form-data; *boundary=(.*)" type))
     => (λ (m)
          (define parts (multipart-bindings in (cadr m) safety))
          (values (delay (append (force query) parts)) #f))]
    [else
     (define data (read-body in method headers max-body))
     (cond
       ;; no Content-Length: no body, and no bindings either (not even the query's)
       [(not data) (values (delay '()) #f)]
       [(and type (regexp-match? #rx#"application/x-www-form-urlencoded" type))
        (values (delay (append (parse-bindings data) (force query))) data)]
       [else (values query data)])]))

;; query-bindings : url -> (listof binding) ; each name=value of the query (not a bare name)
(define (query-bindings uri)
  (for/list ([q (in-list (url-query uri))] #:when (and (symbol? (car q)) (string? (cdr q))))
    (binding:form (string->bytes/utf-8 (symbol->string (car q))) (string->bytes/utf-8 (cdr q)))))

;; read-body : input-port bytes (listof header) natural -> (or/c bytes #f)
;; The Content-Length bytes of the body; #f without a Content-Length.
(define (read-body in method headers max-body)
  (define h (headers-assq* #"Content-Length" headers))
  (and h
       (let ([len (parse-content-length (header-value h))])
         (unless (exact-integer? len)
           (network-error (format "~a request contained a non-numeric content-length" method)))
         (when (> len max-body) (network-error "body length exceeds limit"))
         (define data (read-at-most len in))
         (when (< (bytes-length data) len) (network-error "port closed prematurely"))
         data)))

;; read-at-most : natural input-port -> bytes
;; Up to n bytes, read a chunk at a time: what a client declared is not allocated before
;; it has sent it.
(define (read-at-most n in)
  (let loop ([left n] [acc '()])
    (define bs (if (zero? left) eof (read-bytes (min left 65536) in)))
    (cond
      [(not (eof-object? bs)) (loop (- left (bytes-length bs)) (cons bs acc))]
      [(and (pair? acc) (null? (cdr acc))) (car acc)]
      [else (apply bytes-append (reverse acc))])))

;; network-error : string -> none ; as web-server's reader reports a body it cannot read
(define (network-error msg)
  (raise (exn:fail:network (string-append "read-bindings: " msg) (current-continuation-marks))))

;; multipart-bindings : input-port bytes safety-limits -> (listof binding)
;; web-server's reader, given a head of one Content-Type line and then the body: it parses
;; the parts as it would for an HTTP request. A boundary longer than web-server allows
;; (140), or with a CR or LF (which would end the head's line), is refused here.
(define (multipart-bindings in boundary safety)
  (when (> (bytes-length boundary) 140)
    (raise (exn:fail:network "read-mime-multipart: boundary too long" (current-continuation-marks))))
  (when (regexp-match? #rx#"[\r\n]" boundary)
    (raise (exn:fail:network "read-mime-multipart: malformed boundary" (current-continuation-marks))))
  (define head (bytes-append #"POST / HTTP/1.1\r\nContent-Type: multipart/form-data; boundary="
                             boundary #"\r\n\r\n"))
  (define c (connection 0 (idle-timer) (input-port-append #f (open-input-bytes head) in)
                        (open-output-nowhere) (current-custodian) #f))
  (define-values (req close?) ((make-read-request #:safety-limits safety) c 0 no-addresses))
  (force (request-bindings/raw-promise req)))

;; no-addresses : input-port -> (values string string) ; the reader's addresses, unused
(define (no-addresses in) (values "" ""))

;; idle-timer : -> timer
;; The reader resets its connection's timer; this one is never started, so never rings:
;; the engine's own deadlines bound the body's reading. Its manager (a thread that waits)
;; is made with the first.
(define (idle-timer)
  (unless manager (set! manager (start-timer-manager)))
  (timer manager +inf.0 void))
(define manager #f)
