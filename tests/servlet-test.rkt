#lang racket/base
;; Servlets as a web-server user writes them (tests/servlets/, one app per form), served
;; over FastCGI and driven like a browser: links, forms and redirects followed, going back
;; to an older page, expired continuations.
;; - Apps that provide only start run in this process under serve/fastcgi, and the same
;;   clicks go to the same app under web-server's serve/servlet (HTTP on a free port): the
;;   pages must be the same once the continuation ids (which differ by design: worker-tagged
;;   ids, signed salts, signed stuffed URLs) are replaced by a placeholder.
;; - The module-convention apps ('v1, 'v2, 'stateless and its stuffers, #lang web-server),
;;   a servlet that calls exit (served with a short --continuation-timeout) and
;;   a #lang web-server/insta file run as `raco fastcgi serve APP --single-process`
;;   subprocesses, all started at once at the top (each load takes seconds), each wait
;;   bounded.
(require racket/file
         racket/string
         racket/tcp
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/main.rkt"
         (only-in (submod "../fastcgi/private/transport/client.rkt" private) cgi-params)
         "integration/lib.rkt"
         "servlets/harness.rkt")

(define in-process-apps
  '("suspend.rkt" "dispatch.rkt" "suspend-url.rkt" "forward.rkt" "back.rkt" "finish.rkt"
    "redirect.rkt" "clear.rkt" "formlet.rkt" "page.rkt" "cells.rkt" "errors.rkt"))
(define process-apps
  '("v1.rkt" "v2.rkt" "stateless-default.rkt" "stateless-md5.rkt" "stateless-hash.rkt"
    "stateless-hmac.rkt" "lang.rkt" "exit.rkt"))
(compile-apps! (append in-process-apps process-apps))

