#lang racket/base
;; The bindings and raw post data of a servlet request, as web-server's own request reader
;; makes them (read-bindings&post-data/raw in web-server/http/request, which that module
;; exports only to its tests): a GET has its query's bindings and no post data; a body
;; of Content-Length bytes is the post data, and its bindings too when it is a form
;; (application/x-www-form-urlencoded, web-server's parse-bindings), before the query's;
;; a multipart/form-data body gives the query's bindings then its parts (fields, and
;; files spooled to a temporary file past the safety limits' threshold), no post data.
;; Multipart parsing is web-server's, reached through the request reader it exports
;; (make-read-request) on a head made here and a connection made as its documentation
;; asks (new-connection): the parts, their limits and the spooling stay exactly as under
;; serve/servlet. A body that cannot be read so raises exn:fail:network (the adapter
;; answers 400); the engine's own body errors pass through.
;; web-server/http/request is not documented: at load, a form of each kind is read here
;; and its bindings checked (forms-probe); where they are not as expected, such bodies
;; are refused (400) and one line says why, rather than bindings read wrongly.
(require net/url-string
         net/url-structs
         racket/port
         racket/promise
         (only-in web-server/http/request make-read-request parse-bindings)
         (only-in web-server/http/request-structs request-bindings/raw-promise binding-id
                  binding:form-value binding:file? binding:file-filename binding:file-content
                  binding:file/port? binding:file/port-in)
         web-server/safety-limits
         (only-in web-server/private/connection-manager
                  connection-timer new-connection start-connection-manager)
         (only-in web-server/private/timer cancel-timer!)
         ;; unchecked, as web.rkt builds its requests: the values come from checked bytes
         (only-in "web-private.rkt" binding:form/raw header-value/raw headers-assq*/raw)
         "../util/probes.rkt"
         (only-in "../protocol/cgi.rkt" parse-content-length))
(provide read-form
         form-readers)

;; read-form : input-port bytes url (listof header) natural safety-limits
;;             -> (values (promise (listof binding)) (or/c bytes #f))
;; in holds the body; max-body is the safety limits' max-request-body-length.
(define (read-form in method uri headers max-body safety)
  (define query (delay (query-bindings uri)))
  (define type (let ([h (headers-assq*/raw #"Content-Type" headers)]) (and h (header-value/raw h))))
  (cond
    [(regexp-match? #rx#"^[Gg][Ee][Tt]$" method) (values query #f)]
    [(and type (regexp-match #rx#"multipart/form-data; *boundary=(.*)" type))
     => (λ (m)
          (define parts (read-multipart in (cadr m) safety))
          (values (delay (append (force query) parts)) #f))]
    [else
     (define data (read-body in method headers max-body))
     (cond
       ;; no Content-Length: no body, and no bindings either (not even the query's)
       [(not data) (values (delay '()) #f)]
       [(and type (regexp-match? #rx#"application/x-www-form-urlencoded" type))
        (unless urlencoded-ok?
          (network-error "application/x-www-form-urlencoded bodies are not read on this Racket (the log says why, at start)"))
        (values (delay (append (parse-bindings data) (force query))) data)]
       [else (values query data)])]))

;; query-bindings : url -> (listof binding) ; each name=value of the query (not a bare name)
(define (query-bindings uri)
  (for/list ([q (in-list (url-query uri))] #:when (and (symbol? (car q)) (string? (cdr q))))
    (binding:form/raw (string->bytes/utf-8 (symbol->string (car q))) (string->bytes/utf-8 (cdr q)))))

;; read-body : input-port bytes (listof header) natural -> (or/c bytes #f)
;; The Content-Length bytes of the body; #f without a Content-Length.
(define (read-body in method headers max-body)
  (define h (headers-assq*/raw #"Content-Length" headers))
  (and h
       (let ([len (parse-content-length (header-value/raw h))])
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

;; multipart-bindings : procedure input-port bytes safety-limits -> (listof binding)
;; web-server's reader, given a head of one Content-Type line and then the body: it parses
;; the parts as it would for an HTTP request. A boundary longer than web-server allows
;; (140), or with a CR or LF (which would end the head's line), is refused here.
(define (multipart-bindings make-reader in boundary safety)
  (when (> (bytes-length boundary) 140)
    (raise (exn:fail:network "read-mime-multipart: boundary too long" (current-continuation-marks))))
  (when (regexp-match? #rx#"[\r\n]" boundary)
    (raise (exn:fail:network "read-mime-multipart: malformed boundary" (current-continuation-marks))))
  (define head (bytes-append #"POST / HTTP/1.1\r\nContent-Type: multipart/form-data; boundary="
                             boundary #"\r\n\r\n"))
  (define c (new-connection (connection-manager) +inf.0
                            (input-port-append #f (open-input-bytes head) in)
                            (open-output-nowhere) (current-custodian) #f))
  ;; the connection's timer never rings (+inf.0, and the reader resets it to the safety
  ;; limits' read timeout, which web.rkt makes +inf.0: the engine's own deadlines bound
  ;; the body's reading); cancelled after, so that its manager forgets it
  (dynamic-wind
   void
   (λ ()
     (define-values (req close?) ((make-reader #:safety-limits safety) c 0 no-addresses))
     (force (request-bindings/raw-promise req)))
   (λ () (cancel-timer! (connection-timer c)))))

;; no-addresses : input-port -> (values string string) ; the reader's addresses, unused
(define (no-addresses in) (values "" ""))

;; connection-manager : -> connection-manager
;; Made at its first use, the probe's multipart body at load (its timer manager is a
;; thread that waits).
(define (connection-manager)
  (unless manager (set! manager (start-connection-manager)))
  manager)
(define manager #f)

;; ---------------------------------------------------------------------------------------
;; The probes of web-server's readers, at load.

;; A form of each kind, and the bindings web-server reads of it (name, then value or a
;; file's name and content).
(define probe-urlencoded #"a=1&b=x%20y&c")
(define probe-urlencoded-bindings '((#"a" #"1") (#"b" #"x y") (#"c" #"")))
;; The multipart form has a file part only: web-server's reader makes a temporary file for
;; each part it reads (spooled to past a threshold), and leaves it; a file part's is found
;; by its port's name and removed (spooled-files-removed), where a field's cannot be.
(define probe-multipart
  (bytes-append #"--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\n"
                #"Content-Type: text/plain\r\n\r\nfile content\r\n--XyZ--\r\n"))
(define probe-multipart-bindings '((#"f" #"x.txt" #"file content")))

;; spooled-files-removed : (listof binding) -> (listof binding)
;; The bindings, once the temporary files behind their file parts are gone: the probe runs
;; in every process that loads a servlet, and a pool keeps nothing in the temporary folder.
(define (spooled-files-removed bs)
  (for ([b (in-list bs)] #:when (binding:file/port? b))
    (define name (object-name (binding:file/port-in b)))
    (when (or (path? name) (string? name))
      (with-handlers ([exn:fail:filesystem? void]) (delete-file name))))
  bs)

;; binding->list : binding -> list ; a form field's name and value, a file's name, file name and content
(define (binding->list b)
  (if (binding:file? b)
      (list (binding-id b) (binding:file-filename b) (binding:file-content b))
      (list (binding-id b) (binding:form-value b))))

;; bindings-probe : (-> (listof binding)) (listof list) -> (or/c #t string)
(define (bindings-probe read expected)
  (define got (map binding->list (read)))
  (or (equal? got expected) (format "reads a probe form as ~.s, expected ~.s" got expected)))

;; form-readers : (bytes -> (listof binding)) procedure -> (values boolean procedure)
;; Whether urlencoded bodies are read with parse, and the reader of multipart bodies on
;; make-reader (make-read-request), each probed with its form; where one is not as
;; expected, such bodies are refused (exn:fail:network, 400), with the line.
(define (form-readers parse make-reader)
  (define (multipart in boundary safety) (multipart-bindings make-reader in boundary safety))
  (values
   (assumption-holds? "web-server's parse-bindings (web-server/http/request)"
                      (λ () (bindings-probe (λ () (parse probe-urlencoded)) probe-urlencoded-bindings))
                      "application/x-www-form-urlencoded bodies are refused (400)")
   (if (assumption-holds? "web-server's make-read-request (web-server/http/request) on a multipart body"
                          (λ () (bindings-probe (λ () (spooled-files-removed
                                                       (multipart (open-input-bytes probe-multipart) #"XyZ"
                                                                  (make-safety-limits #:request-read-timeout +inf.0))))
                                                probe-multipart-bindings))
                          "multipart/form-data bodies are refused (400)")
       multipart
       (λ (in boundary safety) (network-error "multipart/form-data bodies are not read on this Racket (the log says why, at start)")))))

(define-values (urlencoded-ok? read-multipart) (form-readers parse-bindings make-read-request))
