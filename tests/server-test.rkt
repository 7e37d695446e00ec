#lang racket/base
;; serve/fastcgi as a library: request timeout, allowed clients, graceful stop, the
;; servlet adapter's header and status handling, and one write per small response.
(require json
         racket/unix-socket
         net/url
         web-server/dispatch
         web-server/http/bindings
         racket/file
         (only-in racket/list make-list)
         rackunit
         web-server/http
         "../fastcgi/client.rkt"
         "../fastcgi/main.rkt"
         (only-in "../fastcgi/private/engine/connection.rkt" serve-connection)
         "../fastcgi/private/protocol/protocol.rkt"
         (only-in "../fastcgi/private/servlet/web.rkt" servlet->handler)
         (only-in "../fastcgi/private/engine/wire.rkt" make-conn)
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         "lib/burst.rkt")

(define dir (make-temporary-file "fastcgi-server-~a" 'directory))
(define (sock name) (string-append "unix:" (path->string (build-path dir name))))

;; with-server : servlet keyword-args thunk -> any
(define (call-with-server start proc #:listen [listen (sock "s.sock")] #:limits [lim default-limits]
                          #:allowed-clients [allowed #f])
  (define address #f)
  (define stop (serve/fastcgi start #:listen listen #:limits lim #:allowed-clients allowed
                              #:on-ready (λ (a) (set! address a))))
  (dynamic-wind void (λ () (proc address)) (λ () (stop #:timeout 2))))

(define (hello req)
  (define path (url->string (request-uri req)))
  (cond
    [(regexp-match? #rx"^/header" path)
     (response/full 201 #"Created\r\nX-Evil: 1" (current-seconds) #"text/plain"
                    (list (header #"X-Ok" #"a\r\nSet-Cookie: evil=1")
                          (header #"Transfer-Encoding" #"chunked")
                          (header #"X-Nul" #"a\0b")
                          (header #"X-Seen" (or (let ([h (headers-assq* #"X-Forwarded-For" (request-headers/raw req))])
                                                  (and h (header-value h)))
                                                #"none")))
                    (list #"made"))]
    [else
     (when (regexp-match? #rx"^/forever" path) (sync never-evt))
     (when (regexp-match? #rx"^/slow" path) (sleep 1))
     (response/output (λ (o) (write-bytes #"Hello, World!\n" o)) #:mime-type #"text/plain")]))

(test-case "request timeout: a handler that never returns gets 503 in time; the next request is served"
  (call-with-server
   hello #:limits (make-limits #:request-timeout 0.5)
   (λ (addr)
     (define t0 (current-inexact-milliseconds))
     (define-values (status headers body) (fastcgi-request addr #:uri "/forever" #:timeout 10))
     (check-equal? status 503)
     (check-true (< (- (current-inexact-milliseconds) t0) 3000) "answered within 3 s")
     (define-values (s2 h2 b2) (fastcgi-request addr #:uri "/" #:timeout 10))
     (check-equal? s2 200))))

(test-case "servlet adapter: status line, CR/LF in headers neutralised, hop-by-hop dropped, headers from params"
  (call-with-server
   hello
   (λ (addr)
     (define-values (status headers body)
       (fastcgi-request addr #:uri "/header" #:headers '(("X-Forwarded-For" . "10.1.2.3"))))
     (check-equal? status 201)
     (check-equal? body #"made")
     (check-false (assoc "Set-Cookie" headers))
     (check-false (assoc "Transfer-Encoding" headers))
     (check-equal? (cdr (assoc "X-Ok" headers)) "a  Set-Cookie: evil=1")
     (check-equal? (cdr (assoc "X-Nul" headers)) "a b")
     (check-equal? (cdr (assoc "X-Seen" headers)) "10.1.2.3")
     (check-equal? (cdr (assoc "Content-Type" headers)) "text/plain"))))

(test-case "a small response leaves in one write: STDOUT, empty STDOUT and END_REQUEST together"
  ;; The connection runs over ports of the test's own: every write the server makes on the
  ;; connection is one call of the output port's write procedure, recorded here.
  (define writes '())
  (define out
    (make-output-port 'counting always-evt
                      (λ (bs start end non-block? breakable?)
                        (when (> end start) (set! writes (cons (subbytes bs start end) writes)))
                        (- end start))
                      void))
  (define-values (in to-server) (make-pipe))
  (define srv (make-server (servlet->handler hello default-limits)))
  (define c (make-conn in out "test" srv))
  (define reader (thread (λ () (serve-connection c))))
  (write-bytes (record->bytes 'begin-request 1 (begin-request-content 'responder #t)) to-server)
  (write-stream 'params 1 (pairs->bytes '(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . "/"))) to-server)
  (write-stream 'stdin 1 #"" to-server)
  (let wait ([n 100])
    (when (and (null? writes) (> n 0)) (sleep 0.05) (wait (sub1 n))))
  (sleep 0.2)                           ; any second write would land by now
  (check-equal? (length writes) 1 "exactly one write for the whole answer")
  (define d (make-decoder))
  (decoder-feed! d (apply bytes-append writes))
  (define types (let loop ([acc '()])
                  (define r (decoder-next! d))
                  (if r (loop (cons (record-type r) acc)) (reverse acc))))
  (check-equal? types '(stdout stdout end-request))
  (close-output-port to-server)
  (check-equal? (sync/timeout 5 reader) reader "the connection ends at EOF"))

(test-case "allowed clients: a list that parses to nothing denies everyone; a matching list allows"
  (call-with-server
   hello #:listen "127.0.0.1:0" #:allowed-clients "nonsense"
   (λ (addr)
     (check-exn exn:fail? (λ () (fastcgi-request addr #:uri "/" #:timeout 5)))))
  (call-with-server
   hello #:listen "127.0.0.1:0" #:allowed-clients "10.0.0.1, 127.0.0.0/8"
   (λ (addr)
     (define-values (status headers body) (fastcgi-request addr #:uri "/" #:timeout 5))
     (check-equal? status 200))))

(test-case "graceful stop: an in-flight request completes; new connections are refused after"
  (define address #f)
  (define stop (serve/fastcgi hello #:listen (sock "g.sock") #:on-ready (λ (a) (set! address a))))
  (define result (make-channel))
  (thread (λ () (channel-put result (call-with-values (λ () (fastcgi-request address #:uri "/slow" #:timeout 10))
                                                      list))))
  (sleep 0.3)
  (stop #:timeout 5)
  (define r (sync/timeout 5 result))
  (check-equal? (and r (car r)) 200)
  (check-exn exn:fail? (λ () (fastcgi-request address #:uri "/" #:timeout 2))))

(test-case "custodian shutdown: the server's kept and mid-request connections are closed"
  (define cust (make-custodian))
  (define address #f)
  (define path (path->string (build-path dir "c.sock")))
  (parameterize ([current-custodian cust])
    (serve/fastcgi hello #:listen (string-append "unix:" path) #:on-ready (λ (a) (set! address a))))
  (define-values (kept-in kept-out) (unix-socket-connect path))
  (define-values (busy-in busy-out) (unix-socket-connect path))
  ;; kept: one answered request on a keep-conn connection, now idle
  (write-bytes (bytes-append (record->bytes 'begin-request 1 (begin-request-content 'responder #t))
                             (record->bytes 'params 1 (pairs->bytes '(("REQUEST_METHOD" . "GET")
                                                                      ("REQUEST_URI" . "/"))))
                             (record->bytes 'params 1 #"") (record->bytes 'stdin 1 #""))
               kept-out)
  (flush-output kept-out)
  (define d (make-decoder))
  (let loop ()
    (decoder-read! d kept-in)
    (define r (let next () (define r (decoder-next! d)) (if (and r (not (eq? (record-type r) 'end-request))) (next) r)))
    (unless r (loop)))
  ;; busy: a request whose params never end
  (write-bytes (record->bytes 'begin-request 1 (begin-request-content 'responder #t)) busy-out)
  (flush-output busy-out)
  (sleep 0.2)
  (custodian-shutdown-all cust)
  (for ([in (list kept-in busy-in)] [name '("kept" "busy")])
    (check-equal? (sync/timeout 5 (wrap-evt in (λ (_) (with-handlers ([exn:fail? (λ (e) eof)]) (read-bytes 1 in)))))
                  eof
                  (format "the ~a connection reads EOF" name)))
  (check-exn exn:fail? (λ () (unix-socket-connect path)) "nothing listens any more")
  (check-false (link-exists? path) "the socket file is removed"))

(test-case "servlet helpers work unchanged: dispatch-rules without else (404), response/jsexpr, response/xexpr, bindings"
  (define-values (app _url)
    (dispatch-rules
     [("json") (λ (req) (response/jsexpr (hasheq 'ok #t 'n 3)))]
     [("page") (λ (req) (response/xexpr `(p ,(extract-binding/single 'name (request-bindings req)))))]))
  (call-with-server
   app
   (λ (addr)
     (define-values (s1 h1 b1) (fastcgi-request addr #:uri "/json"))
     (check-equal? s1 200)
     (check-equal? (string->jsexpr (bytes->string/utf-8 b1)) (hasheq 'ok #t 'n 3))
     (check-regexp-match #rx"^application/json" (cdr (assoc "Content-Type" h1)))
     (define-values (s2 h2 b2) (fastcgi-request addr #:uri "/page?name=J%C3%B6rg"))
     (check-equal? s2 200)
     (check-equal? b2 (string->bytes/utf-8 "<p>Jörg</p>"))
     (define-values (s3 h3 b3) (fastcgi-request addr #:uri "/nothing-here"))
     (check-equal? s3 404))))


;; ---------------------------------------------------------------------------------------
;; Load shedding (max-queue-delay).

;; work! : natural -> natural ; a fixed amount of computation (not of wall time: a spin
;; on the clock would finish on time however many threads share the CPU)
(define (work! n) (for/fold ([x 0]) ([i (in-range n)]) (bitwise-xor x (* i 7))))
;; the count that takes about 20 ms here
(define work-20ms
  (let loop ([n 100000])
    (define t0 (current-inexact-milliseconds))
    (work! n)
    (define ms (- (current-inexact-milliseconds) t0))
    (if (< ms 10) (loop (* n 4)) (inexact->exact (round (* n (/ 20.0 ms)))))))
(define (spin-ms ms) (work! (inexact->exact (round (* work-20ms (/ ms 20.0))))))

(define (shed-app req)
  (define path (url->string (request-uri req)))
  (cond
    [(regexp-match? #rx"^/cpu" path) (spin-ms 20)]
    [(regexp-match? #rx"^/wait" path) (sleep 0.3)])
  (response/output (λ (o) (write-bytes #"ok\n" o)) #:mime-type #"text/plain"))

(test-case "max-queue-delay: CPU-bound overload gets fast 503s, served requests a bounded wait, then recovery"
  (call-with-server
   shed-app #:limits (make-limits #:max-queue-delay 0.1)
   (λ (addr)
     ;; 20 ms of CPU each, so about 50 a second fit; 150 a second for 3 s is 3 times that.
     ;; Without shedding the queue would grow by 100 requests (2 s of work) a second.
     (define rs (burst addr "/cpu" 450 #:rate 150))
     (define ok (filter (λ (p) (= (car p) 200)) rs))
     (define shed (filter (λ (p) (= (car p) 503)) rs))
     (define (slowest ps) (if (null? ps) 0 (round (apply max (map cdr ps)))))
     (printf "server-test: shedding: ~a served (slowest ~a ms), ~a shed (slowest ~a ms)\n"
             (length ok) (slowest ok) (length shed) (slowest shed))
     (check-equal? (+ (length ok) (length shed)) 450 "every request got 200 or 503")
     (check-true (> (length shed) 100) (format "many were shed (~a of 450)" (length shed)))
     (check-true (> (length ok) 50) (format "many were served (~a of 450)" (length ok)))
     (check-true (< (slowest ok) 2500) (format "the slowest served request took ~a ms" (slowest ok)))
     ;; as soon as the burst is over, requests are served again
     (sleep 0.3)
     (for ([i (in-range 5)])
       (define-values (status headers body) (fastcgi-request addr #:uri "/cpu" #:timeout 10))
       (check-equal? status 200 "served once the load is gone")))))

(test-case "max-queue-delay: handlers waiting on I/O are not shed, however many"
  ;; (0.5 s: at 0.1 s the scheduling of the burst itself, 300 connections at once, went
  ;; past it on a busy machine now and then: 1 run of 3 at d7abc45 shed a few.) The burst
  ;; comes from a process of its own, as from a front: sent from this one, its 300
  ;; connections' CPU counted as the server's cost of a request (2.55 ms on 8.18 with both
  ;; cores busy), and 197 sleeping handlers made 502 ms of work ahead.
  (call-with-server
   shed-app #:limits (make-limits #:max-queue-delay 0.5)
   (λ (addr)
     (define rs (burst/process addr "/wait" 300))
     (check-equal? (map car rs) (make-list 300 200) "300 concurrent sleeping handlers all served"))))

(test-case "max-queue-delay #f: no shedding, every request waits its turn"
  (call-with-server
   shed-app #:limits (make-limits #:max-queue-delay #f)
   (λ (addr)
     (define rs (burst addr "/cpu" 60))
     (check-equal? (map car rs) (make-list 60 200)))))

(test-case "servlet adapter: client and host addresses of request after request on one connection"
  ;; the adapter keeps the last address and port it decoded: a kept connection gives equal
  ;; values as the same bytes, and a changed value must be decoded anew
  (define (addresses req)
    (response/output (λ (o) (write-string (format "~a ~a ~a ~a" (request-client-ip req) (request-host-ip req)
                                                  (request-host-port req)
                                                  (and (immutable? (request-client-ip req))
                                                       (immutable? (request-host-ip req))))
                                          o))))
  (call-with-server
   addresses
   (λ (addr)
     (define c (fastcgi-connect addr))
     (for ([remote (in-list '("10.0.0.1" "10.0.0.1" "10.0.0.2" "::1" "10.0.0.1" "é"))]
           [server (in-list '("127.0.0.1" "127.0.0.1" "127.0.0.1" "::1" "192.0.2.7" "127.0.0.1"))]
           [port (in-list '("8080" "8080" "81" "81" "x" "8080"))])
       (define r (fastcgi-call c #:params `(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . "/")
                                            ("REMOTE_ADDR" . ,remote) ("SERVER_ADDR" . ,server)
                                            ("SERVER_PORT" . ,port))
                               #:keep-conn? #t))
       (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout r)))
       ;; #t: a kept string cannot be changed by one servlet for the next request
       (check-equal? body (string->bytes/utf-8 (format "~a ~a ~a #t" remote server (or (string->number port) 0)))))
     (fcgi-client-close c))))

(test-case "servlet adapter: request after request on one connection, every quick path follows each request"
  ;; the adapter reads params in place against the last shape, remembers the last URI's
  ;; url, the headers of unchanged values and the last response head, and spares web-server
  ;; a GET without a query: every answer must still be this request's own
  (define (echo req)
    (define mime (if (regexp-match? #rx"html" (url->string (request-uri req))) #"text/html" #"text/plain"))
    (define text
      (format "~a ~a ~s ~a"
              (request-method req) (url->string (request-uri req))
              (for/list ([b (in-list (request-bindings/raw req))] #:when (binding:form? b))
                (cons (binding-id b) (binding:form-value b)))
              (let ([h (headers-assq* #"X-Test" (request-headers/raw req))]) (and h (header-value h)))))
    (if (regexp-match? #rx"full" (url->string (request-uri req)))
        (response/full 202 #"Accepted" (current-seconds) mime (list (header #"X-Full" #"1"))
                       (list (string->bytes/utf-8 text)))
        (response/output (λ (o) (write-string text o)) #:mime-type mime)))
  (call-with-server
   echo
   (λ (addr)
     (define c (fastcgi-connect addr))
     (define cases
       ;; method uri x-test body content-type -> expected status, content-type, body
       `(("GET" "/" "a" #"" #f 200 "text/plain" "GET / () a")
         ("GET" "/" "a" #"" #f 200 "text/plain" "GET / () a")
         ("GET" "/" "b" #"" #f 200 "text/plain" "GET / () b")
         ("GET" "/x.html" "b" #"" #f 200 "text/html" "GET /x.html () b")
         ("GET" "/?q=1" "b" #"" #f 200 "text/plain" "GET /?q=1 ((#\"q\" . #\"1\")) b")
         ("GET" "/full" "c" #"" #f 202 "text/plain" "GET /full () c")
         ("GET" "/" "c" #"" #f 200 "text/plain" "GET / () c")
         ("POST" "/" "d" #"k=v" "application/x-www-form-urlencoded" 200 "text/plain" "POST / ((#\"k\" . #\"v\")) d")
         ("POST" "/" "d" #"not multipart" "multipart/form-data; boundary=x" 400 "text/plain; charset=utf-8" "400 Bad Request\n")
         ("get" "/" "e" #"" #f 200 "text/plain" "get / () e")
         ("GET" "/" "e" #"" #f 200 "text/plain" "GET / () e")))
     (for ([k (in-list cases)])
       (define-values (method uri x body ctype status want-type want-body) (apply values k))
       (define r (fastcgi-call c #:params `(("REQUEST_METHOD" . ,method) ("REQUEST_URI" . ,uri)
                                            ("CONTENT_TYPE" . ,(or ctype ""))
                                            ("CONTENT_LENGTH" . ,(number->string (bytes-length body)))
                                            ("REMOTE_ADDR" . "127.0.0.1") ("HTTP_X_TEST" . ,x))
                               #:stdin body #:keep-conn? #t))
       (define-values (st headers got) (parse-cgi-response (fcgi-reply-stdout r)))
       (check-equal? (list st (cdr (assoc "Content-Type" headers)) got)
                     (list status want-type (string->bytes/utf-8 want-body))
                     (format "~s" k))
       (check-equal? (and (assoc "X-Full" headers) #t) (regexp-match? #rx"full" uri) (format "~s" k)))
     (fcgi-client-close c))))

(delete-directory/files dir #:must-exist? #f)

