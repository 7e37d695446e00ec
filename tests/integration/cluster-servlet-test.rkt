#lang racket/base
;; Servlets across machines, both ways deploy/cluster/ publishes, on hosts made as network
;; namespaces (as cluster-test.rkt makes them, in another /24 and under other names, so
;; that both tests can run at once): h1, h2, h3 (10.231.88.11-13) and h4 (.14) on a bridge
;; (10.231.88.1) in a fifth namespace that holds two HAProxies and the client. The /24
;; exists only inside these namespaces; nothing here connects outside loopback and them.
;;
;; Each of h1-h3 runs, with `raco fastcgi serve --workers 2`,
;;   - cluster-servlet-app.rkt on :9000: a stateful servlet (its continuations live in one
;;     worker of one host), behind deploy/cluster/haproxy-sticky.cfg on the LB's
;;     127.0.0.1:8080 (a cookie pins each session to its host);
;;   - cluster-servlet-stateless-app.rkt on :9001: a stateless servlet (#lang web-server,
;;     its continuations in its URLs), with one --secret-file for the three, behind the
;;     plain round-robin deploy/cluster/haproxy.cfg on 127.0.0.1:8081;
;; and h4 runs the stateless app with another secret (a misconfigured host), asked
;; directly over FastCGI.
;;
;; Checks: (a) stateful sessions through the sticky HAProxy: every step of a session is
;; answered 200 by the host it is pinned to, with the continuation's state; sessions are
;; spread over the hosts; a step URL sent to another host directly gets the expiration
;; page. (c) stateless sessions through the round-robin HAProxy: the steps of one session
;; are answered by several hosts, all 200, with the state carried in the URL (the page
;; lists the hosts that answered the earlier steps). (e) h4 answers the others' URLs 400
;; (and the others answer h4's 400), never a 5xx, never with the state; a URL with a
;; changed signature is a 400. (b) the host pinned by a session goes away (its apps
;; stopped with SIGTERM, its link taken down): the session's next step is answered by
;; another host with the expiration page (200), and HAProxy pins the client there; other
;; sessions go on, new sessions work, a stateless session goes on on the remaining hosts.
;; (d) the secret is in no URL, no page and no log (the apps' and HAProxy's stderr).
;; No answer in the whole run is a 5xx. Every loop is bounded. A run takes about 40 s on a
;; quiet machine, most of it starting the 13 workers (2 CPU-seconds each); under a heavy load
;; from other jobs, up to twice or three times that.
;; Needs root (`ip netns`): as another user it prints that it skips, and runs no check.
;;
;; The client is this module's main submodule, run inside the LB namespace: it reads one
;; request per line from stdin and writes one answer per line to stdout:
;;   (http PORT URI (HEADER ...))   GET URI from 127.0.0.1:PORT, each HEADER "Name: value"
;;   (fcgi ADDRESS URI)             a FastCGI GET to ADDRESS (HOST:PORT)
;;     -> (answer STATUS ((name . value) ...) BODY) or (failed MESSAGE)
;;   (probe ADDRESS)                -> (up? BOOLEAN): whether the app answers GET_VALUES
;; It exits when its stdin closes.
(require racket/list
         racket/string
         "../../fastcgi/client.rkt"
         "lib.rkt")

;; serve-client : -> void ; the loop described above
(define (serve-client)
  (let loop ()
    (define cmd (read))
    (unless (eof-object? cmd)
      (define answer
        (with-handlers ([exn:fail? (λ (e) `(failed ,(exn-message e)))])
          (case (car cmd)
            [(http)
             (define r (http-request (cadr cmd) (caddr cmd) #:headers (cadddr cmd) #:timeout 20))
             `(answer ,(http-response-status r) ,(http-response-headers r) ,(http-response-body r))]
            [(fcgi)
             (define-values (status headers body) (fastcgi-request (cadr cmd) #:uri (caddr cmd) #:timeout 20))
             `(answer ,status ,(for/list ([h (in-list headers)]) (cons (string-downcase (car h)) (cdr h)))
                      ,body)]
            [(probe)
             `(up? ,(with-handlers ([exn:fail? (λ (e) #f)])
                      (define c (fastcgi-connect (cadr cmd) #:timeout 2))
                      (dynamic-wind void
                                    (λ () (pair? (fastcgi-get-values c '("FCGI_MPXS_CONNS") #:timeout 5)))
                                    (λ () (fcgi-client-close c)))))]
            [else `(failed ,(format "unknown command ~s" cmd))])))
      (write answer)
      (newline)
      (flush-output)
      (loop))))

(module+ main
  (serve-client))

(module+ test
  (require ffi/unsafe
           file/sha1
           net/base64
           net/uri-codec
           racket/file
           racket/os
           rackunit
           "../lib/netns.rkt"
           "deploy-lib.rkt")

  (define geteuid (get-ffi-obj "geteuid" #f (_fun -> _int)))
  (define start-ms (current-inexact-milliseconds))
  ;; say : string any ... -> void ; the test's progress, with seconds since the start
  (define (say fmt . args)
    (printf "cluster-servlet-test: ~a s: ~a\n" (/ (round (/ (- (current-inexact-milliseconds) start-ms) 100.)) 10.)
            (apply format fmt args)))

  (define subnet "10.231.88")
  (define prefix-rx #rx"^fcgisvl([0-9]+)-")
  (define prefix (format "fcgisvl~a-" (getpid)))
  (define (ns name) (string-append prefix name))
  (define hosts '("h1" "h2" "h3"))          ; behind the HAProxies
  (define odd-host "h4")                    ; the stateless app with another secret
  (define (host-address h) (format "~a.1~a" subnet (substring h 1)))
  (define (stateful-address h) (string-append (host-address h) ":9000"))
  (define (stateless-address h) (string-append (host-address h) ":9001"))
  (define sticky-port 8080)                 ; both on the LB namespace's own loopback
  (define plain-port 8081)
  ;; HAProxy's server names, as the sticky cookie names them
  (define (server->host s) (string-append "h" (substring s 3)))
  (define expired-text #"Sorry, this page has expired. Please go back.")

  (define (run ip haproxy dir)
    (define racket-exe (find-system-path 'exec-file))
    (define this-file (variable-reference->module-source (#%variable-reference)))
    (define stateful-app (repo-file "tests" "integration" "cluster-servlet-app.rkt"))
    (define stateless-app (repo-file "tests" "integration" "cluster-servlet-stateless-app.rkt"))

    ;; ip! : string ... -> void ; runs ip, failing loudly with its stderr
    (define (ip! . args)
      (define-values (code out err) (run-program ip args))
      (unless (zero? code)
        (error 'cluster-servlet-test "ip ~a failed (~a): ~a" (string-join args) code err)))

    ;; delete-namespaces! : -> void ; ours, and those a killed earlier run left (its pid is
    ;; gone); never those of another run of this test going on now
    (define (delete-namespaces!)
      (define-values (code out err) (run-program ip '("netns" "list")))
      (for ([line (in-list (string-split (bytes->string/utf-8 out) "\n"))])
        (define name (car (append (string-split line) '(""))))
        (define m (regexp-match prefix-rx name))
        (when (and m (or (equal? (string->number (cadr m)) (getpid))
                         (not (directory-exists? (format "/proc/~a" (cadr m))))))
          (run-program ip (list "netns" "delete" name)))))

    ;; make-network! : -> void ; lb with bridge br0 at .1, a veth to each host, h4 included
    ;; (tests/lib/netns.rkt)
    (define (make-network!)
      (make-bridge-network! #:ip! ip! #:ns ns #:subnet subnet #:hosts (append hosts (list odd-host))
                            #:host-address host-address))

    ;; in-ns : string path-string (listof string) -> (listof string) ; ip's arguments
    (define (in-ns n program args) (list* "netns" "exec" (ns n) (if (path? program) (path->string program) program) args))

    ;; Secrets made as deploy/cluster/README.md says (head -c 32 /dev/urandom | base64),
    ;; mode 0600: one for h1-h3, another for h4.
    (define (make-secret! name)
      (define f (build-path dir name))
      (call-with-output-file f #:exists 'truncate
        (λ (out) (write-bytes (base64-encode (call-with-input-file "/dev/urandom" (λ (in) (read-bytes 32 in))) #"")
                              out)
          (newline out)))
      (file-or-directory-permissions f #o600)
      f)
    (define secret-file (make-secret! "secret"))
    (define odd-secret-file (make-secret! "other-secret"))
    ;; what the server signs with: the file's text without its final newline
    (define secrets (for/list ([f (list secret-file odd-secret-file)])
                      (regexp-replace #px#"\\s+$" (file->bytes f) #"")))

    ;; start-app! : string string path string (listof string) -> proc
    (define (start-app! name h app listen extra #:workers [workers 2])
      (start-process name ip
                     (in-ns h "/usr/bin/env"
                            (list* (string-append "APP_HOST=" h) (path->string raco)
                                   "fastcgi" "serve" (path->string app) "--listen" listen
                                   "--workers" (number->string workers) "--ping-path" "/ping"
                                   "--allowed-clients" (string-append subnet ".1") extra))
                     #:dir dir))

    (define cfg-sticky
      (render-template! (repo-file "deploy" "cluster" "haproxy-sticky.cfg") (build-path dir "haproxy-sticky.cfg")
                        `(("LISTEN" . ,(format "127.0.0.1:~a" sticky-port))
                          ("APP1" . ,(stateful-address "h1")) ("APP2" . ,(stateful-address "h2"))
                          ("APP3" . ,(stateful-address "h3")))))
    (define cfg-plain
      (render-template! (repo-file "deploy" "cluster" "haproxy.cfg") (build-path dir "haproxy.cfg")
                        `(("LISTEN" . ,(format "127.0.0.1:~a" plain-port))
                          ("APP1" . ,(stateless-address "h1")) ("APP2" . ,(stateless-address "h2"))
                          ("APP3" . ,(stateless-address "h3")))))
    (for ([cfg (list cfg-sticky cfg-plain)])
      (define-values (code out err) (run-program haproxy (list "-c" "-f" (path->string cfg))))
      (unless (zero? code) (error 'cluster-servlet-test "haproxy rejects ~a:\n~a~a" cfg out err)))
    ;; compiled once here, not by each of the 13 workers
    (let-values ([(code out err) (run-program raco (list "make" (path->string stateful-app) (path->string stateless-app))
                                              #:timeout 120)])
      (unless (zero? code) (error 'cluster-servlet-test "raco make failed:\n~a~a" out err)))

    (delete-namespaces!)
    (define at-exit (plumber-add-flush! (current-plumber) (λ (h) (delete-namespaces!))))
    (define started '())
    (define (started! p) (set! started (cons p started)) p)
    (dynamic-wind
     void
     (λ ()
       (make-network!)
       (test-case "the root namespace has no route into the test's /24"
         (check-root-isolated ip subnet))
       (define stateful-apps
         (for/hash ([h (in-list hosts)])
           (values h (started! (start-app! (string-append "stateful-" h) h stateful-app (stateful-address h) '())))))
       (define stateless-apps
         (for/hash ([h (in-list (append hosts (list odd-host)))])
           (values h (started! (start-app! (string-append "stateless-" h) h stateless-app (stateless-address h)
                                           (list "--secret-file" (path->string (if (equal? h odd-host)
                                                                                   odd-secret-file
                                                                                   secret-file)))
                                           ;; h4 only answers a few direct requests
                                           #:workers (if (equal? h odd-host) 1 2))))))
       (define client (started! (start-process "client" ip (in-ns "lb" racket-exe (list (path->string this-file)))
                                               #:dir dir #:stdout-pipe? #t)))

       ;; rpc : s-expression -> s-expression ; one exchange with the client
       (define (rpc cmd)
         (write cmd (proc-stdin client))
         (newline (proc-stdin client))
         (flush-output (proc-stdin client))
         (read (open-input-string (read-line/timeout (proc-stdout client) 40 (format "the client's answer to ~s" cmd)))))

       ;; Every answer of the run, for the checks on all of them: (list what status body).
       (define answers '())
       (define (answer! what a)
         (set! answers (cons (list what (cadr a) (cadddr a)) answers))
         a)

       ;; get : port-number string (or/c #f hash) -> answer ; through a HAProxy, with a
       ;; cookie jar (name -> value) that the answer's Set-Cookie headers update
       (define (get port uri jar)
         (define cookies (if jar (for/list ([(k v) (in-hash jar)]) (format "~a=~a" k v)) '()))
         (define a (rpc `(http ,port ,uri ,(if (null? cookies) '() (list (string-append "Cookie: " (string-join cookies "; ")))))))
         (unless (eq? (car a) 'answer)
           (error 'cluster-servlet-test "GET ~a through port ~a failed: ~a" uri port (cadr a)))
         (when jar
           (for ([h (in-list (caddr a))] #:when (equal? (car h) "set-cookie"))
             (define m (regexp-match #rx"^([^=;]+)=([^;]*)" (cdr h)))
             (when m (hash-set! jar (cadr m) (caddr m)))))
         (answer! (format "GET ~a via ~a" uri port) a))
       ;; fcgi : string string -> answer ; straight to an app
       (define (fcgi address uri)
         (define a (rpc `(fcgi ,address ,uri)))
         (unless (eq? (car a) 'answer)
           (error 'cluster-servlet-test "FastCGI GET ~a to ~a failed: ~a" uri address (cadr a)))
         (answer! (format "FastCGI GET ~a to ~a" uri address) a))
       (define (status a) (cadr a))
       (define (header a name) (cond [(assoc name (caddr a)) => cdr] [else #f]))
       (define (body a) (cadddr a))
       ;; state : answer -> (or/c #f (list host tag count (listof host))) ; the page's state line
       (define (state a)
         (define m (regexp-match #px#"id=\"state\">host=(\\S+) tag=(\\S+) count=([0-9]+) hosts=([^<]*)<" (body a)))
         (and m (list (bytes->string/utf-8 (cadr m)) (bytes->string/utf-8 (caddr m))
                      (string->number (bytes->string/utf-8 (cadddr m)))
                      (string-split (bytes->string/utf-8 (list-ref m 4)) ","))))
       ;; links : answer -> (listof string) ; every href of the page, unescaped
       (define (links a)
         (for/list ([m (in-list (regexp-match* #px#"href=\"([^\"]*)\"" (body a) #:match-select cadr))])
           (regexp-replace* #rx"&amp;" (bytes->string/utf-8 m) "&")))
       (define (next-link a)
         (define m (regexp-match #px#"id=\"next\" href=\"([^\"]*)\"" (body a)))
         (and m (regexp-replace* #rx"&amp;" (bytes->string/utf-8 (cadr m)) "&")))
       (define all-urls '())
       (define (url! u) (when u (set! all-urls (cons u all-urls))) u)
       (define (expired? a) (regexp-match? (byte-regexp (regexp-quote expired-text)) (body a)))
       (define (brief a) (format "~a ~a ~s" (status a) (header a "x-app-host")
                                 (let ([b (body a)]) (subbytes b 0 (min 160 (bytes-length b))))))

       ;; -------------------------------------------------------------------------------
       ;; The apps, then the HAProxies.
       (for ([p+addr (in-list (append (for/list ([(h p) (in-hash stateful-apps)]) (cons p (stateful-address h)))
                                      (for/list ([(h p) (in-hash stateless-apps)]) (cons p (stateless-address h)))))])
         (define p (car p+addr))
         (define addr (cdr p+addr))
         (wait-until 200 (format "~a to answer on ~a" (proc-name p) addr)
                     (λ ()
                       (unless (eq? (subprocess-status (proc-subprocess p)) 'running)
                         (error 'cluster-servlet-test "~a exited before answering:\n~a" (proc-name p)
                                (file-text (proc-stderr-file p))))
                       (or (cadr (rpc `(probe ,addr))) (begin (sleep 0.2) #f)))))
       (say "the seven apps answer")
       (define haproxies
         (for/list ([cfg (list cfg-sticky cfg-plain)] [name '("haproxy-sticky" "haproxy-plain")])
           (started! (start-process name ip (in-ns "lb" haproxy (list "-f" (path->string cfg) "-db")) #:dir dir))))
       ;; until each HAProxy has routed new sessions to the three hosts (its checks have
       ;; them all UP)
       (for ([port (list sticky-port plain-port)])
         (define seen (make-hash))
         (wait-until 60 (format "HAProxy on ~a to route to h1, h2 and h3" port)
                     (λ ()
                       (define a (rpc `(http ,port "/counter?tag=warm" ())))
                       (when (and (eq? (car a) 'answer) (= 200 (status a)))
                         (hash-set! seen (header a "x-app-host") #t))
                       (or (for/and ([h (in-list hosts)]) (hash-ref seen h #f))
                           (begin (sleep 0.05) #f)))))
       (say "both HAProxies route to the three hosts")

       ;; -------------------------------------------------------------------------------
       ;; (a) Stateful sessions, pinned by HAProxy's cookie.
       (struct session (tag jar [host #:mutable] [count #:mutable] [url #:mutable] [hosts #:mutable]) #:transparent)
       (define problems '())
       (define (problem! fmt . args) (set! problems (cons (apply format fmt args) problems)))
       (define (problems-since! thunk)
         (set! problems '())
         (thunk)
         (reverse problems))

       ;; start-session! : port-number string -> session ; its first page
       (define (start-session! port tag)
         (define s (session tag (make-hash) #f 0 #f '()))
         (define a (get port (format "/counter?tag=~a" tag) (session-jar s)))
         (define st (state a))
         (cond
           [(not (and (= 200 (status a)) st (equal? (cadr st) tag) (= 0 (caddr st))))
            (problem! "session ~a: first page: ~a" tag (brief a))]
           [else
            (set-session-host! s (car st))
            (set-session-hosts! s (cadddr st))
            (set-session-url! s (url! (next-link a)))])
         (for-each url! (links a))
         s)
       ;; step! : port-number session -> answer ; follows "next": the answer must be the
       ;; next count, from the session's host when pinned? (else from any), its page's
       ;; hosts the hosts that answered so far
       (define (step! port s #:pinned? pinned?)
         (define a (get port (session-url s) (and pinned? (session-jar s))))
         (define st (state a))
         (define want-count (add1 (session-count s)))
         (cond
           [(not (and (= 200 (status a)) st))
            (problem! "session ~a, step ~a: ~a" (session-tag s) want-count (brief a))]
           [else
            (define who (car st))
            (unless (equal? (header a "x-app-host") who)
              (problem! "session ~a: page from ~a, X-App-Host ~a" (session-tag s) who (header a "x-app-host")))
            (when (and pinned? (not (equal? who (session-host s))))
              (problem! "session ~a pinned to ~a, step ~a answered by ~a" (session-tag s) (session-host s) want-count who))
            (unless (and (equal? (cadr st) (session-tag s)) (= (caddr st) want-count))
              (problem! "session ~a, step ~a: the page's state is ~a" (session-tag s) want-count st))
            (unless (equal? (cadddr st) (cons who (session-hosts s)))
              (problem! "session ~a, step ~a: hosts ~a, expected ~a" (session-tag s) want-count (cadddr st)
                        (cons who (session-hosts s))))
            (set-session-count! s want-count)
            (set-session-hosts! s (cadddr st))
            (set-session-url! s (url! (next-link a)))])
         (for-each url! (links a))
         a)
       (define (pinned-server s) (hash-ref (session-jar s) "SRV" #f))

       (define stateful (for/list ([i (in-range 1 7)]) (start-session! sticky-port (format "s~a" i))))
       (test-case "(a) every new stateful session gets a page and a cookie that pins it to its host"
         (check-equal? (reverse problems) '())
         (for ([s (in-list stateful)])
           (check-not-false (pinned-server s) (format "no SRV cookie for ~a: ~a" (session-tag s) (session-jar s)))
           (when (pinned-server s)
             (check-equal? (server->host (pinned-server s)) (session-host s)))))
       (define pinned (map session-host stateful))
       (say "stateful sessions on ~a" pinned)
       (test-case "(a) stateful sessions spread over the hosts"
         (check-true (>= (length (remove-duplicates pinned)) 2) (format "hosts: ~a" pinned)))
       (test-case "(a) four steps of each session, interleaved: all 200 from its host, with its state"
         (check-equal? (problems-since! (λ () (for* ([_ (in-range 4)] [s (in-list stateful)])
                                                (step! sticky-port s #:pinned? #t))))
                       '())
         (check-equal? (map session-count stateful) '(4 4 4 4 4 4)))
       (test-case "(a) a step URL sent straight to another host gets the expiration page"
         (define s (car stateful))
         (for ([h (in-list hosts)] #:unless (equal? h (session-host s)))
           (define a (fcgi (stateful-address h) (session-url s)))
           (check-equal? (status a) 200 (brief a))
           (check-true (expired? a) (brief a))
           (check-false (state a))))

       ;; -------------------------------------------------------------------------------
       ;; (c) Stateless sessions through the round-robin HAProxy, one secret on h1-h3.
       (set! problems '())
       ;; one session after the other: round robin sends each step to the next host
       (define stateless
         (for/list ([i (in-range 1 4)])
           (define s (start-session! plain-port (format "t~a" i)))
           (for ([_ (in-range 5)]) (step! plain-port s #:pinned? #f))
           s))
       (define stateless-problems (reverse problems))
       (test-case "(c) stateless sessions: five steps each, all 200, the state in the URL"
         (check-equal? stateless-problems '())
         (check-equal? (map session-count stateless) '(5 5 5)))
       (say "stateless sessions' hosts: ~a" (map (λ (s) (reverse (session-hosts s))) stateless))
       (test-case "(c) each stateless session's steps were answered by several hosts"
         (for ([s (in-list stateless)])
           (check-true (>= (length (remove-duplicates (session-hosts s))) 2)
                       (format "~a: ~a" (session-tag s) (session-hosts s)))))

       ;; (e) h4 has another secret.
       (test-case "(e) a host with another secret answers the others' URLs 400, without the state"
         (define s (cadr stateless))
         (define a (fcgi (stateless-address odd-host) (session-url s)))
         (check-equal? (status a) 400 (brief a))
         (check-false (regexp-match? (regexp-quote (string->bytes/utf-8 (session-tag s))) (body a)))
         (check-false (regexp-match? #rx#"count=" (body a)))
         ;; the same URL is good on every host with the shared secret
         (for ([h (in-list hosts)])
           (define b (fcgi (stateless-address h) (session-url s)))
           (check-equal? (status b) 200 (brief b))
           (check-equal? (state b) (list h (session-tag s) (add1 (session-count s)) (cons h (session-hosts s))))))
       (test-case "(e) the others answer a URL from the host with another secret 400"
         (define a (fcgi (stateless-address odd-host) "/counter?tag=odd"))
         (check-equal? (status a) 200 (brief a))
         (define u (next-link a))
         (check-not-false u)
         (when u
           (url! u)
           (check-equal? (status (fcgi (stateless-address odd-host) u)) 200)
           (for ([h (in-list hosts)])
             (define b (fcgi (stateless-address h) u))
             (check-equal? (status b) 400 (brief b))
             (check-false (regexp-match? #rx#"odd|count=" (body b))))))
       (test-case "(e) a URL whose signature was changed is a 400"
         (define u (session-url (car stateless)))
         (define m (regexp-match-positions #px"[.]([0-9a-f]{32})" u))
         (check-not-false m (format "no signature in ~a" u))
         (when m
           (define i (caadr m))
           (define changed (string-append (substring u 0 i)
                                          (if (char=? (string-ref u i) #\0) "1" "0")
                                          (substring u (add1 i))))
           (define a (fcgi (stateless-address "h1") changed))
           (check-equal? (status a) 400 (brief a))))

       ;; -------------------------------------------------------------------------------
       ;; (b) The host pinned by the first stateful session goes away.
       (define victim-session (car stateful))
       (define victim (session-host victim-session))
       (define survivors (remove victim hosts))
       (say "stopping ~a (pinned by ~a)" victim (session-tag victim-session))
       (define stop-start (current-inexact-milliseconds))
       ;; as cluster-test.rkt: the apps stop (SIGTERM), then the link goes down. (A host
       ;; that vanishes with its apps running is slower to leave: see deploy/cluster/README.md.)
       (define exit-status (stop-process! (hash-ref stateful-apps victim) #:timeout 35))
       (define exit-status-2 (stop-process! (hash-ref stateless-apps victim) #:timeout 35))
       (ip! "-n" (ns "lb") "link" "set" (string-append "b" victim) "down")
       (say "~a: apps exited (~a, ~a) in ~a ms, link down" victim exit-status exit-status-2
            (round (- (current-inexact-milliseconds) stop-start)))
       (test-case "(b) the session pinned to the host that died gets the expiration page from another host"
         (define a (get sticky-port (session-url victim-session) (session-jar victim-session)))
         (check-equal? (status a) 200 (brief a))
         (check-true (expired? a) (brief a))
         (check-false (state a))
         ;; HAProxy pinned the client to the server that answered
         (define srv (pinned-server victim-session))
         (check-not-false (and srv (member (server->host srv) survivors)) (format "SRV=~a" srv))
         ;; and the client starts again there
         (define again (start-session! sticky-port "s1-again"))
         (check-equal? (problems-since! (λ () (for ([_ (in-range 2)]) (step! sticky-port again #:pinned? #t)))) '()))
       (test-case "(b) every other session pinned to it: the expiration page, 200"
         (for ([s (in-list (cdr stateful))] #:when (equal? (session-host s) victim))
           (define a (get sticky-port (session-url s) (session-jar s)))
           (check-equal? (status a) 200 (brief a))
           (check-true (expired? a) (brief a))))
       (test-case "(b) sessions pinned to the other hosts go on"
         (check-equal? (problems-since! (λ () (for ([s (in-list stateful)] #:unless (equal? (session-host s) victim))
                                                (step! sticky-port s #:pinned? #t))))
                       '()))
       (test-case "(b) new stateful sessions work, on the other hosts"
         (set! problems '())
         (define fresh (for/list ([i (in-range 3)]) (start-session! sticky-port (format "n~a" i))))
         (for* ([_ (in-range 2)] [s (in-list fresh)]) (step! sticky-port s #:pinned? #t))
         (check-equal? (reverse problems) '())
         (check-false (member victim (map session-host fresh)) (format "hosts: ~a" (map session-host fresh))))
       (test-case "(c) a stateless session goes on on the remaining hosts"
         (define s (car stateless))
         (define before (session-hosts s))
         (check-equal? (problems-since! (λ () (for ([_ (in-range 3)]) (step! plain-port s #:pinned? #f)))) '())
         (define new-hosts (take (session-hosts s) (- (length (session-hosts s)) (length before))))
         (check-false (member victim new-hosts) (format "answered by ~a" new-hosts))
         (check-equal? (session-count s) 8))
       (say "after the stop: ~a answers in all" (length answers))

       ;; -------------------------------------------------------------------------------
       ;; (d) The secret: in no URL, no page, no log.
       (define (secret-forms s)
         (list s (string->bytes/utf-8 (uri-encode (bytes->string/latin-1 s)))
               (string->bytes/utf-8 (form-urlencoded-encode (bytes->string/latin-1 s)))
               (string->bytes/latin-1 (bytes->hex-string s))))
       (define forms (append-map secret-forms secrets))
       (define (has-secret? bs) (for/or ([f (in-list forms)]) (regexp-match? (regexp-quote f) bs)))
       (test-case "(d) no URL a page holds, and no page, contains the secret"
         (check-true (> (length all-urls) 50) (format "~a URLs" (length all-urls)))
         (check-equal? (filter (λ (u) (has-secret? (string->bytes/utf-8 u))) all-urls) '())
         (check-equal? (for/list ([a (in-list answers)] #:when (has-secret? (caddr a))) (car a)) '()))
       (for ([p (in-list started)] #:unless (eq? p client))
         (stop-process! p #:timeout 35))
       (test-case "(d) no log contains the secret; the apps with --secret-file do not warn about it"
         (define logs (for/list ([p (in-list (append (hash-values stateful-apps) (hash-values stateless-apps) haproxies))])
                        (cons (proc-name p) (file->bytes (proc-stderr-file p)))))
         ;; the logs are there: the apps', and HAProxy's, which took the victim out
         (check-equal? (for/list ([l (in-list logs)]
                                  #:unless (regexp-match? (if (regexp-match? #rx"^haproxy" (car l))
                                                              (byte-regexp (string->bytes/utf-8 (format "racket/app~a is DOWN" (substring victim 1))))
                                                              #rx#"listening on")
                                                          (cdr l)))
                         (car l))
                       '())
         (check-equal? (for/list ([l (in-list logs)] #:when (has-secret? (cdr l))) (car l)) '())
         (check-equal? (for/list ([l (in-list logs)] #:when (regexp-match? #rx#"no --secret-file" (cdr l))) (car l)) '()))
       (test-case "no answer in the whole run was a 5xx"
         (check-equal? (for/list ([a (in-list answers)] #:when (>= (cadr a) 500)) (list (car a) (cadr a))) '()))
       (say "~a answers, statuses ~a" (length answers)
            (for/fold ([h (hash)]) ([a (in-list answers)]) (hash-update h (cadr a) add1 0))))
     (λ ()
       (for-each stop-process! started)
       (delete-namespaces!)
       (plumber-flush-handle-remove! at-exit))))

  (cond
    [(not (zero? (geteuid)))
     (printf "cluster-servlet-test: SKIPPED, no check run: it needs root (ip netns); CI runs it as root\n")]
    [else
     (define ip (require-program! "/usr/sbin/ip" "iproute2"))
     (define haproxy (require-program! "/usr/sbin/haproxy" "haproxy"))
     (call-with-temp-dir "fcgi-clsv" (λ (dir) (run ip haproxy dir)))]))
