#lang racket/base
;; The web-server adapter: a FastCGI request becomes a `web-server/http` request, and the
;; servlet's response goes out as a CGI-style answer (Status and header lines, a blank
;; line, the body). Body and form parsing is web-server's own, so bindings, multipart
;; uploads (spooled to a temporary file past 1 MiB) and their limits behave exactly as
;; under serve/servlet.
(require net/url
         racket/promise
         racket/string
         web-server/http/request-structs
         web-server/dispatchers/dispatch
         web-server/http/response-structs
         web-server/safety-limits
         (only-in web-server/servlet/servlet-structs any->response)
         ;; The structs' own constructors and accessors, as web-server's request.rkt uses
         ;; them: the contracted ones cost 0.08 us per header, 0.2 us per request and 0.5 us
         ;; per response-output (which wraps the servlet's procedure again) for values this
         ;; module builds itself from checked bytes.
         (only-in (submod web-server/http/request-structs private)
                  [make-header make-header/raw] [make-request make-request/raw])
         (only-in (submod web-server/http/response-structs private)
                  [response-output response-output/raw])
         (only-in (submod web-server/http/request internal-test) read-bindings&post-data/raw)
         (only-in racket/unsafe/ops unsafe-bytes->immutable-bytes!)
         "catch.rkt"
         "current.rkt"
         "limits.rkt"
         "log.rkt"
         (only-in "protocol.rkt" pair-head bytes-range=?)
         "request.rkt"
         (only-in "wire.rkt" conn-server)
         "log-limit.rkt")
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
  ;; each uploaded file at 10 MiB)
  (define safety
    (make-safety-limits #:max-request-body-length (limits-max-body lim)
                        #:max-form-data-file-length (limits-max-body lim)))
  (λ (r)
    (current-fastcgi-request r)
    (define req (fastcgi-request->request r safety))
    (cond
      [(not req) (request-respond-status! r 400 "Bad Request")]
      [(eq? req 'bad-uri)
       (warn-limited! (conn-server (fastcgi-request-conn r)) 'bad-uri
                      (λ () (format "request ~a from ~a: REQUEST_URI does not parse: answered 400"
                                    (fastcgi-request-id r) (log-escape (fastcgi-request-peer r)))))
       (request-respond-status! r 400 "Bad Request")]
      [else
       (define resp (catching exn:dispatcher? (λ (e) #f) (run req)))
       (cond
         [(response? resp) (write-response r resp)]
         ;; dispatch-rules with no matching rule and no else: 404, as under serve/servlet
         [(not resp) (request-respond-status! r 404 "Not Found")]
         [(eq? resp 'bad-url)
          (warn-limited! (conn-server (fastcgi-request-conn r)) 'bad-continuation
                         (λ () (format "request ~a from ~a: malformed continuation URL, or a stateless URL whose signature does not hold (made elsewhere, or under another --secret-file): answered 400"
                                       (fastcgi-request-id r) (log-escape (fastcgi-request-peer r)))))
          (request-respond-status! r 400 "Bad Request")]
         ;; an xexpr or another value web-server turns into a response
         [(any->response resp) => (λ (converted) (write-response r converted))]
         [else (raise-arguments-error 'servlet "the servlet's result is not a response" "result" resp)])])))

;; param->header-name : bytes -> (or/c bytes #f)
;; Cached: a front sends the same dozen header names on every request, and building one
;; (split, titlecase, join) cost more than the rest of the adapter's work on a header.
;; The cache holds at most max-cached-names names of at most max-cached-name-bytes each,
;; since the names come from the client; a cached name is immutable, so that no servlet
;; can change it for the next request. CONTENT_TYPE and CONTENT_LENGTH map to the very
;; byte strings #"Content-Type" and #"Content-Length" of this module (read-params
;; compares with eq?).
(define (param->header-name name)
  (define hit (hash-ref header-names name none))
  (cond
    [(not (eq? hit none)) hit]
    [else
     (define v (let ([h (compute-header-name name)]) (and h (bytes->immutable-bytes h))))
     (when (and (< (hash-count header-names) max-cached-names)
                (<= (bytes-length name) max-cached-name-bytes))
       (hash-set! header-names (bytes->immutable-bytes name) v))
     v]))

(define header-names (make-hash))
(define max-cached-names 256)
(define max-cached-name-bytes 256)
(define none (string->uninterned-symbol "none"))

;; compute-header-name : bytes -> (or/c bytes #f)
(define (compute-header-name name)
  (cond
    [(equal? name #"CONTENT_TYPE") #"Content-Type"]
    [(equal? name #"CONTENT_LENGTH") #"Content-Length"]
    [(and (> (bytes-length name) 5) (equal? (subbytes name 0 5) #"HTTP_"))
     (string->bytes/latin-1
      (string-join (for/list ([part (in-list (regexp-split #rx"_" (bytes->string/latin-1 (subbytes name 5))))])
                     (string-titlecase part))
                   "-"))]
    [else #f]))

;; The params the adapter reads, by slot in the vector read-params fills.
(define special-names
  #(#"REQUEST_METHOD" #"REQUEST_URI" #"QUERY_STRING" #"SCRIPT_NAME" #"PATH_INFO"
    #"SERVER_ADDR" #"SERVER_PORT" #"REMOTE_ADDR"))

;; special-slot : bytes -> (or/c natural #f)
(define (special-slot name)
  (for/first ([s (in-vector special-names)] [i (in-naturals)] #:when (bytes=? s name)) i))

;; A shape: the param names of a request in order, and what each one is to the adapter:
;; its header name (or #f) and its slot in special-names (or #f). A front sends the same
;; names in the same order request after request, so the adapter keeps the shapes it saw
;; (at most max-shapes, by number of params, one each, and only those whose names total
;; at most max-shape-bytes: names come from the client) and checks a request's names
;; against the shape with bytes=? instead of looking each one up in tables (in-memory,
;; 10.4-11.1 us a servlet request with the look-ups, 8.3-10.1 with the shapes).
(struct shape (names headers slots [memo #:mutable]))
(define shapes (make-hasheqv))
(define max-shapes 64)
(define max-shape-bytes 8192)

;; params-shape : (listof (cons bytes bytes)) natural -> shape
(define (params-shape params n)
  (define old (hash-ref shapes n #f))
  (cond
    [(and old (for/and ([p (in-list params)] [name (in-vector (shape-names old))])
                ;; eq?: the engine shares equal names between a connection's requests
                (or (eq? (car p) name) (bytes=? (car p) name))))
     (unless (eq? old (unbox last-shape)) (set-box! last-shape old))
     old]
    [else
     (define new
       (shape (for/vector #:length n ([p (in-list params)]) (bytes->immutable-bytes (car p))) ; no copy when immutable
              (for/vector #:length n ([p (in-list params)]) (param->header-name (car p)))
              (for/vector #:length n ([p (in-list params)]) (special-slot (car p)))
              #f))
     (when (and (or old (< (hash-count shapes) max-shapes))
                (<= (for/sum ([name (in-vector (shape-names new))]) (bytes-length name))
                    max-shape-bytes))
       (hash-set! shapes n new)
       (set-box! last-shape new))
     new]))

;; The shape kept last, which read-raw-params tries first.
(define last-shape (box #f))

;; A shape's memo: the values of the last request read in place with it (by pair; #f where
;; the adapter wants none) and the headers made of them. Published whole, never changed:
;; handlers on other threads may read it meanwhile.
(struct memo (values headers))

;; read-raw-params : raw-params -> (values (or/c (listof header) #f) (or/c vector #f))
;; What read-params gives for these params, read in place: no list of pairs is made, a
;; value equal to the last request's is that one's byte string, and when every header
;; value is, so is the list of headers. Two #f when the params do not have the last
;; shape's names in its order: read-params of the list then.
;; Counted in place in the servlet hello: 1.4-1.5 us, where making the list took 1.65 and
;; reading it 1.78 (bench/OPTIMISATIONS.md, round 10).
(define (read-raw-params v)
  (define sh (unbox last-shape))
  (cond
    [(not sh) (values #f #f)]
    [else
     (define bs (raw-params-bs v))
     (define end (raw-params-end v))
     (define names (shape-names sh))
     (define hnames (shape-headers sh))
     (define slots (shape-slots sh))
     (define n (vector-length names))
     (define m (shape-memo sh))
     (define olds (and m (memo-values m)))
     (define vals (make-vector n #f))
     (define special (make-vector (vector-length special-names) #f))
     ;; walk : natural natural boolean -> (or/c boolean 'no) ; 'no: another shape;
     ;; else whether a header value differs from the memo's
     (define changed?
       (let walk ([i (raw-params-start v)] [k 0] [changed? #f])
         (cond
           [(= i end) (if (= k n) changed? 'no)]
           [(= k n) 'no]
           [else
            (define-values (nlen vlen i2) (pair-head bs i end))
            (define name (vector-ref names k))
            (cond
              [(string? nlen) 'no]   ; cannot happen: the engine checked them
              [(not (and (= nlen (bytes-length name)) (bytes-range=? bs i2 name 0 nlen))) 'no]
              [else
               (define hname (vector-ref hnames k))
               (define slot (vector-ref slots k))
               (define from (+ i2 nlen))
               (define next (+ from vlen))
               (cond
                 [(or hname slot)
                  (define old (and olds (vector-ref olds k)))
                  (define same? (and old (= (bytes-length old) vlen) (bytes-range=? bs from old 0 vlen)))
                  (define value (if same? old (unsafe-bytes->immutable-bytes! (subbytes bs from next))))
                  (vector-set! vals k value)
                  (when (and slot (not (vector-ref special slot))) (vector-set! special slot value))
                  (walk next (add1 k) (or changed? (and hname (not same?))))]
                 [else (walk next (add1 k) changed?)])])])))
     (cond
       [(eq? changed? 'no) (values #f #f)]
       [(and m (not changed?)) (values (memo-headers m) special)]
       [else
        (define headers
          (let loop ([k 0])
            (cond
              [(= k n) '()]
              [else
               (define name (vector-ref hnames k))
               (define value (vector-ref vals k))
               (if (and name (not (and (zero? (bytes-length value))
                                       (or (eq? name #"Content-Type") (eq? name #"Content-Length")))))
                   (cons (make-header/raw name value) (loop (add1 k)))
                   (loop (add1 k)))])))
        (set-shape-memo! sh (memo vals headers))
        (values headers special)])]))

;; read-params : (listof (cons bytes bytes)) -> (values (listof header) vector)
;; The request's headers, and the value of each of special-names (first occurrence wins,
;; as with request-param; #f for one not sent). HTTP_ACCEPT_LANGUAGE becomes
;; Accept-Language; CONTENT_TYPE and CONTENT_LENGTH become headers too (when not empty).
;; Order is kept; a name sent twice stays twice.
(define (read-params params)
  (define sh (params-shape params (length params)))
  (define special (make-vector (vector-length special-names) #f))
  (define headers
    (let loop ([ps params] [i 0])
      (cond
        [(null? ps) '()]
        [else
         (define value (cdar ps))
         (define slot (vector-ref (shape-slots sh) i))
         (when (and slot (not (vector-ref special slot))) (vector-set! special slot value))
         (define name (vector-ref (shape-headers sh) i))
         (if (and name (not (and (zero? (bytes-length value))
                                 (or (eq? name #"Content-Type") (eq? name #"Content-Length")))))
             (cons (make-header/raw name value) (loop (cdr ps) (add1 i)))
             (loop (cdr ps) (add1 i)))])))
  (values headers special))

;; fastcgi-request->request : fastcgi-request safety-limits -> (or/c request 'bad-uri #f)
;; #f: the body could not be read as web-server reads it (logged; answered 400).
(define (fastcgi-request->request r safety)
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
                          (λ () (read-bindings&post-data/raw
                                 (if (request-body-empty? r) empty-body (fastcgi-request-stdin r))
                                 method uri headers #:safety-limits safety))
                          cons))])
             (if both (values (car both) (cdr both)) (values #f #f)))))
     (and bindings
     (make-request/raw method uri headers bindings post-data
                   (param->string server-addr (param 5 #"127.0.0.1"))
                   (param->port (param 6 #"0"))
                   (param->string remote-addr (param 7 #"127.0.0.1"))))]))

;; A body with no bytes, for every request that has none: reading it changes nothing.
(define empty-body (open-input-bytes #""))

;; The bindings of a GET without a query, as read-bindings&post-data/raw makes them (a
;; promise of the empty list), made once: a forced promise never changes. Calling web-server
;; for them cost 0.7 us a request (a promise, two header scans), a twentieth of the servlet
;; hello's time.
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

;; uri-bytes->url : bytes -> url
;; uri->url of the bytes decoded as UTF-8 (an invalid sequence as U+FFFD). The last URI
;; whose url was kept is remembered with its bytes: a front sends the same URI again and
;; again, and comparing the bytes spares decoding them and hashing the string (counted
;; in place in the servlet hello, the URI took 0.96 us before and 0.5-0.6 after).
(define (uri-bytes->url bs)
  (define last (unbox last-uri))
  (cond
    [(and last (bytes=? (car last) bs)) (cdr last)]
    [else
     (define s (bytes->string/utf-8 bs #\uFFFD))
     (define u (uri->url s))
     ;; only a kept url: its strings are immutable, so it may be given again
     (when (eq? u (hash-ref kept-urls s #f))
       (set-box! last-uri (cons (bytes->immutable-bytes bs) u)))
     u]))

(define last-uri (box #f))

;; uri->url : string -> url
;; string->url, with a quicker way for the usual shape: an absolute path of plain segments
;; and an optional query of plain name or name=value pairs (letters, digits, `-._~`; no
;; escapes, `+`, `;` or fragment). Those give the very same url as string->url (a test
;; compares them) in under half the time (0.8 against 1.8 us for "/"), and are kept: the
;; same URI again gets the same url (url structs are immutable, and so are the strings in
;; a kept one): 23 ns against 440 for "/", 94 ns for "/a/b/c.html?id=42&page=3" (a hash
;; of the string, then the look-up). At most max-kept-urls of at most
;; max-kept-uri-length characters are kept; when the table is full it is emptied.
(define (uri->url s)
  (or (hash-ref kept-urls s #f)
      (let ([m (if (string=? s "/") root-match (regexp-match plain-uri s))])
        (cond
          [m
           (define u (plain-url m))
           (when (<= (string-length s) max-kept-uri-length)
             (when (>= (hash-count kept-urls) max-kept-urls) (hash-clear! kept-urls))
             (hash-set! kept-urls (string->immutable-string s) u))
           u]
          [else (string->url s)]))))

(define kept-urls (make-hash))
(define max-kept-urls 256)
(define max-kept-uri-length 256)

;; plain-url : (list string string (or/c string #f)) -> url ; from a match of plain-uri
(define (plain-url m)
  (url #f #f #f #f #t
       (for/list ([seg (in-list (regexp-split #rx"/" (cadr m)))])
         (path/param (cond [(string=? seg ".") 'same] [(string=? seg "..") 'up]
                           [else (string->immutable-string seg)])
                     '()))
       (let ([q (caddr m)])
         (if (or (not q) (string=? q ""))
             '()
             (for/list ([pair (in-list (regexp-split #rx"&" q))])
               (define nv (regexp-match #rx"^([^=]*)(?:=(.*))?$" pair))
               (cons (string->symbol (cadr nv)) (and (caddr nv) (string->immutable-string (caddr nv)))))))
       #f))

(define root-match '("/" "" #f))
(define plain-uri
  (let ([c "[A-Za-z0-9._~-]"])
    (pregexp (string-append "^/((?:" c "+/?)*)"  ; not "//": that would start a host
                            "(?:[?]((?:" c "+(?:=" c "*)?(?:&" c "+(?:=" c "*)?)*)?))?$"))))

;; ---------------------------------------------------------------------------------------
;; Responses.

(define status-lines (make-hash))

;; status-line : natural bytes -> bytes ; "Status: 200 OK\r\n", cached for common pairs
(define (status-line code message)
  (define key (cons code message))
  (or (hash-ref status-lines key #f)
      (let ([line (bytes-append #"Status: " (string->bytes/latin-1 (number->string code))
                                #" " (clean message) #"\r\n")])
        (when (< (hash-count status-lines) 64) (hash-set! status-lines key line))
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
  (set-fastcgi-request-status! r code)
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
;; measured apart from the write of the head).
(define last-head (box (vector #f #f #f #f)))

;; response-head : natural bytes (or/c bytes #f) (listof header) -> bytes
(define (response-head code message mime hs)
  ;; the head's pieces, joined by one bytes-append (a bytes port for them cost 165 ns
  ;; against 34 for a hello head)
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
