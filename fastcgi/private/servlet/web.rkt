#lang racket/base
;; The web-server adapter: a FastCGI request becomes a `web-server/http` request, and the
;; servlet's response goes out as a CGI-style answer (Status and header lines, a blank
;; line, the body). The request is made of the params (web-params.rkt), REQUEST_URI
;; (web-url.rkt) and the body (web-form.rkt: bindings, multipart uploads spooled to a
;; temporary file past 1 MiB, and their limits, as under serve/servlet); the answers the
;; adapter makes itself (400, 404) are cgi.rkt's status pages.
(require net/url-string
         net/url-structs
         racket/promise
         web-server/http/request-structs
         web-server/dispatchers/dispatch
         web-server/http/response-structs
         web-server/safety-limits
         (only-in web-server/servlet/servlet-structs any->response)
         ;; unchecked, as web-server's request reader builds its requests: this module's
         ;; values come from checked bytes
         (only-in "web-private.rkt" make-request/raw response-output/raw)
         "../util/catch.rkt"
         "../engine/current.rkt"
         "../util/limits.rkt"
         "../util/log.rkt"
         "../engine/request.rkt"
         "web-form.rkt"
         "web-params.rkt"
         "web-url.rkt"
         (only-in "../engine/wire.rkt" conn-server)
         "../engine/log-limit.rkt")
(provide servlet->handler
         uri->url
         uri-bytes->url
         read-params
         read-raw-params
         special-names
         current-fastcgi-request
         authorized)

