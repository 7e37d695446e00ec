#lang racket/base
;; Every example in examples/, run by `raco fastcgi serve` as examples/README.md says.
;; The Responders are reached through nginx with the published deploy/nginx/racket-app.conf
;; (one nginx per app, since the file names its upstream); the Authorizer and the Filter
;; through fastcgi/client, here as the role's direct check (lighttpd-test.rkt puts the
;; Authorizer behind lighttpd; no common front sends the Filter role).
(module+ test
  (require json
           racket/file
           racket/string
           rackunit
           "../../fastcgi/client.rkt"
           "deploy-lib.rkt"
           "lib.rkt")

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))
  (define MiB (* 1024 1024))

  ;; An example being served: its app process, its socket, and the nginx port (or #f).
  (struct served (name app address port))

  (define (body-string r) (bytes->string/utf-8 (http-response-body r) #\?))

  ;; ---------------------------------------------------------------------------------
  ;; The examples, one check each.

  (define (check-hello s)
    (for ([path (list "/" "/any/path?x=1")])
      (define r (http-request (served-port s) path))
      (check-equal? (http-response-status r) 200)
      (check-equal? (http-response-body r) #"Hello, World!\n")
      (check-regexp-match #rx"^text/plain" (http-response-header r "Content-Type"))))

  (define (post-form port path data)
    (http-request port path #:method "POST" #:data data
                  #:headers '("Content-Type: application/x-www-form-urlencoded")))

  (define (check-servlet s)
    (define port (served-port s))
    (define home (http-request port "/"))
    (check-equal? (http-response-status home) 200)
    (check-regexp-match #rx"^text/html" (http-response-header home "Content-Type"))
    (check-regexp-match #rx"Nobody has signed yet" (body-string home))
    (check-regexp-match #rx"<form method=\"post\" action=\"/sign\">" (body-string home))
    ;; a signature with markup in it: 303 back home, where it shows escaped
    (define signed (post-form port "/sign" #"name=%3Cb%3EAnn%3C%2Fb%3E&message=J%C3%B6rg+was+here"))
    (check-equal? (http-response-status signed) 303)
    (check-regexp-match #rx"^(http://[^/]+)?/$" (http-response-header signed "Location"))
    (define after (body-string (http-request port "/")))
    (check-regexp-match #rx"<li><strong>&lt;b&gt;Ann&lt;/b&gt;</strong>: Jörg was here</li>" after)
    (check-false (regexp-match? #rx"<b>Ann" after))
    (define empty (post-form port "/sign" #"name=&message=x"))
    (check-equal? (http-response-status empty) 400)
    (check-regexp-match #rx"class=\"error\"" (body-string empty))
    (check-regexp-match #rx"<h1>Hello, bob!</h1>" (body-string (http-request port "/hello/bob")))
    (check-equal? (http-response-status (http-request port "/no/such/page")) 404)
    (check-equal? (http-response-status (http-request port "/sign")) 404 "GET /sign has no rule"))

  ;; json-request : port string string bytes -> (values status jsexpr http-response)
  (define (json-request port method path [data #f])
    (define r (http-request port path #:method method #:data data
                            #:headers (if data '("Content-Type: application/json") '())))
    (check-regexp-match #rx"^application/json" (http-response-header r "Content-Type"))
    (values (http-response-status r) (bytes->jsexpr (http-response-body r)) r))

  (define (check-json-api s)
    (define port (served-port s))
    (define-values (c0 j0 _r0) (json-request port "GET" "/api/items"))
    (check-equal? (list c0 j0) (list 200 (hasheq 'items '())))
    (define-values (c1 j1 r1) (json-request port "POST" "/api/items" #"{\"name\": \"pen\", \"qty\": 3}"))
    (check-equal? (list c1 j1) (list 201 (hasheq 'id 1 'name "pen" 'qty 3)))
    (check-equal? (http-response-header r1 "Location") "/api/items/1")
    (define-values (c2 j2 _r2) (json-request port "POST" "/api/items" #"{\"name\":\"ink \\u00e9\",\"qty\":0}"))
    (check-equal? (list c2 j2) (list 201 (hasheq 'id 2 'name "ink é" 'qty 0)))
    (define-values (c3 j3 _r3) (json-request port "GET" "/api/items/1"))
    (check-equal? (list c3 j3) (list 200 (hasheq 'id 1 'name "pen" 'qty 3)))
    (define-values (c4 j4 _r4) (json-request port "GET" "/api/items"))
    (check-equal? (list c4 (map (λ (i) (hash-ref i 'id)) (hash-ref j4 'items))) (list 200 '(1 2)))
    (for ([bad (list #"{\"name\": \"pen\"" #"" #"nope" #"{} {}" #"{\"name\":\"a\",\"qty\":1} x")])
      (define-values (c j _r) (json-request port "POST" "/api/items" bad))
      (check-equal? c 400 (format "POST ~s" bad))
      (check-equal? (hash-ref j 'error) "the body is not valid JSON"))
    (for ([wrong (list #"[1,2]" #"{\"name\": \"\", \"qty\": 1}" #"{\"name\": \"a\", \"qty\": -1}")])
      (define-values (c _j _r) (json-request port "POST" "/api/items" wrong))
      (check-equal? c 422 (format "POST ~s" wrong)))
    (define-values (c5 j5 _r5) (json-request port "GET" "/api/items/99"))
    (check-equal? (list c5 j5) (list 404 (hasheq 'error "no item 99"))))

  ;; generated : natural -> bytes ; what examples/upload.rkt's /download sends
  (define (generated n)
    (define bs (make-bytes n))
    (for ([i (in-range n)]) (bytes-set! bs i (modulo i 251)))
    bs)

  ;; worker-pid : proc -> natural ; the one worker of a `--workers 1` manager (its other
  ;; children: the generation's loader, named fastcgi-loader)
  (define (worker-pid p)
    (define pid (proc-pid p))
    (define (comm k) (with-handlers ([exn:fail? (λ (e) "")]) (string-trim (file->string (format "/proc/~a/comm" k)))))
    (define kids (for/list ([k (in-list (string-split (file->string (format "/proc/~a/task/~a/children" pid pid))))]
                            #:unless (member (comm k) '("fastcgi-loader" "fastcgi-base")))
                   k))
    (check-equal? (length kids) 1 (format "workers of the manager: ~a" kids))
    (string->number (car kids)))

  ;; check-peak-growth : natural string natural (-> any) -> void
  ;; The worker's peak resident memory may grow by less than limit-kb while thunk runs.
  (define (check-peak-growth pid what limit-kb thunk)
    (reset-peak-memory! pid)
    (define rss0 (status-memory-kb pid 'VmRSS))
    (thunk)
    (define hwm (status-memory-kb pid 'VmHWM))
    (printf "examples-test: ~a: worker VmRSS before ~a kB, peak after ~a kB (growth ~a kB)\n"
            what rss0 hwm (- hwm rss0))
    (check-true (< (- hwm rss0) limit-kb)
                (format "~a: the worker's peak memory grew by ~a kB" what (- hwm rss0))))

  (define (check-upload s)
    (define port (served-port s))
    (define pid (worker-pid (served-app s)))
    (define (upload body)
      (http-request port "/upload" #:method "POST" #:data body #:timeout 60
                    #:headers '("Content-Type: application/octet-stream")))
    (define (expected body)
      (format "{\"length\": ~a, \"sha256\": \"~a\"}\n" (bytes-length body) (sha256-hex body)))
    (for ([n (list 0 1 65536 (* 3 MiB))])      ; also warms every path before measuring
      (define body (pattern-bytes 3 (+ 3 n)))
      (define r (upload body))
      (check-equal? (http-response-status r) 200)
      (check-equal? (body-string r) (expected body)))
    ;; Held whole, a body would add at least its size; streamed, the peak has been seen to
    ;; grow by up to 30 MiB (garbage not yet collected). Uploads stay under the 64m that
    ;; racket-app.conf and the app's --max-body let through.
    (define big (pattern-bytes 5 (+ 5 (* 63 MiB))))
    (check-peak-growth pid "63 MiB upload" (* 48 1024)
                       (λ () (check-equal? (body-string (upload big)) (expected big))))
    (define n (+ (* 128 MiB) 17))
    (check-peak-growth pid "128 MiB download" (* 48 1024)
                       (λ ()
                         (define r (http-request port (format "/download?size=~a" n) #:timeout 60))
                         (check-equal? (http-response-status r) 200)
                         (check-equal? (http-response-header r "Content-Length") (number->string n))
                         (check-true (equal? (http-response-body r) (generated n))
                                     "the download differs from the generated stream")))
    (check-equal? (http-response-status (http-request port "/download?size=-1")) 400)
    (check-equal? (http-response-status (http-request port "/upload")) 405)
    (check-equal? (http-response-status (http-request port "/elsewhere")) 404))

  ;; sha256-hex : bytes -> string
  (define (sha256-hex bs)
    (string-append* (for/list ([b (in-bytes (sha256-bytes bs))])
                      (string-append (if (< b 16) "0" "") (number->string b 16)))))

  ;; check-guess : served -> void
  ;; The continuation game, served by 2 workers: a binary search wins in at most 7 guesses;
  ;; an earlier page's form (the Back button) goes on from that page's state.
  (define (check-guess s)
    (define port (served-port s))
    (define (action page) (cadr (regexp-match #rx"action=\"([^\"]*)\"" page)))
    (define (guess url n) (body-string (post-form port url (string->bytes/utf-8 (format "guess=~a" n)))))
    (for ([game (in-range 3)])
      (define first-page (body-string (http-request port "/")))
      (check-regexp-match #rx"I am thinking of a number from 1 to 100" first-page)
      (define first-url (action first-page))
      (check-regexp-match #rx"^/;" first-url "a continuation URL")
      (define-values (won tries)
        (let loop ([lo 1] [hi 100] [url first-url] [tries 1])
          (define n (quotient (+ lo hi) 2))
          (define page (guess url n))
          (cond
            [(regexp-match #rx"you found it in ([0-9]+) guesses" page)
             => (λ (m) (values n (string->number (cadr m))))]
            [(regexp-match? #rx"is too small" page) (loop (add1 n) hi (action page) (add1 tries))]
            [(regexp-match? #rx"is too large" page) (loop lo (sub1 n) (action page) (add1 tries))]
            [else (fail (format "unexpected page: ~a" page)) (values #f #f)])))
      (check-true (<= tries 7))
      ;; Back to the first page: its form starts from no guesses, whatever came after
      (define again (guess first-url (if (= won 1) 2 1)))
      (check-regexp-match #rx"Guesses so far: 1<" again)
      (check-regexp-match #rx"you found it in 1 guesses" (guess first-url won))
      ;; an answer that is not a number asks again, on the same state
      (check-regexp-match #rx"Guesses so far: 0<" (guess first-url "x")))
    (define expired (http-request port "/;((%22k%22%20.%20%22(4294967296%201%202)%22))"))
    (check-equal? (http-response-status expired) 200)
    (check-regexp-match #rx"this page has expired" (body-string expired)))

  ;; call-role : string symbol (listof (cons string string)) bytes -> fcgi-reply
  (define (call-role address role params #:data [data #f])
    (define c (fastcgi-connect address))
    (dynamic-wind void
                  (λ () (fastcgi-call c #:role role #:params params #:data data))
                  (λ () (fcgi-client-close c))))

  (define auth-params '(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . "/private/a.txt")))

  (define (check-authorizer s)
    (define (ask extra)
      (define reply (call-role (served-address s) 'authorizer (append auth-params extra)))
      (check-eq? (fcgi-reply-protocol-status reply) 'request-complete)
      (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout reply)))
      (list status headers body))
    (define granted (ask '(("HTTP_AUTHORIZATION" . "Bearer demo-token"))))
    (check-equal? (car granted) 200)
    (check-equal? (assoc "Variable-REMOTE_USER" (cadr granted)) '("Variable-REMOTE_USER" . "demo"))
    (check-equal? (caddr granted) #"")
    (define wrong (ask '(("HTTP_AUTHORIZATION" . "Bearer guess"))))
    (check-equal? (car wrong) 403)
    (define none (ask '()))
    (check-equal? (car none) 401)
    (check-equal? (cdr (assoc "WWW-Authenticate" (cadr none))) "Bearer realm=\"example\"")
    (check-eq? (fcgi-reply-protocol-status (call-role (served-address s) 'responder auth-params))
               'unknown-role))

  (define (check-filter s)
    (define (run-filter data)
      (define reply (call-role (served-address s) 'filter
                               `(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . "/doc.txt")
                                 ("FCGI_DATA_LENGTH" . ,(number->string (bytes-length data))))
                               #:data data))
      (check-eq? (fcgi-reply-protocol-status reply) 'request-complete)
      (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout reply)))
      (check-equal? status 200)
      body)
    (check-equal? (run-filter #"one\ntwo\n") #"     1  one\n     2  two\n")
    (check-equal? (run-filter #"") #"")
    (check-equal? (run-filter #"no newline") #"     1  no newline\n")
    ;; 100000 lines (1.1 MB): every line numbered, in order
    (define lines (for/list ([i (in-range 100000)]) (format "line ~a" i)))
    (define out (run-filter (string->bytes/utf-8 (string-append (string-join lines "\n") "\n"))))
    (check-equal? out
                  (string->bytes/utf-8
                   (string-append* (for/list ([l (in-list lines)] [i (in-naturals 1)])
                                     (format "~a~a  ~a\n" (make-string (- 6 (string-length (number->string i))) #\space) i l)))))
    (check-eq? (fcgi-reply-protocol-status (call-role (served-address s) 'responder auth-params))
               'unknown-role))

  ;; ---------------------------------------------------------------------------------
  ;; Set-up: every app at once (they take seconds to load), one nginx per Responder.

  ;; name, file, behind nginx?, check
  (define examples
    (list (list "hello" "hello.rkt" #t check-hello)
          (list "hello-raw" "hello-raw.rkt" #t check-hello)
          (list "servlet" "servlet.rkt" #t check-servlet)
          (list "guess" "guess.rkt" #t check-guess)
          (list "json-api" "json-api.rkt" #t check-json-api)
          (list "upload" "upload.rkt" #t check-upload)
          (list "authorizer" "authorizer.rkt" #f check-authorizer)
          (list "filter" "filter.rkt" #f check-filter)))

  (define (run dir)
    (define ports (free-ports (length examples)))
    (define started '())
    (define (started! p) (set! started (cons p started)) p)
    (dynamic-wind
     void
     (λ ()
       (define servers
         (for/list ([e (in-list examples)] [port (in-list ports)])
           (define name (car e))
           (define address (format "unix:~a/~a.sock" dir name))
           ;; one worker: the guestbook and the item store live in the process; the
           ;; game's continuations are passed to their worker, so it takes two
           (define app (started! (start-app name (repo-file "examples" (cadr e)) address
                                            #:dir dir #:args (if (equal? name "guess")
                                                                 '("--workers" "2")
                                                                 '("--workers" "1")))))
           (when (caddr e)
             (define sub (build-path dir name))
             (make-directory sub)
             (define conf (render-template! (repo-file "deploy" "nginx" "racket-app.conf")
                                            (build-path sub "racket-app.conf")
                                            `(("SOCKET" . ,(substring address 5))
                                              ("LISTEN" . ,(format "127.0.0.1:~a" port)))))
             (copy-file "/etc/nginx/fastcgi_params" (build-path sub "fastcgi_params"))
             (define main (build-path sub "nginx.conf"))
             (call-with-output-file main (λ (out) (write-string (nginx-main-conf sub (list conf)) out)))
             (started! (start-process (string-append "nginx-" name) nginx
                                      (list "-c" (path->string main) "-p" (path->string sub) "-e" "stderr")
                                      #:dir dir)))
           (served name app address (and (caddr e) port))))
       (for ([s (in-list servers)] [e (in-list examples)])
         (wait-for-app (served-address s) (served-app s))
         (when (served-port s) (wait-for-tcp (served-port s) 10))
         (test-case (format "examples/~a" (cadr e)) ((cadddr e) s)))
       (test-case "the examples and their fronts logged no errors"
         (for ([p (in-list started)])
           (check-clean-log (proc-name p) (proc-stderr-file p)
                            #rx"\\[(error|crit|alert|emerg)\\]| (error|fatal) "))))
     (λ () (for-each stop-process! started))))

  (call-with-temp-dir "fcgi-examples" run))