(define dir (make-temporary-directory "fcgi-svt-~a" #:base-dir "/tmp"))
(define at-exit (plumber-add-flush! (current-plumber)
                                    (λ (h) (with-handlers ([exn:fail? void]) (delete-directory/files dir)))))
(define md5-dir (build-path dir "urls-md5"))
(define hash-dir (build-path dir "urls-hash"))
(make-directory md5-dir)
(make-directory hash-dir)

;; The subprocesses, started now; each test waits for its own.
(define servers
  (for/hash ([spec (in-list `(("v1.rkt" "v1") ("v2.rkt" "v2")
                              ("stateless-default.rkt" "sd") ("stateless-hmac.rkt" "sh1")
                              ("stateless-md5.rkt" "md5" ("FASTCGI_TEST_URLS" . ,(path->string md5-dir)))
                              ("stateless-hash.rkt" "hash" ("FASTCGI_TEST_URLS" . ,(path->string hash-dir)))
                              ("lang.rkt" "lang") ("exit.rkt" "exit" "--continuation-timeout" "2")))])
    (values (cadr spec)
            (start-server (car spec) (cons "--single-process" (filter string? (cddr spec)))
                          #:dir dir #:name (cadr spec) #:env (filter pair? (cddr spec))))))

;; served : string -> string ; the address of a subprocess server, once it serves
(define (served name)
  (define s (hash-ref servers name))
  (wait-server-ready s 90)
  (server-address s))

;; ---------------------------------------------------------------------------------------
;; Helpers.

;; call-with-fastcgi : string (string -> any) -> any ; an app of tests/servlets in-process
(define (call-with-fastcgi app proc #:continuation-timeout [timeout 14400])
  (define address #f)
  (define stop (serve/fastcgi (dynamic-require (app-path app) 'start) #:continuation-timeout timeout
                              #:listen (string-append "unix:" (path->string (build-path dir (string-append app ".sock"))))
                              #:on-ready (λ (a) (set! address a))))
  (dynamic-wind void (λ () (proc address)) (λ () (stop #:timeout 2))))

;; check-like-web-server : string (browser -> (listof resp)) -> (listof resp)
;; The scenario against the app over FastCGI, then against serve/servlet: the same pages,
;; continuations aside. Returns the FastCGI responses.
(define (check-like-web-server app scenario #:compare [compare normalize])
  (define ours (call-with-fastcgi app (λ (address) (scenario (fcgi-browser address)))))
  (define theirs (call-with-serve/servlet (dynamic-require (app-path app) 'start)
                                          (λ (port) (scenario (http-browser port)))))
  (check-equal? (length ours) (length theirs))
  (for ([o (in-list ours)] [t (in-list theirs)] [i (in-naturals)])
    (check-equal? (compare o) (compare t) (format "~a: response ~a as under serve/servlet" app i)))
  ours)

;; check-page : resp rx [status] -> void ; status and the page's text
(define (check-page r rx [status 200])
  (check-equal? (resp-status r) status (format "status of ~a" (resp-body r)))
  (check-regexp-match rx (resp-text r)))

(define expired-rx #rx"^Page Has Expired. Sorry, this page has expired. Please go back.$")

;; ---------------------------------------------------------------------------------------
;; Servlets that provide start, in-process, against serve/servlet.

(test-case "send/suspend: two forms, each continuation resumable again (going back)"
  (define rs
    (check-like-web-server
     "suspend.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "POST" (form-action r0) '(("n" . "3"))))
       (define r2 (get "POST" (form-action r1) '(("n" . "4"))))
       (define r3 (get "POST" (form-action r1) '(("n" . "10"))))
       (define r4 (get "POST" (form-action r0) '(("n" . "5"))))
       (define r5 (get "POST" (form-action r4) '(("n" . "1"))))
       (list r0 r1 r2 r3 r4 r5))))
  (check-page (list-ref rs 0) #rx"^First number")
  (check-page (list-ref rs 1) #rx"^Second number")
  (check-page (list-ref rs 2) #rx"^Sum 3 \\+ 4 = 7$")
  (check-page (list-ref rs 3) #rx"^Sum 3 \\+ 10 = 13$")
  (check-page (list-ref rs 5) #rx"^Sum 5 \\+ 1 = 6$")
  (check-not-equal? (form-action (list-ref rs 0)) (form-action (list-ref rs 1)))
  (check-true (string? (continuation-param (form-action (list-ref rs 0)))) "the action is a continuation URL"))

(test-case "send/suspend/dispatch with embed/url: closures as links; an older page's links still work"
  (define rs
    (check-like-web-server
     "dispatch.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "GET" (link r0 "plus")))
       (define r2 (get "GET" (link r1 "plus")))
       (define r3 (get "GET" (link r0 "minus")))
       (define r4 (get "GET" (link r1 "plus")))
       (list r0 r1 r2 r3 r4))))
  (check-equal? (map (λ (r) (resp-text r)) rs)
                (for/list ([n '(0 1 2 -1 2)]) (format "Counter count: ~a plus   minus" n))))

(test-case "send/suspend/url: the continuation as a url; a query added to it reaches the resumed code"
  (define rs
    (check-like-web-server
     "suspend-url.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (list r0 (get "GET" (link r0 "blue")) (get "GET" (link r0 "plain"))))))
  (check-regexp-match #rx"\\?color=blue$" (link (car rs) "blue"))
  (check-page (list-ref rs 1) #rx"color: blue")
  (check-page (list-ref rs 2) #rx"color: none"))

(test-case "send/forward: the first page's continuation expires once the second is sent"
  (define rs
    (check-like-web-server
     "forward.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "GET" (link r0 "next")))
       (list r0 r1 (get "GET" (link r0 "next")) (get "GET" (link r1 "next"))))))
  (check-page (list-ref rs 1) #rx"step two")
  (check-page (list-ref rs 2) expired-rx)
  (check-page (list-ref rs 3) #rx"done"))

(test-case "send/back: an answer from inside a loop; the continuation stays usable"
  (define rs
    (check-like-web-server
     "back.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define a (form-action r0))
       (list r0 (get "GET" a '(("target" . "49"))) (get "GET" a '(("target" . "50")))
             (get "GET" a '(("target" . "49")))))))
  (check-page (list-ref rs 1) #rx"49 is 7 squared")
  (check-page (list-ref rs 2) #rx"50 is not a square")
  (check-page (list-ref rs 3) #rx"49 is 7 squared"))

(test-case "send/finish: the continuations are cleared; going back gets the expiration page, not a 500"
  (define rs
    (check-like-web-server
     "finish.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (list r0 (get "GET" (link r0 "confirm")) (get "GET" (link r0 "confirm"))))))
  (check-page (list-ref rs 1) #rx"order placed")
  (check-page (list-ref rs 2) expired-rx))

(test-case "redirect/get: a POST answered 303 to a continuation URL; reloading it shows the result again"
  (define rs
    (check-like-web-server
     "redirect.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "POST" (form-action r0) '(("msg" . "hello there"))))
       (define loc (resp-header r1 "location"))
       (list r0 r1 (get "GET" loc) (get "GET" loc)))))
  (define r1 (list-ref rs 1))
  (check-equal? (resp-status r1) 303)
  (check-true (string? (continuation-param (resp-header r1 "location"))) "Location is a continuation URL")
  (check-page (list-ref rs 2) #rx"posted: hello there method now: GET")
  (check-page (list-ref rs 3) #rx"posted: hello there"))

(test-case "clear-continuation-table!: every earlier page expires, the new one works"
  (define rs
    (check-like-web-server
     "clear.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "GET" (link r0 "next")))
       (define r2 (get "GET" (link r1 "forget")))
       (list r0 r1 r2 (get "GET" (link r0 "next")) (get "GET" (link r1 "next")) (get "GET" (link r2 "next"))))))
  (check-page (list-ref rs 2) #rx"page 2")
  (check-page (list-ref rs 3) expired-rx)
  (check-page (list-ref rs 4) expired-rx)
  (check-page (list-ref rs 5) #rx"page 3"))

(test-case "formlets: the form posts to an embed/url closure that runs formlet-process"
  (define rs
    (check-like-web-server
     "formlet.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define names (map car (form-inputs r0)))
       (list r0
             (get "POST" (form-action r0) (list (cons (car names) "Ada") (cons (cadr names) "36")))
             (get "GET" (link r0 "cancel"))))))
  (check-equal? (length (form-inputs (car rs))) 2)
  (check-page (list-ref rs 1) #rx"Ada is 36 years old")
  (check-page (list-ref rs 2) #rx"cancelled"))

(test-case "web-server/page: define/page, embed/url and get-binding (of the resuming request)"
  (define rs
    (check-like-web-server
     "page.rkt"
     (λ (get)
       (define r0 (get "GET" "/?q=hello"))
       (define r1 (get "GET" (link r0 "next")))
       (list r0 r1 (get "GET" (string-append (link r1 "next") "?q=there"))))))
  (check-page (list-ref rs 0) #rx"page 1, q=hello")
  (check-page (list-ref rs 1) #rx"page 2, q=none")       ; a continuation URL drops the query
  (check-page (list-ref rs 2) #rx"page 3, q=there"))

(test-case "web cells: web-cell-shadow follows back and forward; a new session starts from the default"
  (define rs
    (check-like-web-server
     "cells.rkt"
     (λ (get)
       (define r0 (get "GET" "/"))
       (define r1 (get "GET" (link r0 "inc")))
       (define r2 (get "GET" (link r1 "inc")))
       (list r0 r1 r2 (get "GET" (link r0 "inc")) (get "GET" (link r2 "inc")) (get "GET" "/")))))
  (check-equal? (for/list ([r (in-list rs)]) (cadr (regexp-match #rx"cell: ([0-9]+)" (resp-text r))))
                '("0" "1" "2" "1" "3" "0")))

(test-case "web cells: requests of different users on one kept FastCGI connection do not share cells"
  ;; a front (nginx with keepalive) sends many users' requests over the same connection
  (call-with-fastcgi
   "cells.rkt"
   (λ (address)
     (define c (fastcgi-connect address))
     (define (get uri)
       (define r (fastcgi-call c #:params (cgi-params "GET" uri '() #f '()) #:keep-conn? #t #:timeout 10))
       (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout r)))
       (resp status '() body))
     (define r0 (get "/"))
     (define r1 (get (link r0 "inc")))
     (define r2 (get (link r1 "inc")))
     (define fresh (get "/"))
     (fcgi-client-close c)
     (check-regexp-match #rx"cell: 2" (resp-text r2))
     (check-regexp-match #rx"cell: 0" (resp-text fresh) "another user's session starts at the default"))))

(test-case "with-errors-to-browser: the error page, status 500, with the error's message"
  (define rs
    (check-like-web-server
     "errors.rkt"
     (λ (get) (list (get "GET" "/") (get "GET" "/?boom=1")))
     ;; the page quotes the error's context (stack), which differs between the servers
     #:compare (λ (r) (list (resp-status r) (resp-header r "content-type")
                            (regexp-match #px"^Servlet Error The following error occured:\\s+start: [^\n]*" (resp-text r))))))
  (check-page (car rs) #rx"no error")
  (check-page (cadr rs) #px"^Servlet Error The following error occured:\\s+start: the servlet failed on purpose" 500))

;; ---------------------------------------------------------------------------------------
;; The module convention and #lang web-server, as `raco fastcgi serve` processes.

;; stateless-c : string -> string ; the stuffed value of a stateless URL (its c entry)
(define (stateless-c url) (or (continuation-param url) (error 'stateless-c "no c in ~a" url)))

;; uri-path-segment-encode* : string -> string ; as a browser sends a path parameter
(define (uri-path-segment-encode* s)
  (regexp-replace* #rx"[^A-Za-z0-9()._~-]" s
                   (λ (c) (string-upcase (format "%~a" (number->string (char->integer (string-ref c 0)) 16))))))

(define v1-later (box #f))                ; (list browser resp deadline) for the second half
(test-case "'v1 with timeout: continuations work"
  (define get (fcgi-browser (served "v1")))
  (define r0 (get "GET" "/"))
  (define r1 (get "GET" (link r0 "plus")))
  (check-page r1 #rx"v1 count: 1")
  ;; timeout is 3 s, web-server's timers have 1 s resolution: checked after 5 s, further down
  (set-box! v1-later (list get r1 (+ (current-inexact-milliseconds) 5000.))))

(test-case "'v2 with its manager: forged salt, unknown instance, cleared table: its own expiration page"
  (define get (fcgi-browser (served "v2")))
  (define custom #rx"^v2 expired v2: this session has timed out, please start again$")
  (define r0 (get "GET" "/"))
  (define r1 (get "GET" (link r0 "plus")))
  (check-page r1 #rx"v2 count: 1")
  (define k (read (open-input-string (continuation-param (link r1 "plus")))))
  (define (k-url instance k-id salt)
    (string-append "/;" (uri-path-segment-encode* (format "~s" `(("k" . ,(format "~s" (list instance k-id salt))))))))
  ;; the same URL, rebuilt from its parts, works: the forgeries below differ by one thing
  (check-page (get "GET" (k-url (car k) (cadr k) (caddr k))) #rx"v2 count: 2")
  (for ([forged (list (k-url (car k) (cadr k) (add1 (caddr k)))          ; salt off by one
                      (k-url (car k) (cadr k) (modulo (caddr k) 100000000)) ; the inner salt alone
                      (k-url (car k) (+ 1000 (cadr k)) (caddr k))         ; unknown continuation
                      (k-url (+ (car k) (arithmetic-shift 1000 32)) (cadr k) (caddr k)) ; unknown instance
                      (k-url (add1 (car k)) (cadr k) (caddr k)))]         ; another worker's instance
        [what '("salt + 1" "inner salt" "continuation" "instance" "worker")])
    (with-check-info (['forgery what]) (check-page (get "GET" forged) custom)))
  (define r2 (get "GET" (link r1 "forget")))
  (check-page r2 #rx"v2 count: 1")
  (check-page (get "GET" (link r1 "plus")) custom)
  (check-page (get "GET" (link r2 "plus")) #rx"v2 count: 2"))

(test-case "'stateless with default-stuffer: signed URLs, resumable any number of times; pages as under serve/servlet"
  (define (scenario get)
    (define r0 (get "GET" "/"))
    (define r1 (get "POST" (form-action r0) '(("n" . "3"))))
    (list r0 r1 (get "POST" (form-action r1) '(("n" . "4"))) (get "POST" (form-action r1) '(("n" . "5")))))
  (define ours (scenario (fcgi-browser (served "sd"))))
  (define theirs
    (call-with-serve/servlet (dynamic-require (app-path "stateless-default.rkt") 'start) #:stateless? #t
                             #:stuffer (dynamic-require 'web-server/stuffers 'default-stuffer)
                             (λ (port) (scenario (http-browser port)))))
  (check-equal? (map normalize ours) (map normalize theirs))
  (check-page (list-ref ours 2) #rx"3 \\+ 4 = 7")
  (check-page (list-ref ours 3) #rx"3 \\+ 5 = 8")
  (define c (stateless-c (form-action (list-ref ours 1))))
  (define c-web (stateless-c (form-action (list-ref theirs 1))))
  (check-regexp-match #px"^(.+)[.][0-9a-f]{32}$" c)
  (check-equal? (cadr (regexp-match #px"^(.+)[.][0-9a-f]{32}$" c)) c-web
                "the stuffer's own output, then the signature"))

(test-case "'stateless with md5-stuffer: the URL names a file of the store folder"
  (define get (fcgi-browser (served "md5")))
  (define r0 (get "GET" "/"))
  (define c (stateless-c (form-action r0)))
  (define m (regexp-match #px"^([0-9a-f]{32})[.][0-9a-f]{32}$" c))
  (check-true (and m #t) c)
  (check-true (and m (file-exists? (build-path md5-dir (cadr m)))) "the continuation is in the store")
  (define r1 (get "POST" (form-action r0) '(("w" . "alpha"))))
  (check-page (get "POST" (form-action r1) '(("w" . "beta"))) #rx"md5: alpha beta")
  ;; the signature holds but the stored continuation is gone (another host's store, or a
  ;; cleaned one): the page has expired, never a 500
  (delete-file (build-path md5-dir (cadr m)))
  (check-page (get "POST" (form-action r0) '(("w" . "gamma"))) expired-rx))

(test-case "'stateless with hash-stuffer (SHA-256 and dir-store)"
  (define get (fcgi-browser (served "hash")))
  (define r0 (get "GET" "/"))
  (define m (regexp-match #px"^([0-9a-f]{64})[.][0-9a-f]{32}$" (stateless-c (link r0 "next"))))
  (check-true (and m (file-exists? (build-path hash-dir (cadr m)))) "the continuation is in the store")
  (check-page (get "GET" (link r0 "next")) #rx"hash stuffer resumed"))

(test-case "'stateless with HMAC-SHA1-stuffer and base64: resumes with the captured value"
  (define get (fcgi-browser (served "sh1")))
  (define r0 (get "GET" "/"))
  (check-regexp-match #px"^[A-Za-z0-9+/=]+[.][0-9a-f]{32}$" (stateless-c (link r0 "next")))
  (check-page (get "GET" (link r0 "next")) #rx"hmac kept: green"))

(test-case "#lang web-server with only start: send/suspend/hidden (kont field), then send/suspend/url"
  (define (scenario get)
    (define r0 (get "GET" "/"))
    (define r1 (get "POST" (form-action r0) (append (filter (λ (p) (equal? (car p) "kont")) (form-inputs r0))
                                                    '(("word" . "cat")))))
    (list r0 r1 (get "GET" (link r1 "next"))))
  (define ours (scenario (fcgi-browser (served "lang"))))
  (define theirs
    (call-with-serve/servlet (dynamic-require (app-path "lang.rkt") 'start) #:stateless? #t
                             (λ (port) (scenario (http-browser port)))))
  (check-equal? (map normalize ours) (map normalize theirs))
  (check-regexp-match #px"^#\"" (cdr (assoc "kont" (form-inputs (car ours)))) "kont is a written byte string")
  (check-page (list-ref ours 1) #rx"word: cat")
  (check-page (list-ref ours 2) #rx"still: cat"))

(test-case "'v1 with timeout: after `timeout` seconds, the expiration page; a new session works"
  (define later (unbox v1-later))
  (when later
    (define get (car later))
    (sleep (max 0 (/ (- (caddr later) (current-inexact-milliseconds)) 1000.)))
    (check-page (get "GET" (link (cadr later) "plus")) expired-rx)
    (check-page (get "GET" "/") #rx"v1 count: 0")))

(test-case "exit in a servlet: that request gets 500; the process serves the next one"
  (define s (hash-ref servers "exit"))
  (define get (fcgi-browser (served "exit")))
  (check-equal? (resp-status (get "GET" "/exit")) 500)
  (check-page (get "GET" "/") #rx"still serving")
  (define r (get "GET" "/suspend-exit"))
  (check-equal? (resp-status (get "GET" (link r "exit"))) 500 "exit from a resumed continuation")
  (check-page (get "GET" "/") #rx"still serving")
  ;; --continuation-timeout 2 (24 life points, one lost every 2/24 s): gone after 2.08 s
  (define r2 (get "GET" "/suspend-exit"))
  (sleep 3.5)
  (check-page (get "GET" (link r2 "exit")) expired-rx)
  (check-eq? (subprocess-status (proc-subprocess (server-proc s))) 'running)
  (check-regexp-match #rx"GET /exit: handler called exit: request ended" (server-log s)))

(test-case "default manager, #:continuation-timeout 2: a continuation expires about 2 s after its last use"
  ;; 24 life points, one lost every 2/24 s: gone 25 such steps (2.08 s) after its last use
  (call-with-fastcgi
   "dispatch.rkt" #:continuation-timeout 2
   (λ (address)
     (define get (fcgi-browser address))
     (define r0 (get "GET" "/"))
     (define r1 (get "GET" (link r0 "plus")))
     (check-page r1 #rx"count: 1")
     (sleep 1)
     (check-page (get "GET" (link r1 "plus")) #rx"count: 2")          ; alive 1 s after
     (sleep 3.5)
     (check-page (get "GET" (link r1 "plus")) expired-rx)
     (check-page (get "GET" (link r0 "minus")) expired-rx))))

(test-case "#lang web-server/insta: refused at load with one line naming the change; no HTTP port opened"
  (define insta-port 8000)                          ; serve/servlet's default
  (define (port-open?)
    (with-handlers ([exn:fail:network? (λ (e) #f)])
      (define-values (in out) (tcp-connect "127.0.0.1" insta-port))
      (close-input-port in) (close-output-port out) #t))
  (define busy-before? (port-open?))
  (define opened? #f)
  (define watcher (thread (λ () (let loop () (when (port-open?) (set! opened? #t)) (sleep 0.05) (loop)))))
  (define t0 (current-inexact-milliseconds))
  (define-values (code out err)
    (run-program raco-path (list "fastcgi" "serve" (path->string (app-path "insta.rkt")) "--single-process"
                                 "--listen" (string-append "unix:" (path->string (build-path dir "insta.sock"))))
                 #:timeout 60))
  (kill-thread watcher)
  (define lines (filter (λ (l) (not (string=? (string-trim l) ""))) (string-split (bytes->string/utf-8 err) "\n")))
  (check-not-equal? code 0)
  (check-equal? (length lines) 1 (format "one line on stderr: ~s" lines))
  (check-regexp-match #rx"#lang web-server/insta.*#lang racket.*\\(require web-server/servlet\\) \\(provide start\\)"
                      (if (pair? lines) (car lines) ""))
  (check-equal? out #"")
  (unless busy-before?
    (check-false opened? "nothing listened on port 8000 while it ran"))
  (check-false (file-exists? (build-path dir "insta.sock")) "no socket left behind")
  (check-true (< (- (current-inexact-milliseconds) t0) 30000.) "refused within 30 s"))

;; ---------------------------------------------------------------------------------------
(for ([s (in-hash-values servers)])
  (stop-server! s))
(plumber-flush-handle-remove! at-exit)
(delete-directory/files dir)
