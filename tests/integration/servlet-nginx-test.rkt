#lang racket/base
;; Servlets with continuations under `raco fastcgi serve`, through a real nginx, driven by
;; a scripted browser (browser.rkt): the web-server tutorial's blogs, run as the tutorial
;; says to run them outside DrRacket.
;;   - iteration-11.rkt (SQLite, formlets, send/suspend/dispatch, embed/url), its first
;;     line `#lang web-server/insta` replaced by the documented three lines, under
;;     --workers 4; nginx with kept FastCGI connections (upstream keepalive +
;;     fastcgi_keep_conn on) and without. Many sessions at once; every continuation URL
;;     answers its page; requests reach several workers, and a worker's continuation URL
;;     is answered when the connection lands on another worker (the relay).
;;   - iteration-9s.rkt (#lang web-server, stateless; `(provide start)` appended, and two
;;     fixes without which its forms are a 500 under serve/servlet too: see prepare-blogs!):
;;     the same, and a tampered URL is a 400.
;;   - both compared with web-server's own serve/servlet running the same file: the same
;;     session gives the same pages (URLs aside).
;;   - a reload (SIGHUP) mid-session: the old worker drains (the status says so, with its
;;     live sessions) and still answers its URLs; recycling (--max-requests) the same; once
;;     --session-drain has passed, the old URL gets the expiration page; a worker
;;     SIGKILLed: its URLs get the expiration page, at once and after, never a 5xx.
;; The status is polled in the file the manager writes next to its pid file (the status
;; page's source; reading it sends no request, which would wake or count on a worker) and
;; then checked once on the status page through nginx. Which worker took a request (on
;; its own connection, before any relay) is read in the access log.
;; The tutorial's files are copied into a temporary folder (never into the repository);
;; each server runs with a folder of its own as its current directory, where the blogs
;; keep their data, and as HOME, where web-server's stuffer keeps large stateless URLs.
(module+ test
  (require compiler/find-exe
           ffi/unsafe
           json
           racket/file
           racket/list
           racket/path
           racket/string
           rackunit
           "browser.rkt"
           (only-in "deploy-lib.rkt" raco wait-for-app file-text)
           "lib.rkt")

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))
  (define racket-exe (find-exe))
  (define t0 (current-inexact-milliseconds))

  ;; ---------------------------------------------------------------------------------
  ;; The tutorial's blogs, prepared as the tutorial says.

  (define examples-dir
    (path-only (collection-file-path "iteration-11.rkt" "web-server" "scribblings" "tutorial" "examples")))

  ;; prepare-blogs! : path -> (values path path) ; the continuation blog, the stateless one
  (define (prepare-blogs! dir)
    (for ([f (in-list '("model-2.rkt" "model-3.rkt"))])
      (copy-file (build-path examples-dir f) (build-path dir f)))
    (define lines (file->lines (build-path examples-dir "iteration-11.rkt")))
    (unless (equal? (car lines) "#lang web-server/insta")
      (error 'servlet-nginx-test "iteration-11.rkt no longer starts with #lang web-server/insta: ~s"
             (car lines)))
    (define blog (build-path dir "blog.rkt"))
    (display-lines-to-file (list* "#lang racket" "(require web-server/servlet)"
                                  "(provide/contract (start (request? . -> . response?)))"
                                  (cdr lines))
                           blog)
    (define stateless (build-path dir "stateless-blog.rkt"))
    ;; As published, every form of iteration-9s.rkt is a 500 on web-server 8.7, under
    ;; serve/servlet too: it gives bytes->string/utf-8 the binding that bindings-assq
    ;; returns, not its value; and its handlers' (redirect/get) raises "Attempt to capture a
    ;; continuation from within an unsafe context". The copy takes the value and answers at
    ;; once instead of redirecting (the request itself for (redirect/get)), so that the
    ;; forms work; the rest is the tutorial's.
    (define source (file->string (build-path examples-dir "iteration-9s.rkt")))
    (define (fix text from to count)
      (unless (= count (length (regexp-match* from text)))
        (error 'servlet-nginx-test "iteration-9s.rkt changed: expected ~a matches of ~s" count from))
      (regexp-replace* from text to))
    (define fixed
      (fix (fix source #px"\\(bindings-assq (#\"[a-z]+\") bindings\\)"
                "(binding:form-value (bindings-assq \\1 bindings))" 3)
           #px"\\(redirect/get\\)" "request" 2))
    (call-with-output-file stateless
      (λ (out)
        (write-string fixed out)
        (write-string "\n(provide start)\n" out)))
    (define-values (code out err)
      (run-program raco (list "make" "-j" "2" (path->string blog) (path->string stateless)) #:timeout 120))
    (unless (zero? code) (error 'servlet-nginx-test "raco make of the blogs failed:\n~a~a" out err))
    (values blog stateless))

  ;; ---------------------------------------------------------------------------------
  ;; Processes: the server, serve/servlet, nginx.

  ;; start-in : path string path (listof string) -> proc
  ;; A program started with folder as its current directory and HOME (web-server's stuffer
  ;; writes large stateless URLs under ~/.urls); stderr in folder.
  (define (start-in folder name program args)
    (make-directory* folder)
    (define env (environment-variables-copy (current-environment-variables)))
    (environment-variables-set! env #"HOME" (path->bytes folder))
    ;; the packages (this one is linked in user scope) stay where they were
    (environment-variables-set! env #"PLTADDONDIR" (path->bytes (find-system-path 'addon-dir)))
    (parameterize ([current-directory folder]
                   [current-environment-variables env])
      (start-process name program args #:dir folder)))

  ;; A `raco fastcgi serve` run: its process, socket address, pid file and folder (its
  ;; current directory, where its access log is).
  (struct server (proc address pid-file folder))

  ;; call-with-server : path string path (listof string) natural (server -> any) -> any
  ;; Serves app on a unix socket with the status page and a pid file, until every one of
  ;; the workers is ready; stopped afterwards.
  (define (call-with-server dir name app args workers body)
    (define folder (build-path dir name))
    (define sock (path->string (build-path dir (string-append name ".sock"))))
    (define pid-file (path->string (build-path folder "server.pid")))
    (make-directory* folder)
    (define p (start-in folder "server" raco
                        (list* "fastcgi" "serve" (path->string app) "--listen" (string-append "unix:" sock)
                               "--workers" (number->string workers) "--status-path" "/status"
                               "--pid-file" pid-file
                               "--access-log" (path->string (build-path folder "access.log")) args)))
    (define s (server p (string-append "unix:" sock) pid-file folder))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app (server-address s) p 60)
       (wait-until 60 (format "~a workers of ~a to be ready" workers name)
                   (λ () (let ([b (read-board s)])
                           (and b (= workers (count (λ (w) (member (hash-ref w 'state #f) '("idle" "busy")))
                                                    (hash-ref b 'workers '())))))))
       (parameterize ([current-server-proc p]) (body s)))
     (λ ()
       (stop-process! p #:timeout 10)
       (printf "servlet-nginx-test: ~a done at ~a s\n" name (elapsed)))))

  ;; elapsed : -> natural ; seconds since the module started
  (define (elapsed) (inexact->exact (round (/ (- (current-inexact-milliseconds) t0) 1000))))

  ;; read-board : server -> (or/c hash #f) ; the status the manager writes next to its pid
  ;; file: what the status page shows, read without sending a request to any worker
  (define (read-board s)
    (with-handlers ([exn:fail? (λ (e) #f)])
      (call-with-input-file (string-append (server-pid-file s) ".status.json") read-json)))

  ;; manager-pid : server -> natural
  (define (manager-pid s) (string->number (string-trim (file->string (server-pid-file s)))))

  ;; worker-number : natural -> (or/c natural #f) ; the id the manager gave a worker process
  (define (worker-number pid)
    (define cmdline (with-handlers ([exn:fail? (λ (e) #f)])
                      (file->bytes (format "/proc/~a/cmdline" pid))))
    (define m (and cmdline (regexp-match #rx#"\\(worker-id \\. ([0-9]+)\\)" cmdline)))
    (and m (string->number (bytes->string/latin-1 (cadr m)))))

  ;; owner-pid : server string -> (or/c natural #f) ; the worker holding href's continuation
  (define (owner-pid s href)
    (define n (continuation-owner href))
    (for/first ([w (in-list (hash-ref (read-board s) 'workers '()))]
                #:when (eqv? n (worker-number (hash-ref w 'pid))))
      (hash-ref w 'pid)))

  (define c-kill (get-ffi-obj "kill" #f (_fun _int _int -> _int)))
  (define SIGHUP 1)
  (define SIGKILL 9)

  ;; call-with-serve/servlet : path string path boolean (port-number -> any) -> any
  ;; The same file under web-server's serve/servlet, in a process of its own. Its servlets
  ;; would run in web-server's own htdocs folder (and the blogs write their data there): in
  ;; the process's folder instead.
  (define (call-with-serve/servlet dir name app stateless? body)
    (define port (car (free-ports 1)))
    (define expr
      (format (string-append "(serve/servlet (dynamic-require (string->path ~s) 'start) #:port ~a"
                             " #:servlet-regexp #rx\"\" #:launch-browser? #f #:command-line? #t"
                             " #:stateless? ~a #:servlet-current-directory (current-directory))")
              (path->string app) port (if stateless? "#t" "#f")))
    (define p (start-in (build-path dir name) "serve-servlet" racket-exe
                        (list "-l" "racket/base" "-l" "web-server/servlet-env" "-e" expr)))
    (dynamic-wind
     void
     (λ ()
       (with-handlers ([exn:fail? (λ (e) (error 'serve/servlet "~a\n~a" (exn-message e)
                                                (file-text (proc-stderr-file p))))])
         (wait-for-tcp port 60))
       (body port))
     (λ () (stop-process! p))))

  ;; The params nginx sends (as nginx-test.rkt: written out, not the distribution's file).
  (define fastcgi-params
    '(("REQUEST_METHOD" . "$request_method") ("REQUEST_URI" . "$request_uri")
      ("QUERY_STRING" . "$query_string") ("CONTENT_TYPE" . "$content_type")
      ("CONTENT_LENGTH" . "$content_length") ("SCRIPT_NAME" . "$fastcgi_script_name")
      ("SERVER_PROTOCOL" . "$server_protocol") ("SERVER_NAME" . "$server_name")
      ("SERVER_PORT" . "$server_port") ("SERVER_ADDR" . "$server_addr")
      ("REMOTE_ADDR" . "$remote_addr") ("REMOTE_PORT" . "$remote_port")
      ("GATEWAY_INTERFACE" . "CGI/1.1")))

  ;; Ports of one nginx in front of a server: kept FastCGI connections, and not kept.
  (struct fronts (keep close nginx))

  ;; call-with-nginx : path string server (fronts -> any) -> any
  (define (call-with-nginx dir name s body)
    (define ndir (build-path dir (string-append name "-nginx")))
    (make-directory* ndir)
    (define (in-dir f) (path->string (build-path ndir f)))
    (define ports (free-ports 2))
    (define (server-block port pass keep?)
      (string-append
       (format "  server {\n    listen 127.0.0.1:~a;\n    location / {\n" port)
       (string-append* (for/list ([p (in-list fastcgi-params)])
                         (format "      fastcgi_param ~a ~a;\n" (car p) (cdr p))))
       (format "      fastcgi_pass ~a;\n" pass)
       (if keep? "      fastcgi_keep_conn on;\n" "")
       "      fastcgi_read_timeout 30s;\n    }\n  }\n"))
    (define conf (build-path ndir "nginx.conf"))
    (call-with-output-file conf
      (λ (out)
        (write-string
         (string-append
          "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n"
          (format "pid ~a;\nerror_log stderr warn;\n" (in-dir "nginx.pid"))
          "events { worker_connections 512; }\nhttp {\n  access_log off;\n"
          (string-append* (for/list ([t (in-list '("client_body" "fastcgi" "proxy" "uwsgi" "scgi"))])
                            (format "  ~a_temp_path ~a;\n" t (in-dir (string-append t "_temp")))))
          (format "  upstream blog { server ~a; keepalive 16; }\n" (server-address s))
          (server-block (car ports) "blog" #t)
          (server-block (cadr ports) (server-address s) #f)
          "}\n")
         out)))
    (define args (list "-c" (path->string conf) "-p" (path->string ndir) "-e" "stderr"))
    (define-values (code _out err) (run-program nginx (list* "-t" "-q" args)))
    (unless (zero? code) (error 'servlet-nginx-test "nginx rejects the configuration:\n~a" err))
    (call-with-process "nginx" nginx args #:dir ndir
                       (λ (ng)
                         (for ([p (in-list ports)]) (wait-for-tcp p 10))
                         (body (fronts (car ports) (cadr ports) ng)))))

  ;; check-clean-logs : server fronts -> void ; no error from the server or nginx
  (define (check-clean-logs s f)
    (define server-log (file-text (proc-stderr-file (server-proc s))))
    (check-false (regexp-match? #rx" (error|fatal) \\[" server-log) server-log)
    (define nginx-log (file-text (proc-stderr-file (fronts-nginx f))))
    (check-false (regexp-match? #rx"\\[(error|crit|alert|emerg)\\]" nginx-log) nginx-log))

  ;; ---------------------------------------------------------------------------------
  ;; The scripted browser session.

  ;; The server whose log a failed step shows: a proc, or #f.
  (define current-server-proc (make-parameter #f))

  ;; expect : string any page -> void ; a failed session step, with what came back and the
  ;; end of the server's log
  (define (expect what ok? p)
    (unless ok?
      (error 'session "~a: ~a answered ~a (Location ~a): ~a~a" what (page-path p) (page-status p)
             (page-location p)
             (let ([b (bytes->string/utf-8 (page-body p) #\?)]) (substring b 0 (min 400 (string-length b))))
             (let ([sp (current-server-proc)])
               (if sp
                   (let ([lines (string-split (file-text (proc-stderr-file sp)) "\n")])
                     (string-append "\n--- the server's log, last lines ---\n"
                                    (string-join (take-right lines (min 12 (length lines))) "\n")))
                   "")))))

  ;; expect-page : string page natural string -> void
  (define (expect-page what p status title)
    (expect what (and (= (page-status p) status) (equal? (page-title p) title)) p))

  ;; expect-detail : string page string string (listof string) -> void ; a post's page
  (define (expect-detail what p title body comments)
    (expect-page what p 200 "Post Details")
    (define h2 (page-elements p 'h2))
    (define ps (page-elements p 'p))
    (expect (format "~a: title ~s, body ~s, comments ~s" what title body comments)
            (and (pair? h2) (equal? (element-text (car h2)) title)
                 (pair? ps) (equal? (element-text (car ps)) body)
                 (equal? (map element-text (page-elements p 'li)) comments))
            p))

  ;; expect-expired : string page -> void ; serve/servlet's expiration page
  (define (expect-expired what p)
    (expect-page what p 200 "Page Has Expired.")
    (expect what (equal? (page-text p) "Sorry, this page has expired. Please go back.") p))

  ;; expect-303 : string page -> string ; the path of a 303's Location
  (define (expect-303 what p)
    (expect what (and (= (page-status p) 303) (page-location p)) p)
    (location-path (page-location p)))

  ;; post-summary : page string -> (or/c string #f) ; the text of the post's entry
  (define (post-summary p title)
    (for/first ([d (in-list (page-elements p 'div))]
                #:when (let ([as (filter (λ (x) (and (pair? x) (eq? (car x) 'a))) (cdr d))])
                         (and (pair? as) (equal? (element-text (car as)) title))))
      (element-text d)))

  ;; blog-session : port-number string #:live? boolean -> (listof any)
  ;; A person's visit: the front page; the first post; a new post (and the blog with it);
  ;; the post's page; a comment, confirmed (and the post with it); back to the blog; then
  ;; two older URLs again. live?: the continuation blog, which answers a new post and a confirmed comment
  ;; with a 303 (redirect/get) and reads its data at each page (SQLite), so an old URL shows
  ;; the comment; else the stateless blog, which answers them at once and carries its data
  ;; in its URLs, so an old URL shows the post as it was. Raises on the first wrong answer;
  ;; returns the normalized pages.
  (define (blog-session port tag #:live? live?)
    (define pages '())
    (define front (open-blog port (λ (p) (set! pages (cons (normalize-page p) pages)))))
    (append (reverse pages) (continue-session port front tag #:live? live?)))

  ;; open-blog : port-number [(page -> any)] -> page ; GET /, the front page of a session
  (define (open-blog port [keep! void])
    (define front (browse port "/"))
    (keep! front)
    (expect-page "GET /" front 200 "My Blog")
    front)

  ;; continue-session : port-number page string #:live? boolean -> (listof any)
  ;; blog-session from its front page on.
  (define (continue-session port front tag #:live? live? #:write-lock [lock #f])
    ;; writing : (-> any) -> any ; a request that makes the blog write its data
    (define (writing thunk) (if lock (call-with-semaphore lock thunk) (thunk)))
    (define pages '())
    (define (keep! p) (set! pages (cons (normalize-page p) pages)) p)
    ;; after : string page -> page ; the page a POST or a link led to (through a 303)
    (define (after what p)
      (cond
        [live? (keep! (browse port (expect-303 what p)))]
        [else p]))
    (define title (format "Post ~a" tag))
    (define body (format "Body of ~a: Jörg & <Co>" tag))
    (define comment (format "Comment on ~a, été" tag))
    (define first-post (keep! (browse port (or (find-link front "First Post") "/no-first-post-link"))))
    (expect-detail "the first post" first-post "First Post" "This is my first post" '("First comment!"))
    (define new-post (page-forms front))
    (expect "the front page has one form of two fields"
            (and (= 1 (length new-post)) (= 2 (length (form-fields (car new-post))))) front)
    (define blog
      (after "new post" (keep! (writing (λ () (submit port (car new-post) (list title body)))))))
    (expect-page "the blog after the new post" blog 200 "My Blog")
    (expect "the blog shows the new post"
            (equal? (post-summary blog title) (format "~a ~a 0 comment(s)" title body)) blog)
    (define post-href (find-link blog title))
    (define detail (keep! (browse port post-href)))
    (expect-detail "the new post" detail title body '())
    (define comment-form (page-forms detail))
    (expect "the post's page has one form of one field"
            (and (= 1 (length comment-form)) (= 1 (length (form-fields (car comment-form))))) detail)
    (define confirm (keep! (submit port (car comment-form) (list comment))))
    (expect-page "the comment" confirm 200 "Add a Comment")
    (expect "the confirmation names the comment and the post"
            (equal? (page-text confirm)
                    (format (string-append "Add a Comment The comment: ~a will be added to ~a"
                                           " Yes, add the comment. No, I changed my mind!")
                            comment title))
            confirm)
    (define yes-href (or (find-link confirm "Yes, add the comment.") "/no-yes-link"))
    (define detail2 (after "yes, add the comment" (keep! (writing (λ () (browse port yes-href))))))
    (expect-detail "the post after the comment" detail2 title body (list comment))
    (define back (keep! (browse port (or (find-link detail2 "Back to the blog") "/no-back-link"))))
    (expect-page "back to the blog" back 200 "My Blog")
    (expect "the blog shows the post with its comment"
            (equal? (post-summary back title) (format "~a ~a 1 comment(s)" title body)) back)
    (define again (keep! (browse port post-href)))
    (expect-detail "the post's first URL again" again title body (if live? (list comment) '()))
    (define no (keep! (browse port (or (find-link confirm "No, I changed my mind!") "/no-no-link"))))
    (expect-detail "No, I changed my mind" no title body (if live? (list comment) '()))
    (reverse pages))

  ;; run-sessions : port-number string natural natural #:live? boolean #:rounds? boolean
  ;;                -> (values (listof string) (listof string))
  ;; threads x sessions visits at once; the titles of the posts made and the failures.
  ;; rounds?: the threads open their front pages together, then all go on together, a
  ;; session each per round, and one thread at a time sends a request that writes. The
  ;; stateless blog needs it: it reads its file on GET / and rewrites it on a post or a
  ;; comment (deleting it, then creating it anew), so a GET / meanwhile can read an empty
  ;; file, and two writes at once can collide ("open-output-file: file exists"); it raises
  ;; on both (its races, under serve/servlet too).
  (define (run-sessions port prefix threads sessions #:live? live? #:rounds? rounds?)
    (define lock (make-semaphore 1))
    (define titles '())
    (define failures '())
    (define (fail! msg) (call-with-semaphore lock (λ () (set! failures (cons msg failures)))))
    (define (succeed! title) (call-with-semaphore lock (λ () (set! titles (cons title titles)))))
    (define (tag t i) (format "~a-~a-~a" prefix t i))
    ;; all : (natural -> any) -> void ; one thread per client, all waited for (bounded)
    (define (all proc)
      (define ts (for/list ([t (in-range threads)]) (thread (λ () (proc t)))))
      (for ([t (in-list ts)])
        (unless (sync/timeout 90 t)
          (kill-thread t)
          (fail! "a session thread did not finish within 90 s"))))
    ;; guarded : string (-> any) -> any ; a failure is noted, not raised
    (define (guarded tag thunk)
      (with-handlers ([exn:fail? (λ (e) (fail! (format "session ~a: ~a" tag (exn-message e))) #f)])
        (thunk)))
    (define write-lock (make-semaphore 1))
    (cond
      [rounds?
       (for ([i (in-range sessions)])
         (define fronts (make-vector threads #f))
         (all (λ (t) (vector-set! fronts t (guarded (tag t i) (λ () (open-blog port))))))
         (all (λ (t)
                (define front (vector-ref fronts t))
                (when front
                  (guarded (tag t i) (λ ()
                                       (continue-session port front (tag t i)
                                                         #:live? live? #:write-lock write-lock)
                                       (succeed! (format "Post ~a" (tag t i)))))))))]
      [else
       (all (λ (t)
              (for ([i (in-range sessions)])
                (guarded (tag t i) (λ ()
                                     (blog-session port (tag t i) #:live? live?)
                                     (succeed! (format "Post ~a" (tag t i))))))))])
    (values titles failures))

  ;; check-sessions : port-number string #:live? boolean -> (listof string)
  (define (check-sessions port prefix #:live? live? #:threads [threads 8] #:sessions [sessions 3])
    (define-values (titles failures)
      (run-sessions port prefix threads sessions #:live? live? #:rounds? (not live?)))
    (check-equal? (length failures) 0
                  (format "~a of ~a sessions failed; the first:\n~a" (length failures) (* threads sessions)
                          (string-join (take failures (min 3 (length failures))) "\n")))
    (check-equal? (length titles) (* threads sessions))
    titles)

  ;; check-front-page : port-number (listof string) -> void ; every post is on the front page
  (define (check-front-page port titles)
    (define front (browse port "/"))
    (check-equal? (page-status front) 200)
    (define shown (map car (page-links front)))
    (define missing (filter (λ (t) (not (member t shown))) titles))
    (check-equal? missing '() "posts missing from the front page"))

  ;; check-several-workers : port-number natural -> void
  ;; The status page: all the workers of the pool, and more than one of them took requests.
  (define (check-several-workers port workers)
    (define st (bytes->jsexpr (http-response-body (http-request port "/status?json"))))
    (define ws (hash-ref st 'workers))
    (check-equal? (length ws) workers)
    (define busy (filter (λ (w) (positive? (hash-ref w 'requests 0))) ws))
    (check-true (> (length busy) 1)
                (format "requests per worker: ~a" (map (λ (w) (hash-ref w 'requests)) ws))))

  ;; followers : server string -> (listof natural)
  ;; The pid of the worker that took each GET of uri, in the order of the access log (each
  ;; worker writes there the requests that came on its own connections, relayed or not).
  (define (followers s uri)
    (define log (build-path (server-folder s) "access.log"))
    (for*/list ([line (in-list (if (file-exists? log) (file->lines log) '()))]
                [m (in-value (regexp-match #px"\"GET (\\S+)\" [0-9]+ \\S+ \\S+ ([0-9]+)$" line))]
                #:when (and m (equal? (cadr m) uri)))
      (string->number (caddr m))))

  ;; check-answered-elsewhere : server port-number string (page -> void) [boolean] -> void
  ;; href followed from fresh FastCGI connections (port: nginx without kept connections),
  ;; each answered right, and the access log says which workers took them: some other than
  ;; the continuation's owner (relay?: a stateful URL, which only its owner can resume), or
  ;; more than one (a stateless URL, which any worker resumes). The kernel often hands
  ;; connections that come one after the other to the same worker: 20 follows, then more,
  ;; 10 at a time, up to 100, until the connections have spread.
  (define (check-answered-elsewhere s port href expect-right [relay? #t])
    (define owner (and relay? (owner-pid s href)))
    (when relay? (check-true (and owner #t) (format "no live worker owns ~a" href)))
    (sleep 0.5)                         ; workers write their access log every 0.2 s
    (define skip (length (followers s href)))
    ;; taken : natural -> (listof natural) ; the workers that took the follows, once n are logged
    (define (taken n)
      (wait-until 5 (format "the access log to have ~a requests" n)
                  (λ () (let ([ps (drop (followers s href) skip)]) (and (>= (length ps) n) ps)))))
    (define (elsewhere ps) (filter (λ (pid) (not (eqv? pid owner))) ps))
    (define (spread? ps)
      (if relay? (pair? (elsewhere ps)) (> (length (remove-duplicates ps)) 1)))
    (define pids
      (let loop ([n 10])
        (for ([i (in-range 10)]) (expect-right (browse port href)))
        (define ps (taken n))
        (if (or (and (>= n 20) (spread? ps)) (>= n 100)) ps (loop (+ n 10)))))
    (printf "servlet-nginx-test: ~a follows of one URL, workers that took them: ~a~a\n"
            (length pids)
            (for/list ([pid (in-list (remove-duplicates pids))]) (cons pid (count (λ (p) (eqv? p pid)) pids)))
            (if owner (format " (owner ~a)" owner) ""))
    (if relay?
        (check-true (pair? (elsewhere pids)) (format "every connection landed on the owner ~a: ~a" owner pids))
        (check-true (spread? pids) (format "every connection landed on one worker: ~a" pids))))

  ;; first-post-href : port-number -> string ; a new session's link to "First Post"
  (define (first-post-href port)
    (define front (browse port "/"))
    (expect-page "GET /" front 200 "My Blog")
    (define href (find-link front "First Post"))
    (expect "a link to First Post" href front)
    href)

  ;; expect-first-post : string -> page -> void ; the untouched first post of a fresh blog
  (define ((expect-first-post what) p)
    (expect-detail what p "First Post" "This is my first post" '("First comment!")))

  ;; status : fronts -> hash ; the status page, through nginx
  (define (status f)
    (bytes->jsexpr (http-response-body (http-request (fronts-close f) "/status?json"))))

  ;; ---------------------------------------------------------------------------------
  ;; The runs.

  (define (run dir)
    (define-values (blog stateless) (prepare-blogs! dir))
    (define blog-pages #f)
    (define stateless-pages #f)

    ;; 1. The continuation blog, four workers.
    (call-with-server
     dir "blog" blog '() 4
     (λ (s)
       (call-with-nginx
        dir "blog" s
        (λ (f)
          (test-case "continuation blog: one session, as under serve/servlet (compared below)"
            (set! blog-pages (blog-session (fronts-keep f) "compared" #:live? #t)))
          (define titles '())
          (for ([port (list (fronts-keep f) (fronts-close f))]
                [name '("kept" "closed")])
            (test-case (format "continuation blog: 8 x 3 sessions at once, FastCGI connections ~a" name)
              (set! titles (append titles (check-sessions port name #:live? #t)))))
          (test-case "continuation blog: every post is on the front page"
            (check-front-page (fronts-close f) (cons "Post compared" titles)))
          (test-case "continuation blog: the requests reached several workers"
            (check-several-workers (fronts-keep f) 4))
          (test-case "continuation blog: a worker's URL answered from fresh connections to others"
            (define href (first-post-href (fronts-close f)))
            (check-answered-elsewhere s (fronts-close f) href (expect-first-post "relayed")))
          (test-case "continuation blog: no errors logged"
            (check-clean-logs s f))))))

    ;; 2. The stateless blog, four workers.
    (call-with-server
     dir "stateless" stateless '() 4
     (λ (s)
       (call-with-nginx
        dir "stateless" s
        (λ (f)
          (test-case "stateless blog: one session, as under serve/servlet (compared below)"
            (set! stateless-pages (blog-session (fronts-keep f) "compared" #:live? #f)))
          (test-case "stateless blog: a tampered URL is a 400"
            (check-tampered f))
          (for ([port (list (fronts-keep f) (fronts-close f))]
                [name '("kept" "closed")])
            (test-case (format "stateless blog: 8 x 3 sessions at once, FastCGI connections ~a" name)
              (check-sessions port name #:live? #f)))
          (test-case "stateless blog: a session's post is on the front page"
            (blog-session (fronts-close f) "last" #:live? #f)
            (check-front-page (fronts-close f) '("Post last")))
          (test-case "stateless blog: the requests reached several workers"
            (check-several-workers (fronts-keep f) 4))
          (test-case "stateless blog: one URL resumed by several workers"
            (define front (browse (fronts-close f) "/"))
            (define href (find-link front "Post last"))
            (check-true (string? href))
            (check-answered-elsewhere s (fronts-close f) href
                                      (λ (p) (expect-detail "stateless URL" p "Post last"
                                                            "Body of last: Jörg & <Co>"
                                                            '("Comment on last, été")))
                                      #f))
          (test-case "stateless blog: no errors logged"
            (check-clean-logs s f))))))

    ;; The same file under serve/servlet: the same pages.
    (test-case "serve/servlet gives the same pages: continuation blog"
      (call-with-serve/servlet
       dir "ss-blog" blog #f
       (λ (port) (check-equal? (blog-session port "compared" #:live? #t) blog-pages))))
    (test-case "serve/servlet gives the same pages: stateless blog"
      (call-with-serve/servlet
       dir "ss-stateless" stateless #t
       (λ (port) (check-equal? (blog-session port "compared" #:live? #f) stateless-pages))))

    ;; 3. A reload mid-session.
    (call-with-server
     dir "reload" blog '() 2
     (λ (s)
       (call-with-nginx
        dir "reload" s
        (λ (f) (check-reload s f)))))

    ;; 3. Recycling.
    (call-with-server
     dir "recycle" blog '("--max-requests" "5") 2
     (λ (s)
       (call-with-nginx
        dir "recycle" s
        (λ (f) (check-recycle s f)))))

    ;; 4 and 3. A worker killed; the end of the drain.
    (call-with-server
     dir "crash" blog '("--session-drain" "2") 2
     (λ (s)
       (call-with-nginx
        dir "crash" s
        (λ (f)
          (check-crash s f)
          (check-drain-end s f)))))
    (printf "servlet-nginx-test: ~a s\n" (elapsed)))

  ;; flip : string natural -> string ; the character at i changed to another of its kind
  (define (flip s i)
    (define c (string-ref s i))
    (string-append (substring s 0 i)
                   (string (cond [(char=? c #\a) #\b] [(char-alphabetic? c) #\a]
                                 [(char=? c #\0) #\1] [else #\0]))
                   (substring s (add1 i))))

  ;; check-tampered : fronts -> void
  ;; One character of the c parameter changed, in its signature and in what it signs: 400.
  (define (check-tampered f)
    (define front (browse (fronts-keep f) "/"))
    (define href (find-link front "First Post"))
    (define start (regexp-match-positions #rx"^/;\\(\\(%22c%22%20\\.%20%22" href))
    (define sig (regexp-match-positions #px"[0-9a-f]{32}%22\\)\\)$" href))
    (check-true (and start sig #t) (format "not a signed stateless URL: ~a" href))
    ;; a letter or digit halfway through what is signed, not part of a %XX escape
    (define payload-at
      (and start sig
           (for/first ([i (in-range (quotient (+ (cdr (car start)) (car (car sig))) 2) (car (car sig)))]
                       #:when (and (or (char-alphabetic? (string-ref href i)) (char-numeric? (string-ref href i)))
                                   (not (char=? (string-ref href (- i 1)) #\%))
                                   (not (char=? (string-ref href (- i 2)) #\%))))
             i)))
    (check-true (and payload-at #t) (format "nothing to change in ~a" href))
    (when payload-at
      (for ([tampered (list (flip href (car (car sig))) (flip href payload-at))])
        (check-not-equal? tampered href)
        (for ([port (list (fronts-keep f) (fronts-close f))])
          (define p (browse port tampered))
          (check-equal? (page-status p) 400 (format "~a: ~a" tampered (page-body p))))))
    ((expect-first-post "the URL untouched") (browse (fronts-close f) href)))

  ;; wait-for-board : server seconds string (hash -> any) -> any
  ;; Polls the status the manager writes (no request to any worker) until pred answers.
  (define (wait-for-board s secs what pred)
    (wait-until secs what (λ () (let ([b (read-board s)]) (and b (pred b))))))

  ;; draining-owner? : hash natural [#:sessions? boolean] -> boolean
  ;; The status lists the worker numbered owner as draining (sessions?: with live sessions).
  (define (draining-owner? st owner #:sessions? [sessions? #t])
    (for/or ([w (in-list (hash-ref st 'workers '()))])
      (and (equal? (hash-ref w 'state #f) "draining")
           (or (not sessions?) (positive? (hash-ref w 'sessions 0)))
           (eqv? owner (worker-number (hash-ref w 'pid))))))

  ;; wait-for-draining-owner : server natural string (hash -> any) -> void
  ;; Until the status shows the owner draining (and more, by ready?); then, within 5 s
  ;; (workers count their sessions every 2 s), with its live sessions.
  (define (wait-for-draining-owner s owner what [ready? (λ (b) #t)])
    (wait-for-board s 60 what (λ (b) (and (ready? b) (draining-owner? b owner #:sessions? #f))))
    (wait-for-board s 5 (format "the status to count the live sessions of the draining worker ~a" owner)
                    (λ (b) (draining-owner? b owner))))

  ;; session-before : string server fronts -> (or/c (cons string natural) #f)
  ;; A test case: a new session's link to "First Post", answered right; the link and the
  ;; pid of the worker that holds it (#f when the case failed).
  (define (session-before what s f)
    (define result #f)
    (test-case (format "~a: a session's URL answers" what)
      (define href (first-post-href (fronts-close f)))
      ((expect-first-post (format "before the ~a" what)) (browse (fronts-keep f) href))
      (define pid (owner-pid s href))
      (check-true (and pid #t) (format "no live worker owns ~a" href))
      (when pid (set! result (cons href pid))))
    result)

  ;; follow-expecting : fronts string (page -> void) -> void
  ;; href three times through each front, each time on a new connection from the client.
  (define (follow-expecting f href check)
    (for* ([i (in-range 3)] [port (list (fronts-close f) (fronts-keep f))])
      (check (browse port href))))

  ;; check-reload : server fronts -> void
  (define (check-reload s f)
    (define start (session-before "reload" s f))
    (when start
      (define href (car start))
      (define owner (continuation-owner href))
      (c-kill (manager-pid s) SIGHUP)
      (test-case "reload: generation 2, the old worker draining with its session"
        (wait-for-draining-owner s owner "generation 2 and the session's worker draining"
                                 (λ (b) (eqv? 2 (hash-ref b 'generation #f))))
        (define st (status f))
        (check-equal? (hash-ref st 'generation) 2)
        (check-true (draining-owner? st owner) (format "status: ~s" st))
        (check-true (>= (hash-ref st 'draining_workers) 1))
        (check-true (positive? (hash-ref st 'sessions))))
      (test-case "reload: the old session's URL still answers, from new connections"
        (follow-expecting f href (expect-first-post "after the reload")))
      (test-case "reload: a new session works"
        (blog-session (fronts-close f) "after-reload" #:live? #t))
      (test-case "reload: the old worker still drains"
        (check-true (draining-owner? (status f) owner #:sessions? #f)))))

  ;; check-recycle : server fronts -> void ; under --max-requests 5
  (define (check-recycle s f)
    (define start (session-before "recycling" s f))
    (when start
      (define href (car start))
      (define owner (continuation-owner href))
      (test-case "recycling: the session's worker is recycled and drains"
        ;; more requests, one at a time, until the owner has taken its five and is replaced
        (wait-until 60 "the session's worker to drain"
                    (λ ()
                      (define b (read-board s))
                      (or (and b (draining-owner? b owner #:sessions? #f))
                          (begin
                            (when (and b (for/or ([w (in-list (hash-ref b 'workers '()))])
                                           (and (eqv? owner (worker-number (hash-ref w 'pid)))
                                                (< (hash-ref w 'requests 0) 5))))
                              (check-equal? (page-status (browse (fronts-close f) "/")) 200))
                            (sleep 0.1)
                            #f))))
        (wait-for-draining-owner s owner "the session's worker draining")
        (check-true (draining-owner? (status f) owner)))
      (test-case "recycling: the early session still answers"
        (follow-expecting f href (expect-first-post "after recycling")))))

  ;; check-crash : server fronts -> void
  ;; The owner of a session SIGKILLed: its URL gets the expiration page from the other
  ;; worker, at once (the dying process's private socket still takes connections for a
  ;; while, then resets them) and once it is gone; the pool replaces it.
  (define (check-crash s f)
    (define start (session-before "crash" s f))
    (when start
      (define href (car start))
      (define pid (cdr start))
      (test-case "crash: right after SIGKILL, the owner's URL gets the expiration page"
        (c-kill pid SIGKILL)
        (expect-expired "a killed worker's URL, at once" (browse (fronts-close f) href)))
      (test-case "crash: the dead owner's URL gets the expiration page"
        (wait-until 10 "the killed worker to be gone" (λ () (not (directory-exists? (format "/proc/~a" pid)))))
        (follow-expecting f href (λ (p) (expect-expired "a killed worker's URL" p))))
      (test-case "crash: the pool replaces the worker"
        (define (replaced? st)
          (define ws (hash-ref st 'workers))
          (and (= 2 (length ws))
               (not (memv pid (map (λ (w) (hash-ref w 'pid)) ws)))
               (andmap (λ (w) (and (member (hash-ref w 'state) '("idle" "busy")) #t)) ws)))
        (wait-for-board s 60 "a replacement worker" replaced?)
        (define st (status f))
        (check-true (replaced? st) (format "status: ~s" st))
        (check-true (positive? (hash-ref st 'restarts))))
      (test-case "crash: a new session works"
        (blog-session (fronts-close f) "after-crash" #:live? #t))))

  ;; check-drain-end : server fronts -> void ; under --session-drain 2
  (define (check-drain-end s f)
    (define start (session-before "session drain" s f))
    (when start
      (define href (car start))
      (define pid (cdr start))
      (test-case "session drain: once it is over, the old URL gets the expiration page"
        (c-kill (manager-pid s) SIGHUP)
        (wait-for-board s 60 "the old worker to finish draining"
                        (λ (b)
                          (and (eqv? 2 (hash-ref b 'generation #f))
                               (not (memv pid (map (λ (w) (hash-ref w 'pid)) (hash-ref b 'workers))))
                               (not (directory-exists? (format "/proc/~a" pid))))))
        (follow-expecting f href (λ (p) (expect-expired "a drained worker's URL" p))))))

  (call-with-temp-dir "fcgi-servlet" run))