;; servlet->handler : (request -> (or/c response #f 'bad-url)) limits
;;                    -> (fastcgi-request -> void)
;; run: a servlet as servlet.rkt runs it (servlet-run): #f when no rule matched (404),
;; 'bad-url for a malformed continuation parameter (400).
(define (servlet->handler run lim)
  ;; the body limit of the engine governs uploads too (web-server's own default would cap
  ;; each uploaded file at 10 MiB); its deadlines bound the body's reading, so web-server's
  ;; read timeout is none (web-form.rkt's connection timer never rings)
  (define safety
    (make-safety-limits #:max-request-body-length (limits-max-body lim)
                        #:max-form-data-file-length (limits-max-body lim)
                        #:request-read-timeout +inf.0))
  (λ (r)
    ;; bound for this call only: the thread goes on to serve other requests (raw ones too,
    ;; and other connections' when it is the event loop), which must not see this one
    (parameterize ([current-fastcgi-request r])
      (define req (fastcgi-request->request r safety (limits-max-body lim)))
      (cond
        [(not req) (request-respond-status! r 400)]
        [(eq? req 'bad-uri)
         (refuse-400! r 'bad-uri "REQUEST_URI does not parse")]
        [else
         (define resp (catching exn:dispatcher? (λ (e) #f) (run req)))
         (cond
           [(response? resp) (write-response r resp)]
           ;; dispatch-rules with no matching rule and no else: 404, as under serve/servlet
           [(not resp) (request-respond-status! r 404)]
           [(eq? resp 'bad-url)
            (refuse-400! r 'bad-continuation "malformed continuation URL, or a stateless URL whose signature does not hold (made elsewhere, or under another --secret-file)")]
           ;; an xexpr or another value web-server turns into a response
           [(any->response resp) => (λ (converted) (write-response r converted))]
           [else (raise-arguments-error 'servlet "the servlet's result is not a response" "result" resp)])]))))

;; refuse-400! : fastcgi-request symbol string -> void
;; A request the adapter cannot make into a web-server request: answered 400, and a
;; warning under the log-limit key (at most so many lines for what a peer causes).
(define (refuse-400! r key why)
  (warn-limited! (conn-server (fastcgi-request-conn r)) key
                 (λ () (format "request ~a from ~a: ~a: answered 400"
                               (fastcgi-request-id r) (log-escape (fastcgi-request-peer r)) why)))
  (request-respond-status! r 400))

;; fastcgi-request->request : fastcgi-request safety-limits natural -> (or/c request 'bad-uri #f)
;; #f: the body could not be read as web-server reads it (logged; answered 400). max-body
;; is the safety limits' max-request-body-length.
(define (fastcgi-request->request r safety max-body)
  (define-values (headers special)
    (let*-values ([(v) (fastcgi-request-raw-params r)]
                  [(h s) (if v (read-raw-params v) (values #f #f))])
      (if s (values h s) (read-params (fastcgi-request-params r)))))
  (define (param i [default #""]) (or (vector-ref special i) default))
  (define method (let ([m (param 0)]) (if (zero? (bytes-length m)) #"GET" m)))
  (define uri-bytes
    (or (vector-ref special 1)
        (let ([q (param 2)])
          (bytes-append (param 3) (param 4)
                        (if (zero? (bytes-length q)) #"" (bytes-append #"?" q))))))
  (define uri
    (catching exn:fail? (λ (e) #f)
      (uri-bytes->url (if (zero? (bytes-length uri-bytes)) #"/" uri-bytes))))
  (cond
    [(not uri) 'bad-uri]
    [else
     (define-values (bindings post-data)
       (if (and (bytes=? method #"GET") (null? (url-query uri)))
           ;; what web-server gives a GET without a query: no bindings (it ignores a
           ;; GET's body), and no post data
           (values no-bindings #f)
           (let ([both (catching exn:fail:network?
                                 (λ (e)
                                   (warn-limited! (conn-server (fastcgi-request-conn r)) 'bad-body
                                                  (λ () (format "request ~a from ~a: bad request body: ~a"
                                                                (fastcgi-request-id r)
                                                                (log-escape (fastcgi-request-peer r))
                                                                (log-escape (exn-message e)))))
                                   #f)
                         (call-with-values
                          (λ () (read-form (if (request-body-empty? r) empty-body (fastcgi-request-stdin r))
                                           method uri headers max-body safety))
                          cons))])
             (if both (values (car both) (cdr both)) (values #f #f)))))
     (and bindings
     (make-request/raw method uri headers bindings post-data
                   (param->string server-addr (param 5 #"127.0.0.1"))
                   (param->port (param 6 #"0"))
                   (param->string remote-addr (param 7 #"127.0.0.1"))))]))

;; A body with no bytes, for every request that has none: reading it changes nothing, so
;; requests on any thread share it (read-form only reads it; no request holds it after).
(define empty-body (open-input-bytes #""))

;; The bindings of a GET without a query, as read-form makes them (a promise of the
;; empty list), made once: a forced promise never changes, nor does the empty list, so
;; every such request shares it. Calling read-form for them would cost every GET a
;; promise and a header scan, for an answer known ahead.
(define no-bindings (let ([p (delay '())]) (force p) p))

;; param->string : box bytes -> string
;; The value decoded as UTF-8, immutable: the last one decoded is kept in the box (with
;; its bytes) and given again for the same bytes. A front sends the same SERVER_ADDR
;; request after request, and the engine gives equal values of a connection's requests as
;; the very same bytes (eq?).
(define (param->string last bs)
  (define hit (unbox last))
  (if (eq? (car hit) bs)
      (cdr hit)
      (let ([s (string->immutable-string (bytes->string/utf-8 bs #\?))])
        (set-box! last (cons bs s))
        s)))

;; The last SERVER_ADDR, REMOTE_ADDR and SERVER_PORT: each one pair, of the bytes (found
;; again by eq?) and the value made of them, replaced whole, so a handler on another
;; thread reads the old pair or the new one, never half of each. One entry each; the
;; values (immutable strings, numbers) go into the requests, where no servlet can change
;; them. A hit spares a decoding and an allocation (measured in a loop: most of the cost).
(define server-addr (box (cons #f #f)))
(define remote-addr (box (cons #f #f)))
(define server-port (box (cons #f 0)))

;; param->port : bytes -> natural ; SERVER_PORT as a number (0 when it is not one)
(define (param->port bs)
  (define hit (unbox server-port))
  (if (eq? (car hit) bs)
      (cdr hit)
      (let ([n (or (string->number (bytes->string/latin-1 bs)) 0)])
        (set-box! server-port (cons bs n))
        n)))

;; ---------------------------------------------------------------------------------------
;; Responses.

;; The Status lines made, by code and message: the head of a response that is not the
;; last head (last-head below: one with headers, such as a cookie or a Location, or
;; another code) gets its line by a look-up rather than a number printed, a scan and an
;; append (measured in a loop: the look-up is the cheaper). Bounded: the first 64 pairs
;; only (the codes and messages of the app's responses); a key's message is kept
;; immutable, so a servlet that changes its byte string afterwards cannot disturb the
;; table. The lines are written out, never handed to a servlet.
(define status-lines (make-hash))

;; status-line : natural bytes -> bytes ; "Status: 200 OK\r\n", cached for common pairs
(define (status-line code message)
  (or (hash-ref status-lines (cons code message) #f)
      (let ([line (bytes-append #"Status: " (string->bytes/latin-1 (number->string code))
                                #" " (clean message) #"\r\n")])
        (when (< (hash-count status-lines) 64)
          (hash-set! status-lines (cons code (bytes->immutable-bytes message)) line))
        line)))

;; clean : bytes -> bytes ; no CR, LF or NUL may reach a header line
;; (a loop finds none in the usual header: a regexp match cost more than the rest)
(define (clean bs)
  (if (for/or ([b (in-bytes bs)]) (or (eqv? b 13) (eqv? b 10) (eqv? b 0)))
      (regexp-replace* #rx#"[\r\n\0]" bs #" ")
      bs))

;; bytes-ci=? : bytes bytes -> boolean ; ASCII case-insensitive equality of header names
;; (only letters fold: CR must never equal "-")
(define (bytes-ci=? a b)
  (and (= (bytes-length a) (bytes-length b))
       (for/and ([x (in-bytes a)] [y (in-bytes b)])
         (= (ascii-downcase x) (ascii-downcase y)))))

;; ascii-downcase : byte -> byte
(define (ascii-downcase x) (if (<= 65 x 90) (+ x 32) x))

;; hop-by-hop headers mean nothing in a CGI answer and would confuse the front
(define (hop-by-hop? field)
  (for/or ([h (in-list '(#"Connection" #"Transfer-Encoding" #"Keep-Alive"))])
    (bytes-ci=? field h)))

;; write-response : fastcgi-request response -> void
;; The head leaves in one write into the request's stdout buffer, then the body.
(define (write-response r resp)
  (define out (fastcgi-request-stdout r))
  (define code (response-code resp))
  (request-note-status! r code)
  (define hs (response-headers resp))
  (define mime (response-mime resp))
  (define message (response-message resp))
  (define last (unbox last-head))
  (write-bytes
   (if (and (null? hs) (eqv? code (vector-ref last 0)) (eq? message (vector-ref last 1))
            (eq? mime (vector-ref last 2)))
       (vector-ref last 3)
       (let ([head (response-head code message mime hs)])
         (when (and (null? hs) (immutable? message) (or (not mime) (immutable? mime)))
           (set-box! last-head (vector code message mime head)))
         head))
   out)
  ((response-output/raw resp) out))

;; The last head made for a response with no headers but its Content-Type, with the code,
;; message and mime it was made of. Such a response (response/output, response/xexpr)
;; usually takes its message and mime from literals, the same immutable byte strings each
;; time: then its head is the same too, and is not made again (what this saves was not
;; measured apart from the write of the head). One entry, kept only for immutable message
;; and mime (found again by eq?, they cannot have changed), replaced and read whole (a
;; handler on another thread sees one vector or the other); the head is only written out.
(define last-head (box (vector #f #f #f #f)))

;; response-head : natural bytes (or/c bytes #f) (listof header) -> bytes
(define (response-head code message mime hs)
  ;; the head's pieces, joined by one bytes-append (a bytes port for them costs several
  ;; times as much for a hello head)
  (define lines
    (let loop ([hs hs])
      (cond
        [(null? hs) '(#"\r\n")]
        [(hop-by-hop? (header-field (car hs))) (loop (cdr hs))]
        [else (list* (clean (header-field (car hs))) #": " (clean (header-value (car hs))) #"\r\n"
                     (loop (cdr hs)))])))
  (apply bytes-append
         (status-line code message)
         (if (and mime (not (for/or ([h (in-list hs)]) (bytes-ci=? (header-field h) #"Content-Type"))))
             (list* #"Content-Type: " (clean mime) #"\r\n" lines)
             lines)))

;; authorized : (listof (cons (or/c symbol string) string)) -> response
;; response/authorized (main.rkt, which loads this module on first use): the Authorizer's
;; grant, 200 with a Variable-NAME header per variable; the front passes each to the next
;; stage as a param. Any other response is a denial, sent to the client.
(define (authorized variables)
  (response 200 #"OK" (current-seconds) #f
            (for/list ([v (in-list variables)])
              (header (bytes-append #"Variable-" (string->bytes/utf-8 (format "~a" (car v))))
                      (string->bytes/utf-8 (cdr v))))
            void))
