#lang racket/base
;; The CGI trampoline (trampoline/fcgi-trampoline) run directly, as a web server runs a CGI
;; program: a clean environment (env -i) and stdin in; its stdout, stderr and exit status
;; checked. Against our own server (a raw handler on a unix socket, TCP and IPv6) for what
;; must pass through whole, and against fake applications (canned bytes on a unix socket)
;; for what must not: each malformed answer, a dead socket and a silent peer end in a clean
;; CGI status and the documented exit status, never a hang.
(require racket/list
         racket/port
         racket/unix-socket
         "../../fastcgi/main.rkt"
         "lib.rkt")

;; ---------------------------------------------------------------------------------------
;; The app under test (raw interface: the params as they arrived, the body as a stream).

;; query-number : fastcgi-request string -> (or/c natural #f)
(define (query-number r key)
  (define q (bytes->string/latin-1 (or (fastcgi-param r #"QUERY_STRING") #"")))
  (define m (regexp-match (pregexp (format "(?:^|&)~a=([0-9]+)" key)) q))
  (and m (string->number (cadr m))))


(define text-head #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n")

;; handler : fastcgi-request -> void ; routes on the path of REQUEST_URI
(define (handler r)
  (define out (fastcgi-request-stdout r))
  (define uri (bytes->string/latin-1 (or (fastcgi-param r #"REQUEST_URI") #"")))
  (case (car (regexp-match #rx"^[^?]*" uri))
    ;; every param as NAME=VALUE NUL, in arrival order
    [("/params")
     (write-bytes #"Content-Type: application/octet-stream\r\n\r\n" out)
     (for ([p (in-list (fastcgi-request-params r))])
       (write-bytes (bytes-append (car p) #"=" (cdr p) #"\0") out))]
    [("/echo")
     (define-values (n digest) (port-length+sha1 (fastcgi-request-stdin r)))
     (write-bytes text-head out)
     (write-string (format "length=~a sha1=~a\n" n digest) out)]
    [("/download")
     (define n (query-number r "n"))
     (write-bytes #"Content-Type: application/octet-stream\r\n\r\n" out)
     (write-pattern n out)]
    [("/stderr")
     (write-bytes #"careful: to the error log\n" (fastcgi-request-stderr r))
     (write-bytes text-head out)
     (write-bytes #"warned\n" out)]
    [("/lf")   ; bare LF line ends, as CGI allows: passed on with CRLF
     (write-bytes #"Content-Type: text/plain\nX-Lf: yes\n\nbody\n" out)]
    [("/slow")
     (sleep 10)
     (write-bytes text-head out)]
    [else
     (write-bytes #"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnot here\n" out)]))

;; ---------------------------------------------------------------------------------------
;; Fake applications: after the request (up to its empty PARAMS record, or its empty STDIN
;; record), canned bytes; then close, or keep the connection open and say nothing more.

;; rec : natural bytes #:id natural #:pad natural -> bytes ; one record, as given
(define (rec type content #:id [id 1] #:pad [pad (modulo (- (bytes-length content)) 8)])
  (define n (bytes-length content))
  (bytes-append (bytes 1 type (quotient id 256) (remainder id 256) (quotient n 256) (remainder n 256)
                       pad 0)
                content (make-bytes pad 0)))
;; out-rec : bytes -> bytes ; a STDOUT record for request 1
(define (out-rec bs) (rec 6 bs))
;; end-rec : [byte] [byte] -> bytes ; END_REQUEST for request 1
(define (end-rec [app-status 0] [protocol-status 0])
  (rec 3 (bytes 0 0 0 app-status protocol-status 0 0 0)))
(define ok-head #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n")

;; read-request : input-port symbol -> void
;; Reads records until the empty PARAMS ('params) or empty STDIN ('stdin) record.
(define (read-request in until)
  (let loop ()
    (define h (read-bytes 8 in))
    (when (and (bytes? h) (= (bytes-length h) 8))
      (define len (+ (* 256 (bytes-ref h 4)) (bytes-ref h 5)))
      (read-bytes (+ len (bytes-ref h 6)) in)
      (unless (and (zero? len) (= (bytes-ref h 1) (if (eq? until 'params) 4 5)))
        (loop)))))

;; call-with-fake-app : path bytes #:after symbol #:then symbol #:chunk natural (-> any) -> any
;; A listener on sock that answers every connection with answer, written chunk bytes at a
;; time; then 'close, or 'hang (the connection stays open, silent).
(define (call-with-fake-app sock answer thunk
                            #:after [after 'stdin] #:then [then 'close] #:chunk [chunk #f])
  (define cust (make-custodian))
  (define listener (parameterize ([current-custodian cust]) (unix-socket-listen sock)))
  (parameterize ([current-custodian cust])
    (thread
     (λ ()
       (let loop ()
         (define-values (in out) (unix-socket-accept listener))
         (thread
          (λ ()
            (read-request in after)
            (with-handlers ([exn:fail? void])   ; the trampoline may have gone
              (if chunk
                  (for ([i (in-range 0 (bytes-length answer) chunk)])
                    (write-bytes answer out i (min (bytes-length answer) (+ i chunk)))
                    (flush-output out))
                  (write-bytes answer out))
              (flush-output out))
            (case then
              [(close) (close-output-port out) (close-input-port in)]
              [(hang) (sync never-evt)])))
         (loop)))))
  (dynamic-wind
   void
   thunk
   (λ ()
     (custodian-shutdown-all cust)
     (when (file-exists? sock) (delete-file sock)))))

;; ---------------------------------------------------------------------------------------
;; Running the trampoline.

;; cgi-env : string #:method string #:length (or/c natural #f) -> (listof string)
(define (cgi-env uri #:method [method "GET"] #:length [len #f])
  (define q (regexp-match #rx"^([^?]*)(?:[?](.*))?$" uri))
  (append (list "GATEWAY_INTERFACE=CGI/1.1" "SERVER_PROTOCOL=HTTP/1.1"
                "SERVER_SOFTWARE=test" "SERVER_NAME=localhost" "SERVER_PORT=80"
                "REMOTE_ADDR=127.0.0.1" "REMOTE_PORT=40000" "SCRIPT_NAME="
                (string-append "REQUEST_METHOD=" method)
                (string-append "REQUEST_URI=" uri)
                (string-append "PATH_INFO=" (cadr q))
                (string-append "QUERY_STRING=" (or (caddr q) "")))
          (if len
              (list (format "CONTENT_LENGTH=~a" len) "CONTENT_TYPE=application/octet-stream")
              '())))

;; A run: exit status, the CGI answer split (status from Status:, 200 without one; header
;; lines; body), and stderr.
(struct run (code status headers body stderr raw) #:transparent)

;; parse-run : natural bytes bytes -> run
(define (parse-run code out err)
  (define m (regexp-match-positions #rx#"\r\n\r\n" out))
  (define head (if m (subbytes out 0 (caar m)) out))
  (define body (if m (subbytes out (cdar m)) #""))
  (define lines (if (zero? (bytes-length head)) '() (regexp-split #rx#"\r\n" head)))
  (define status-line (findf (λ (l) (regexp-match? #rx#"^(?i:status):" l)) lines))
  (define status
    (if status-line
        (string->number (bytes->string/latin-1 (cadr (regexp-match #rx#"^[^:]*: *([0-9]+)" status-line))))
        200))
  (run code status lines body (bytes->string/utf-8 err #\?) out))

;; tramp : path (listof string) #:stdin bytes #:timeout seconds #:limit-as natural -> run
;; Runs the trampoline with exactly env as its environment (env -i), optionally under an
;; address-space limit (prlimit), so that buffering a large body whole would fail.
(define (tramp bin env #:stdin [stdin #""] #:timeout [timeout 20] #:limit-as [limit #f])
  (define cmd (append (list "-i") env (list (path->string bin))))
  (define-values (code out err)
    (if limit
        (run-program (string->path "/usr/bin/prlimit")
                     (append (list (format "--as=~a" limit) "--" "/usr/bin/env") cmd)
                     #:stdin stdin #:timeout timeout)
        (run-program (string->path "/usr/bin/env") cmd #:stdin stdin #:timeout timeout)))
  (parse-run code out err))

;; timed : (-> any) -> (values any seconds)
(define (timed thunk)
  (define t0 (current-inexact-milliseconds))
  (define v (thunk))
  (values v (/ (- (current-inexact-milliseconds) t0) 1000.0)))

(module+ test
  (require rackunit)

  (define MiB (* 1024 1024))

  ;; check-run : run natural natural [string] -> void ; exit status and HTTP status
  (define (check-run r code status [what ""])
    (check-equal? (run-code r) code (format "~a exit status; stderr: ~a" what (run-stderr r)))
    (check-equal? (run-status r) status (format "~a status; output: ~s" what
                                                (let ([o (run-raw r)]) (subbytes o 0 (min 300 (bytes-length o)))))))

  ;; ---------------------------------------------------------------------------------
  ;; Through our server.

  ;; through-server : path string -> void ; what must pass whole through our server at connect
  (define (through-server bin connect)
    (define (env uri #:method [method "GET"] #:length [len #f])
      (cons (string-append "FASTCGI_CONNECT=" connect) (cgi-env uri #:method method #:length len)))
    (define (named what) (format "~a: ~a" connect what))

    (test-case (named "GET, a 404 and LF header lines")
      (define r (tramp bin (env "/download?n=100")))
      (check-run r 0 200)
      (check-equal? (run-body r) (pattern-bytes 0 100))
      (check-equal? (run-headers r) '(#"Content-Type: application/octet-stream"))
      (define nf (tramp bin (env "/nowhere?x=1")))
      (check-run nf 0 404)
      (check-equal? (run-body nf) #"not here\n")
      (define lf (tramp bin (env "/lf")))
      (check-run lf 0 200)
      (check-equal? (run-raw lf) #"Content-Type: text/plain\r\nX-Lf: yes\r\n\r\nbody\n"))

    (test-case (named "POST bodies of 0, 1, 65528, 65529 and 3 MiB + 1 bytes")
      (for ([n (list 0 1 65528 65529 (+ (* 3 MiB) 1))])
        (define body (pattern-bytes 3 (+ 3 n)))
        (define r (tramp bin (env "/echo" #:method "POST" #:length n) #:stdin body))
        (check-run r 0 200 (format "~a-byte body" n))
        (check-equal? (run-body r) (string->bytes/utf-8
                                    (format "length=~a sha1=~a\n" n (sha1-hex body))))))

    (test-case (named "a 5 MiB download, whole")
      (define n (+ (* 5 MiB) 7))
      (define r (tramp bin (env (format "/download?n=~a" n))))
      (check-run r 0 200)
      (check-equal? (bytes-length (run-body r)) n)
      (check-true (equal? (run-body r) (pattern-bytes 0 n)) "the download differs from the pattern"))

    (test-case (named "STDERR goes to stderr")
      (define r (tramp bin (env "/stderr")))
      (check-run r 0 200)
      (check-equal? (run-body r) #"warned\n")
      (check-equal? (run-stderr r) "careful: to the error log\n")))

  ;; check-params : path string -> void
  (define (check-params bin connect)
    (test-case "all of environ arrives as params, 1- and 4-byte lengths, straddling records"
      (define long-name (make-string 130 #\N))
      ;; printable, so that it survives the environment; over 65535 bytes, so it straddles
      (define huge (build-string 70000 (λ (i) (integer->char (+ 33 (modulo (+ i (quotient i 251)) 90))))))
      (define extra (list "EMPTY=" (string-append long-name "=x") (string-append "HUGE=" huge)
                          (string-append "SHORT127=" (make-string 127 #\s))
                          (string-append "LONG128=" (make-string 128 #\l))
                          "HTTP_X_UTF8=été"))
      (define env (append (list (string-append "FASTCGI_CONNECT=" connect)) (cgi-env "/params") extra))
      (define r (tramp bin env))
      (check-run r 0 200)
      (define got
        (for/list ([p (in-list (regexp-split #rx#"\0" (run-body r)))] #:unless (equal? p #""))
          (bytes->string/utf-8 p)))
      (check-equal? (sort got string<?) (sort env string<?))))

  ;; ---------------------------------------------------------------------------------
  ;; Fake applications.

  ;; check-fakes : path path -> void ; each malformed or silent application
  (define (check-fakes bin dir)
    (define sock (path->string (build-path dir "fake.sock")))
    (define env (cons (string-append "FASTCGI_CONNECT=unix:" sock) (cgi-env "/")))
    (define (fake answer #:then [then 'close] #:chunk [chunk #f] #:env [e env] #:stdin [stdin #""])
      (call-with-fake-app sock answer #:then then #:chunk chunk
                          (λ () (tramp bin e #:stdin stdin))))
    (define (check-502 answer what #:reason [reason #rx""])
      (test-case (format "502: ~a" what)
        (define r (fake answer))
        (check-run r 3 502 what)
        (check-equal? (run-body r) #"502 Bad Gateway\n")
        (check-regexp-match #rx"^fcgi-trampoline: bad response from the application: .*\\(answered 502\\)\n$"
                            (run-stderr r))
        (check-regexp-match reason (run-stderr r))))

    (check-502 #"HTTP/1.1 200 OK\r\n\r\n" "an HTTP answer, not FastCGI (version 72)")
    (check-502 (let ([r (bytes-append (out-rec ok-head) (end-rec))]) (bytes-set! r 0 2) r)
               "a record of version 2" #:reason #rx"record version 2")
    (check-502 #"" "the connection closed at once")
    (check-502 (end-rec) "END_REQUEST without any output")
    (check-502 (bytes-append (out-rec #"Content-Type: text/plain\r\n") (end-rec))
               "END_REQUEST inside the header block")
    (check-502 (rec 3 (bytes 0 0 0 0)) "END_REQUEST with 4 content bytes"
               #:reason #rx"END_REQUEST with 4 content bytes")
    (check-502 (bytes-append (rec 9 #"") (end-rec)) "a GET_VALUES record for request 1"
               #:reason #rx"unexpected record type 9")
    (check-502 (bytes-append (out-rec #"garbage\r\n\r\nbody") (end-rec)) "a header line without a colon")
    (check-502 (bytes-append (out-rec #"Status: abc\r\n\r\n") (end-rec)) "a Status without a code")
    (check-502 (bytes-append (out-rec #"Status: 200 OK\r\nX-Bad: a\0b\r\n\r\n") (end-rec))
               "a NUL in a header value")
    (check-502 (bytes-append (out-rec #"\r\nbody") (end-rec)) "a body with no header")
    (check-502 (bytes-append (apply bytes-append (for/list ([_ (in-range 3)])
                                                   (out-rec (make-bytes 30000 (char->integer #\a)))))
                             (end-rec))
               "a header block of 90000 bytes")
    (check-502 (out-rec #"Content-Type: text/plain\r\n")
               "EOF inside the header block")

    (test-case "the largest record (65535 + 255 padding), other ids and management skipped"
      (define body (pattern-bytes 0 (- 65535 (bytes-length ok-head))))
      (define answer
        (bytes-append (rec 6 (bytes-append ok-head body) #:pad 255)
                      (rec 6 #"not for us" #:id 2)
                      (rec 11 (bytes 200 0 0 0 0 0 0 0) #:id 0)
                      (rec 7 #"" #:pad 3)
                      (out-rec #"")
                      (end-rec)))
      (for ([chunk (list #f 1 7 4099)])   ; whole, and split every way
        (define r (fake answer #:chunk chunk))
        (check-run r 0 200 (format "chunks of ~a" chunk))
        (check-true (equal? (run-body r) body) (format "body differs with chunks of ~a" chunk))))

    (test-case "EOF before END_REQUEST once the body streams: cut short, exit 3"
      (define r (fake (out-rec (bytes-append ok-head #"partial"))))
      (check-equal? (run-code r) 3)
      (check-equal? (run-status r) 200)
      (check-equal? (run-body r) #"partial")
      (check-regexp-match #rx"connection closed before END_REQUEST \\(response cut short\\)"
                          (run-stderr r)))

    (test-case "OVERLOADED without output: 503, exit 2"
      (check-run (fake (end-rec 0 2)) 2 503))

    (test-case "an application that says nothing: 504 after FASTCGI_TIMEOUT, exit 4"
      (define-values (r secs)
        (timed (λ () (fake #"" #:then 'hang #:env (cons "FASTCGI_TIMEOUT=0.5" env)))))
      (check-run r 4 504)
      (check-true (< secs 5) (format "took ~a s" secs)))

    (test-case "an application that stops mid-body: cut short after FASTCGI_TIMEOUT, exit 4"
      (define-values (r secs)
        (timed (λ () (fake (out-rec (bytes-append ok-head #"half")) #:then 'hang
                           #:env (cons "FASTCGI_TIMEOUT=0.5" env)))))
      (check-equal? (run-code r) 4)
      (check-equal? (run-body r) #"half")
      (check-true (< secs 5) (format "took ~a s" secs)))

    (test-case "STDERR bytes pass through; the trampoline's own log lines escape control characters"
      (define r (fake (bytes-append (rec 7 #"app says\n") (out-rec ok-head) (end-rec))))
      (check-run r 0 200)
      (check-equal? (run-stderr r) "app says\n")
      (define bad (tramp bin (list "FASTCGI_CONNECT=unix:/no\nsuch")))
      (check-run bad 2 503)
      (check-regexp-match #rx"^fcgi-trampoline: connect unix:/no[?]such: No such file or directory \\(answered 503\\)\n$"
                          (run-stderr bad)))

    ;; Apache's mod_cgi writes the whole body before it reads any output: an application
    ;; that answers 1 MiB before reading a 4 MiB body must not wedge the three of them.
    (test-case "early answer to a large body, body written before output is read"
      (define body-len (* 4 MiB))
      (define answer (bytes-append (out-rec ok-head)
                                   (apply bytes-append
                                          (for/list ([i (in-range 0 MiB 65528)])
                                            (out-rec (pattern-bytes i (min MiB (+ i 65528))))))
                                   (end-rec)))
      (call-with-fake-app
       sock answer #:after 'params
       (λ ()
         (define-values (r secs)
           (timed
            (λ ()
              (with-timeout
               20 "the early-answer run"
               (λ ()
                 (define cmd (append (list "-i") (cgi-env "/" #:method "POST" #:length body-len)
                                     (list (string-append "FASTCGI_CONNECT=unix:" sock)
                                           (path->string bin))))
                 (define-values (sp out in err)
                   (apply subprocess #f #f #f "/usr/bin/env" cmd))
                 (define err-bytes (box #""))
                 (define err-thread (thread (λ () (set-box! err-bytes (port->bytes err)))))
                 (write-pattern body-len in)   ; all of it first, as mod_cgi does
                 (close-output-port in)
                 (define out-bytes (port->bytes out))
                 (sync sp)
                 (thread-wait err-thread)
                 (parse-run (subprocess-status sp) out-bytes (unbox err-bytes)))))))
         (check-run r 0 200)
         (check-true (equal? (run-body r) (pattern-bytes 0 MiB)) "the early answer differs")
         (check-regexp-match #rx"discarded" (run-stderr r))
         (check-true (< secs 10) (format "took ~a s" secs))))))

  ;; ---------------------------------------------------------------------------------
  ;; Configuration and the client side.

  ;; check-config : path path -> void ; bad settings, dead targets, a vanished reader
  (define (check-config bin dir)
    (test-case "no socket, a stale socket file, a refused port: 503 at once, exit 2"
      (define stale (path->string (build-path dir "stale.sock")))
      (unix-socket-close-listener (unix-socket-listen stale))   ; leaves the file behind
      (define port (car (free-ports 1)))
      (for ([target (list (format "unix:~a/none.sock" dir) (string-append "unix:" stale)
                          (format "127.0.0.1:~a" port) (format "[::1]:~a" port))])
        (define-values (r secs) (timed (λ () (tramp bin (cons (string-append "FASTCGI_CONNECT=" target)
                                                              (cgi-env "/"))))))
        (check-run r 2 503 target)
        (check-equal? (run-body r) #"503 Service Unavailable\n")
        (check-true (< secs 2) (format "~a took ~a s" target secs))))

    (test-case "bad FASTCGI_CONNECT and FASTCGI_TIMEOUT: 500, exit 1"
      (for ([target (list "bogus" "unix:" "127.0.0.1:0" "127.0.0.1:65536" "127.0.0.1:" "[::1]9000"
                          "example.com:80" "1.2.3:80" (string-append "unix:/" (make-string 120 #\a)))])
        (check-run (tramp bin (list (string-append "FASTCGI_CONNECT=" target))) 1 500 target))
      (for ([t (list "abc" "0" "-1" "1e9" "nan" "")])
        (check-run (tramp bin (list "FASTCGI_CONNECT=unix:/x" (string-append "FASTCGI_TIMEOUT=" t)))
                   1 500 t)))

    (test-case "CONTENT_LENGTH that is not a number: 400, exit 6"
      (check-run (tramp bin (list "FASTCGI_CONNECT=unix:/x" "CONTENT_LENGTH=12x")) 6 400)
      (check-run (tramp bin (list "FASTCGI_CONNECT=unix:/x" "CONTENT_LENGTH=-1")) 6 400)
      (check-run (tramp bin (list "FASTCGI_CONNECT=unix:/x"
                                  "CONTENT_LENGTH=99999999999999999999999")) 6 400))

    (test-case "the compiled-in default target (make DEFAULT_CONNECT=...)"
      (define sock (path->string (build-path dir "default.sock")))
      (define other (build-trampoline! #:bin (path->string (build-path dir "tramp-default"))
                                       #:default-connect (string-append "unix:" sock)))
      (call-with-fake-app sock (bytes-append (out-rec (bytes-append ok-head #"default\n")) (end-rec))
        (λ ()
          (define r (tramp other (cgi-env "/")))
          (check-run r 0 200)
          (check-equal? (run-body r) #"default\n"))))

    (test-case "the reader of stdout goes away: exit 5, no SIGPIPE death"
      (define sock (path->string (build-path dir "big.sock")))
      (define answer (bytes-append (out-rec ok-head)
                                   (apply bytes-append (for/list ([_ (in-range 160)])
                                                         (out-rec (make-bytes 65528 65))))
                                   (end-rec)))
      (call-with-fake-app sock answer
        (λ ()
          (with-timeout
           20 "the trampoline with a closed stdout"
           (λ ()
             (define-values (sp out in err)
               (subprocess #f #f #f "/usr/bin/env" "-i" (string-append "FASTCGI_CONNECT=unix:" sock)
                           (path->string bin)))
             (close-output-port in)
             (read-bytes 1000 out)
             (close-input-port out)
             (define err-text (port->string err))
             (sync sp)
             (check-equal? (subprocess-status sp) 5 err-text)
             (check-regexp-match #rx"writing stdout: Broken pipe \\(response cut short\\)" err-text)))))))

  ;; ---------------------------------------------------------------------------------
  ;; The run.

  (define bin (build-trampoline!))
  (call-with-temp-dir
   "fcgi-tramp"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define stop-unix (serve/fastcgi-raw handler #:listen (string-append "unix:" sock)))
     (define tcp #f)
     (define stop-tcp (serve/fastcgi-raw handler #:listen "127.0.0.1:0" #:on-ready (λ (a) (set! tcp a))))
     (define tcp6 #f)
     (define stop-tcp6 (serve/fastcgi-raw handler #:listen "[::1]:0" #:on-ready (λ (a) (set! tcp6 a))))
     (dynamic-wind
      void
      (λ ()
        (through-server bin (string-append "unix:" sock))
        (through-server bin tcp)
        (through-server bin tcp6)
        (check-params bin (string-append "unix:" sock))
        (test-case "a 40 MiB body up and a 40 MiB download under a 16 MiB address-space limit"
          (define n (* 40 MiB))
          (define body (pattern-bytes 0 n))
          (define env (cons (string-append "FASTCGI_CONNECT=unix:" sock)
                            (cgi-env "/echo" #:method "POST" #:length n)))
          (define up (tramp bin env #:stdin body #:timeout 60 #:limit-as (* 16 MiB)))
          (check-run up 0 200)
          (check-equal? (run-body up) (string->bytes/utf-8 (format "length=~a sha1=~a\n" n (sha1-hex body))))
          (define down (tramp bin (cons (string-append "FASTCGI_CONNECT=unix:" sock)
                                        (cgi-env (format "/download?n=~a" n)))
                              #:timeout 60 #:limit-as (* 16 MiB)))
          (check-run down 0 200)
          (check-true (equal? (run-body down) body) "the 40 MiB download differs"))
        (test-case "our server, slow handler: 504 after FASTCGI_TIMEOUT"
          (define-values (r secs)
            (timed (λ () (tramp bin (list* (string-append "FASTCGI_CONNECT=unix:" sock)
                                           "FASTCGI_TIMEOUT=0.5" (cgi-env "/slow"))))))
          (check-run r 4 504)
          (check-true (< secs 5) (format "took ~a s" secs)))
        (check-fakes bin dir)
        (check-config bin dir))
      (λ ()
        (stop-tcp6 #:timeout 1)
        (stop-tcp #:timeout 1)
        (stop-unix #:timeout 1))))))
