#lang racket/base
;; End to end behind a real nginx, started and killed by the test. One servlet (the app
;; below, routed with dispatch-rules) is served in this process on a unix socket and on
;; TCP; nginx reaches it four ways: unix and TCP, each with the FastCGI connection kept
;; (fastcgi_keep_conn on + upstream keepalive) and not kept. The memory checks run the
;; same app, plus a raw handler, in a child Racket process (this module's main submodule),
;; whose /proc/PID/status is read before and after 10 MiB go through it.
(require file/sha1
         net/url
         racket/list
         racket/os
         racket/string
         web-server/dispatch
         web-server/http
         web-server/http/bindings
         web-server/http/cookie
         web-server/http/cookie-parse
         "../../fastcgi/main.rkt"
         ;; White box, for one check only: which FastCGI connection carried a request.
         (only-in "../../fastcgi/private/engine/request.rkt" fastcgi-request-conn)
         "../lib/web-app.rkt"
         "lib.rkt")

;; ---------------------------------------------------------------------------------------
;; The app under test.

(define max-download (* 64 1024 1024))

;; connection-number : fastcgi-request -> natural
;; The first request on a FastCGI connection gives the connection the next number.
(define conn-numbers (make-weak-hasheq))
(define conn-count 0)
(define conn-lock (make-semaphore 1))
(define (connection-number r)
  (call-with-semaphore
   conn-lock
   (λ ()
     (hash-ref! conn-numbers (fastcgi-request-conn r)
                (λ () (set! conn-count (add1 conn-count)) conn-count)))))

(define (hello req)
  (text 200 #"OK" "Hello, World!\n" (list (header #"X-Method" (request-method req)))))

(define (form req)
  (text 200 #"OK" (format "Hello, ~a!\n" (extract-binding/single 'name (request-bindings req)))))

;; upload: the file's name, length and sha1, from the spooled port when web-server made one
(define (upload req)
  (define bs (request-bindings/raw req))
  (define file (bindings-assq #"file" bs))
  (define note (bindings-assq #"note" bs))
  (cond
    [(binding:file? file)
     (define-values (len digest)
       (port-length+sha1 (if (binding:file/port? file)
                             (binding:file/port-in file)
                             (open-input-bytes (binding:file-content file)))))
     (text 200 #"OK" (format "name=~a length=~a sha1=~a note=~a\n"
                             (binding:file-filename file) len digest
                             (if (binding:form? note) (binding:form-value note) "-")))]
    [else (text 400 #"Bad Request" "no file field\n")]))

(define (download req)
  (define n (string->number (or (binding-value req 'size) "")))
  (cond
    [(and (exact-nonnegative-integer? n) (<= n max-download))
     (response/output (λ (out) (write-pattern n out))
                      #:mime-type #"application/octet-stream"
                      #:headers (list (header #"Content-Length"
                                              (string->bytes/utf-8 (number->string n)))))]
    [else (text 400 #"Bad Request" "size must be 0..64 MiB\n")]))

(define (set-cookies req)
  (response/xexpr '(p "cookies set")
                  #:cookies (list (make-cookie "session" "abc123" #:path "/")
                                  (make-cookie "theme" "dark" #:path "/"))))

(define (read-cookies req)
  (define pairs
    (for/list ([c (in-list (request-cookies req))])
      (format "~a=~a" (client-cookie-name c) (client-cookie-value c))))
  (text 200 #"OK" (string-append (string-join (sort pairs string<?) " ") "\n")))

(define (redirect req) (redirect-to "/"))

(define (boom req) (error 'boom "deliberate failure"))

;; conn-info: which FastCGI connection carried this request, and the front's keep flag
(define (conn-info req)
  (define r (current-fastcgi-request))
  (text 200 #"OK" (format "conn=~a keep=~a\n" (connection-number r) (fastcgi-request-keep-conn? r))))

;; env-info: what the servlet sees of the CGI variables nginx sent
(define (env-info req)
  (define r (current-fastcgi-request))
  (text 200 #"OK" (format "client=~a host-port=~a protocol=~a method=~a path=~a b=~a\n"
                          (request-client-ip req) (request-host-port req)
                          (fastcgi-param r "SERVER_PROTOCOL") (request-method req)
                          (url->string (struct-copy url (request-uri req) [query '()]))
                          (binding-value req 'b))))

(define (not-found req) (text 404 #"Not Found" "not found\n"))

(define-values (app app-url)
  (dispatch-rules
   [("") #:method (or "get" "head") hello]
   [("form") #:method "post" form]
   [("upload") #:method "post" upload]
   [("download") download]
   [("cookie") set-cookies]
   [("read-cookie") read-cookies]
   [("redirect") redirect]
   [("boom") boom]
   [("conn") conn-info]
   [("env") env-info]
   [else not-found]))

;; count-body : fastcgi-request -> void ; the raw route: length and sha1 of STDIN
(define (count-body r)
  (define-values (n digest) (port-length+sha1 (fastcgi-request-stdin r)))
  (write-string (format "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nlength=~a sha1=~a\n"
                        n digest)
                (fastcgi-request-stdout r)))

;; The child process of the memory checks: racket nginx-test.rkt unix:APP unix:RAW
;; Serves until its stdin closes (the test stopped or died). Each "gc" line on stdin gets
;; a major collection, then "gc done": the memory figures start from a collected heap,
;; not from whatever garbage loading and warming up left resident.
(module+ main
  (define args (current-command-line-arguments))
  (define stop-app (serve/fastcgi app #:listen (vector-ref args 0)))
  (define stop-raw (serve/fastcgi-raw count-body #:listen (vector-ref args 1)))
  (printf "ready ~a\n" (getpid))
  (flush-output)
  (let loop ()
    (define line (read-line))
    (unless (eof-object? line)
      (when (equal? line "gc")
        (collect-garbage)
        (collect-garbage)
        (printf "gc done\n")
        (flush-output))
      (loop)))
  (stop-raw #:timeout 1)
  (stop-app #:timeout 1))

;; ---------------------------------------------------------------------------------------
;; The tests.

(module+ test
  (require compiler/find-exe
           rackunit)

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))
  (define MiB (* 1024 1024))

  ;; The params nginx sends, written out rather than included, so the test does not
  ;; depend on the distribution's fastcgi_params.
  (define fastcgi-params
    '(("REQUEST_METHOD" . "$request_method") ("REQUEST_URI" . "$request_uri")
      ("QUERY_STRING" . "$query_string") ("CONTENT_TYPE" . "$content_type")
      ("CONTENT_LENGTH" . "$content_length") ("SCRIPT_NAME" . "$fastcgi_script_name")
      ("PATH_INFO" . "$fastcgi_path_info") ("SERVER_PROTOCOL" . "$server_protocol")
      ("SERVER_NAME" . "$server_name") ("SERVER_PORT" . "$server_port")
      ("SERVER_ADDR" . "$server_addr") ("REMOTE_ADDR" . "$remote_addr")
      ("REMOTE_PORT" . "$remote_port") ("HTTPS" . "$https if_not_empty")
      ("DOCUMENT_URI" . "$document_uri") ("GATEWAY_INTERFACE" . "CGI/1.1")))

  ;; A front: its name, the port nginx listens on for it, whether it keeps connections,
  ;; and what fastcgi_pass points at (an upstream name or an address).
  (struct front (name port keep? target upstream) #:transparent)

  ;; nginx-conf : path (listof front) -> string
  (define (nginx-conf dir fronts)
    (define (in-dir name) (path->string (build-path dir name)))
    (define params
      (string-append* (for/list ([p (in-list fastcgi-params)])
                        (format "      fastcgi_param ~a ~a;\n" (car p) (cdr p)))))
    (string-append
     "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n"
     (format "pid ~a;\nerror_log stderr warn;\n" (in-dir "nginx.pid"))
     "events { worker_connections 256; }\n"
     "http {\n"
     "  access_log off;\n"
     "  default_type application/octet-stream;\n"
     (format "  client_body_temp_path ~a;\n" (in-dir "client_body"))
     (format "  fastcgi_temp_path ~a;\n" (in-dir "fastcgi_temp"))
     (format "  proxy_temp_path ~a;\n" (in-dir "proxy_temp"))
     (format "  uwsgi_temp_path ~a;\n" (in-dir "uwsgi_temp"))
     (format "  scgi_temp_path ~a;\n" (in-dir "scgi_temp"))
     "  client_max_body_size 64m;\n"
     (string-append*
      (for/list ([f (in-list fronts)] #:when (front-upstream f))
        (format "  upstream ~a { server ~a; keepalive 8; }\n" (front-name f) (front-upstream f))))
     (string-append*
      (for/list ([f (in-list fronts)])
        (string-append
         (format "  server {\n    listen 127.0.0.1:~a;\n    location / {\n" (front-port f))
         params
         (format "      fastcgi_pass ~a;\n" (front-target f))
         (if (front-keep? f) "      fastcgi_keep_conn on;\n" "")
         "      fastcgi_request_buffering off;\n"
         "      fastcgi_read_timeout 30s;\n"
         "    }\n  }\n")))
     "}\n"))

  ;; keep-front / close-front : symbol port string -> front
  (define (keep-front name port address)
    (front name port #t (symbol->string name) address))
  (define (close-front name port address)
    (front name port #f address #f))

  ;; multipart : string bytes (listof (cons string string)) -> (values bytes string)
  (define (multipart filename content fields)
    (define boundary "----fastcgi-integration-7f3a9c0d2e")
    (define out (open-output-bytes))
    (for ([f (in-list fields)])
      (write-string (format "--~a\r\nContent-Disposition: form-data; name=\"~a\"\r\n\r\n~a\r\n"
                            boundary (car f) (cdr f)) out))
    (write-string (format (string-append "--~a\r\nContent-Disposition: form-data; name=\"file\"; "
                                         "filename=\"~a\"\r\nContent-Type: application/octet-stream\r\n\r\n")
                          boundary filename) out)
    (write-bytes content out)
    (write-string (format "\r\n--~a--\r\n" boundary) out)
    (values (get-output-bytes out) (format "multipart/form-data; boundary=~a" boundary)))

  ;; upload-body : natural -> bytes ; upload content, offset so it differs from downloads
  (define (upload-body n) (pattern-bytes 7 (+ 7 n)))

  (define (body-string r) (bytes->string/utf-8 (http-response-body r) #\?))

  ;; post-upload : port string bytes #:fields (listof (cons string string)) -> http-response
  (define (post-upload port filename content #:fields [fields '()])
    (define-values (body type) (multipart filename content fields))
    (http-request port "/upload" #:method "POST" #:data body #:timeout 30
                  #:headers (list (string-append "Content-Type: " type))))

  ;; upload-answer : string bytes string -> string ; what /upload says for that file
  (define (upload-answer filename content note)
    (format "name=~a length=~a sha1=~a note=~a\n"
            filename (bytes-length content) (sha1-hex content) note))

  ;; ---------------------------------------------------------------------------------
  ;; Scenarios, each run against one front.

  (define (check-get-hello f)
    (define r (http-request (front-port f) "/"))
    (check-equal? (http-response-status r) 200)
    (check-equal? (http-response-body r) #"Hello, World!\n")
    (check-equal? (http-response-header r "X-Method") "GET")
    (check-regexp-match #rx"^text/plain" (http-response-header r "Content-Type")))

  (define (check-head f)
    (define r (http-request (front-port f) "/" #:method "HEAD"))
    (check-equal? (http-response-status r) 200)
    (check-equal? (http-response-body r) #"")
    (check-equal? (http-response-header r "X-Method") "HEAD")
    (check-regexp-match #rx"^text/plain" (http-response-header r "Content-Type")))

  (define (check-form f)
    (define r (http-request (front-port f) "/form" #:method "POST"
                            #:headers '("Content-Type: application/x-www-form-urlencoded")
                            #:data #"x=1&name=J%C3%B6rg+%26+Co"))
    (check-equal? (http-response-status r) 200)
    (check-equal? (body-string r) "Hello, Jörg & Co!\n"))

  (define (check-download f n)
    (define r (http-request (front-port f) (format "/download?size=~a" n) #:timeout 30))
    (check-equal? (http-response-status r) 200)
    (check-equal? (http-response-header r "Content-Length") (number->string n))
    (check-equal? (bytes-length (http-response-body r)) n)
    (check-true (equal? (http-response-body r) (pattern-bytes 0 n))
                (format "download of ~a bytes: content differs from the pattern" n)))

  ;; The in-process servers' error log, to check that a failing servlet is reported.
  (define fastcgi-errors (make-log-receiver fastcgi-logger 'error 'fastcgi))

  ;; check-logged : regexp -> void ; an error matching rx is logged within 2 s
  (define (check-logged rx)
    (let loop ()
      (define v (sync/timeout 2 fastcgi-errors))
      (cond
        [(not v) (fail (format "no fastcgi error log matching ~s" rx))]
        [(regexp-match? rx (vector-ref v 1)) (void)]
        [else (loop)])))

  (define (check-boom f)
    (define r (http-request (front-port f) "/boom"))
    (check-equal? (http-response-status r) 500)
    (check-regexp-match #rx"500" (body-string r))
    (check-logged #rx"/boom: handler raised: boom: deliberate failure")
    ;; the connection is still fine afterwards
    (check-equal? (http-response-status (http-request (front-port f) "/")) 200))

  (define (check-not-found f)
    (define r (http-request (front-port f) "/no/such/page?x=1"))
    (check-equal? (http-response-status r) 404)
    (check-equal? (http-response-body r) #"not found\n"))

  (define (check-env f)
    (define r (http-request (front-port f) "/env?a=1&b=%C3%A9t%C3%A9"))
    (check-equal? (body-string r)
                  (format "client=127.0.0.1 host-port=~a protocol=HTTP/1.1 method=GET path=/env b=été\n"
                          (front-port f))))

  ;; Sequential requests: one FastCGI connection when kept, a new one each time when not.
  (define (check-connection-reuse f)
    (define answers
      (for/list ([_ (in-range 5)])
        (define r (http-request (front-port f) "/conn"))
        (check-equal? (http-response-status r) 200)
        (define m (regexp-match #rx"^conn=([0-9]+) keep=(#t|#f)\n$" (body-string r)))
        (check-true (and m #t) (format "unexpected /conn answer ~s" (body-string r)))
        (cons (string->number (cadr m)) (caddr m))))
    (define conns (remove-duplicates (map car answers)))
    (check-equal? (remove-duplicates (map cdr answers)) (list (if (front-keep? f) "#t" "#f")))
    (if (front-keep? f)
        (check-equal? (length conns) 1 (format "5 kept requests went over connections ~a" conns))
        (check-equal? (length conns) 5 (format "5 unkept requests went over connections ~a" conns))))

  (define (check-uploads f)
    (for ([n (list 1000 (* 2 MiB))])   ; in memory, and spooled to a temporary file
      (define content (upload-body n))
      (define r (post-upload (front-port f) "data.bin" content #:fields '(("note" . "first"))))
      (check-equal? (http-response-status r) 200)
      (check-equal? (body-string r) (upload-answer "data.bin" content "first"))))

  (define (check-cookies f)
    (define r (http-request (front-port f) "/cookie"))
    (check-equal? (http-response-status r) 200)
    (define set (http-response-header* r "Set-Cookie"))
    (check-equal? (length set) 2 (format "Set-Cookie headers: ~s" set))
    (check-true (and (member "session=abc123" (map (λ (s) (car (string-split s ";"))) set)) #t))
    (define cookie-line
      (string-append "Cookie: " (string-join (map (λ (s) (car (string-split s ";"))) set) "; ")))
    (define r2 (http-request (front-port f) "/read-cookie" #:headers (list cookie-line)))
    (check-equal? (body-string r2) "session=abc123 theme=dark\n"))

  (define (check-redirect f)
    (define r (http-request (front-port f) "/redirect"))
    (check-equal? (http-response-status r) 302)
    (check-regexp-match #rx"^(http://127\\.0\\.0\\.1:[0-9]+)?/$" (http-response-header r "Location")))

  ;; Many at once: nginx opens several FastCGI connections; every answer is whole.
  (define (check-concurrent-downloads f)
    (define n (+ MiB 12345))
    (define expected (pattern-bytes 0 n))
    (define results (make-vector 8 #f))
    (define threads
      (for/list ([i (in-range 8)])
        (thread (λ ()
                  (vector-set! results i
                               (with-handlers ([exn:fail? exn-message])
                                 (http-request (front-port f) (format "/download?size=~a" n))))))))
    (for-each thread-wait threads)   ; each request is bounded by its own timeout
    (for ([r (in-vector results)] [i (in-naturals)])
      (check-true (http-response? r) (format "concurrent download ~a: ~a" i r))
      (when (http-response? r)
        (check-equal? (http-response-status r) 200)
        (check-true (equal? (http-response-body r) expected)
                    (format "concurrent download ~a: content differs" i)))))

  ;; ---------------------------------------------------------------------------------
  ;; Memory: a child process, and 10 MiB through it.

  ;; The most a 10 MiB transfer may add to the child's peak RSS. Streaming measures well
  ;; under 1 MiB here; a handler that holds the 10 MiB body measures about 30 MiB.
  (define max-growth-kb (* 8 1024))

  ;; check-flat-memory : proc string (-> any) -> void
  ;; The child collects its garbage and its peak (VmHWM) is reset; then thunk runs, and
  ;; the new peak may exceed the RSS before by less than max-growth-kb.
  (define (check-flat-memory child what thunk)
    (define pid (proc-pid child))
    (write-string "gc\n" (proc-stdin child))
    (flush-output (proc-stdin child))
    (check-equal? (read-line/timeout (proc-stdout child) 10 "the child's collection") "gc done")
    (reset-peak-memory! pid)
    (define rss0 (status-memory-kb pid 'VmRSS))
    (define hwm0 (status-memory-kb pid 'VmHWM))
    (thunk)
    (define hwm1 (status-memory-kb pid 'VmHWM))
    (define rss1 (status-memory-kb pid 'VmRSS))
    (printf "memory, ~a: before VmRSS ~a kB (VmHWM reset to ~a kB); after VmHWM ~a kB, VmRSS ~a kB; peak growth ~a kB\n"
            what rss0 hwm0 hwm1 rss1 (- hwm1 rss0))
    (check-true (< (- hwm1 rss0) max-growth-kb)
                (format "~a: the child's peak memory grew by ~a kB (limit ~a kB)"
                        what (- hwm1 rss0) max-growth-kb)))

  (define (post-raw f content)
    (http-request (front-port f) "/raw" #:method "POST" #:data content #:timeout 30
                  #:headers '("Content-Type: application/octet-stream")))

  (define (check-memory child app-front raw-front)
    (define big (* 10 MiB))
    (define content (upload-body big))
    ;; every path once first (spooled multipart, raw body, download), so that loading
    ;; and first-use allocations are not counted
    (check-equal? (http-response-status
                   (post-upload (front-port app-front) "warm.bin" (upload-body (* 2 MiB))))
                  200)
    (check-equal? (http-response-status (post-raw raw-front (upload-body (* 2 MiB)))) 200)
    (check-download app-front (* 2 MiB))
    (check-flat-memory
     child "10 MiB multipart upload"
     (λ ()
       (define r (post-upload (front-port app-front) "big.bin" content #:fields '(("note" . "big"))))
       (check-equal? (http-response-status r) 200)
       (check-equal? (body-string r) (upload-answer "big.bin" content "big"))))
    (check-flat-memory
     child "10 MiB raw POST"
     (λ ()
       (define r (post-raw raw-front content))
       (check-equal? (http-response-status r) 200)
       (check-equal? (body-string r) (format "length=~a sha1=~a\n" big (sha1-hex content)))))
    (check-flat-memory child "10 MiB download" (λ () (check-download app-front big))))

  ;; ---------------------------------------------------------------------------------
  ;; Set-up and the run.

  (define (run dir)
    (define app-sock (path->string (build-path dir "app.sock")))
    (define child-sock (path->string (build-path dir "child.sock")))
    (define child-raw-sock (path->string (build-path dir "child-raw.sock")))
    (define stop-unix (serve/fastcgi app #:listen (string-append "unix:" app-sock)))
    (define tcp-address #f)
    (define stop-tcp (serve/fastcgi app #:listen "127.0.0.1:0"
                                    #:on-ready (λ (a) (set! tcp-address a))))
    (dynamic-wind
     void
     (λ ()
       (define tcp-port (string->number (cadr (regexp-match #rx":([0-9]+)$" tcp-address))))
       (define ports (free-ports 6))
       (define fronts
         (list (keep-front 'unix_keep (list-ref ports 0) (string-append "unix:" app-sock))
               (close-front 'unix_close (list-ref ports 1) (string-append "unix:" app-sock))
               (keep-front 'tcp_keep (list-ref ports 2) (format "127.0.0.1:~a" tcp-port))
               (close-front 'tcp_close (list-ref ports 3) (format "127.0.0.1:~a" tcp-port))))
       (define child-app (keep-front 'child_app (list-ref ports 4) (string-append "unix:" child-sock)))
       (define child-raw (keep-front 'child_raw (list-ref ports 5) (string-append "unix:" child-raw-sock)))
       (define conf (build-path dir "nginx.conf"))
       (call-with-output-file conf
         (λ (out) (write-string (nginx-conf dir (append fronts (list child-app child-raw))) out)))
       (define nginx-args (list "-c" (path->string conf) "-p" (path->string dir) "-e" "stderr"))
       (define-values (code _out err) (run-program nginx (list* "-t" "-q" nginx-args)))
       (unless (zero? code)
         (error 'nginx-test "nginx rejects the generated configuration:\n~a" err))
       (call-with-process
        "child" (find-exe)
        (list (path->string this-file) (string-append "unix:" child-sock)
              (string-append "unix:" child-raw-sock))
        #:dir dir #:stdout-pipe? #t
        (λ (child)
          (call-with-process
           "nginx" nginx nginx-args #:dir dir
           (λ (ng)
             (with-handlers ([exn:fail? (λ (e) (raise (add-log e ng)))])
               (for ([p (in-list ports)]) (wait-for-tcp p 10)))
             (define child-line (read-line/timeout (proc-stdout child) 60 "the child server"))
             (check-equal? child-line (format "ready ~a" (proc-pid child)))
             (run-scenarios fronts)
             (test-case "10 MiB through a child process: memory stays flat"
               (check-memory child child-app child-raw))
             (define nginx-log (file->string* (proc-stderr-file ng)))
             (test-case "nginx logged no errors"
               (check-false (regexp-match? #rx"\\[(error|crit|alert|emerg)\\]" nginx-log)
                            nginx-log)))))))
     (λ ()
       (stop-tcp #:timeout 2)
       (stop-unix #:timeout 2))))

  (define (run-scenarios fronts)
    (for ([f (in-list fronts)])
      (define (named what) (format "~a: ~a" (front-name f) what))
      (test-case (named "GET / and HEAD /") (check-get-hello f) (check-head f))
      (test-case (named "POST /form") (check-form f))
      (test-case (named "GET /download 0, 1, 65529 and 10 MiB bytes")
        (for ([n (list 0 1 65529 (* 10 MiB))]) (check-download f n)))
      (test-case (named "GET /boom is a 500") (check-boom f))
      (test-case (named "unknown path is a 404") (check-not-found f))
      (test-case (named "CGI variables reach the servlet") (check-env f))
      (test-case (named "FastCGI connection reuse") (check-connection-reuse f))
      (when (front-keep? f)
        (test-case (named "multipart uploads") (check-uploads f))
        (test-case (named "cookies set and read back") (check-cookies f))
        (test-case (named "redirect-to") (check-redirect f))
        (test-case (named "8 concurrent downloads") (check-concurrent-downloads f)))))

  ;; add-log : exn proc -> exn ; the front's stderr, appended to a failure's message
  (define (add-log e p)
    (exn:fail (format "~a\n--- ~a stderr ---\n~a" (exn-message e) (proc-name p)
                      (file->string* (proc-stderr-file p)))
              (exn-continuation-marks e)))

  (define (file->string* path)
    (call-with-input-file path (λ (in) (let ([s (read-string 100000 in)]) (if (eof-object? s) "" s)))))

  ;; this file, for the child process to run
  (define this-file (variable-reference->module-source (#%variable-reference)))

  (call-with-temp-dir "fcgi-nginx" run))
