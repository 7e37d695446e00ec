#lang racket/base
;; End to end behind a real Apache (apache2, prefork MPM), one instance per configuration
;; in deploy/apache/, each with its own ServerRoot, config and logs in a temporary
;; directory and listening on a free loopback port. The shipped files are included as
;; they are; the test only `Define`s their paths:
;;   proxy-fcgi-unix.conf   mod_proxy_fcgi -> `raco fastcgi serve` on a unix socket
;;   proxy-fcgi-tcp.conf    mod_proxy_fcgi -> `raco fastcgi serve` on 127.0.0.1:PORT
;;   fcgid.conf             mod_fcgid spawns fcgid-wrapper.sh (the app, fd 0 listening)
;;   trampoline-cgi.conf    mod_cgi runs trampoline/fcgi-trampoline -> the unix socket
;;   htaccess-trampoline    the same from a .htaccess, as on a shared host
;; The app is this module (it provides `start`). Each front gets a GET, a form POST, a raw
;; POST, a 404 and a 3 MiB download; the trampoline also a dead socket (503, fast) and an
;; application that answers garbage (502), both reported in Apache's error log.
;;
;; Run as root, Apache serves as www-data: the temporary directory is opened to it, the
;; app's socket gets the group www-data (as the deploy READMEs say), and the processes that
;; mod_fcgid spawns find the `fastcgi` package through a copy of root's package links.
;; Run as another user, Apache serves as that user.
(require file/sha1
         net/url
         web-server/dispatch
         web-server/http
         web-server/http/bindings
         "../lib/web-app.rkt"
         "lib.rkt")
(provide start)

;; ---------------------------------------------------------------------------------------
;; The app (served by `raco fastcgi serve` and by mod_fcgid's processes).

(define max-download (* 16 1024 1024))

(define (hello req) (text 200 #"OK" "Hello, World!\n"))

(define (form req)
  (text 200 #"OK" (format "Hello, ~a!\n" (or (binding-value req 'name) "nobody"))))

;; echo: the raw body's length and sha1
(define (echo req)
  (define body (or (request-post-data/raw req) #""))
  (text 200 #"OK" (format "length=~a sha1=~a\n" (bytes-length body) (sha1 (open-input-bytes body)))))

(define (download req)
  (define n (string->number (or (binding-value req 'size) "")))
  (if (and (exact-nonnegative-integer? n) (<= n max-download))
      (response/output (λ (out) (write-pattern n out))
                       #:mime-type #"application/octet-stream"
                       #:headers (list (header #"Content-Length" (string->bytes/utf-8 (number->string n)))))
      (text 400 #"Bad Request" "size must be 0..16 MiB\n")))

;; where: what the app sees of the request line, whatever the front
(define (where req)
  (text 200 #"OK" (format "method=~a uri=~a\n" (request-method req) (url->string (request-uri req)))))

(define (not-found req) (text 404 #"Not Found" "not found\n"))

(define-values (dispatch dispatch-url)
  (dispatch-rules
   [("") hello]
   [("form") #:method "post" form]
   [("echo") #:method "post" echo]
   [("download") download]
   [("where") where]
   [else not-found]))

;; start : request -> response
(define (start req) (dispatch req))

;; ---------------------------------------------------------------------------------------
;; The tests.

(module+ test
  (require ffi/unsafe
           racket/file
           racket/runtime-path
           racket/string
           racket/unix-socket
           rackunit
           setup/dirs)

  (define-runtime-path this-file "apache-test.rkt")
  (define-runtime-path deploy-dir "../../deploy/apache")
  (define-runtime-path collection-dir "../../fastcgi")

  (define apache2 (require-program! "/usr/sbin/apache2" "apache2"))
  (define modules-dir "/usr/lib/apache2/modules")
  (for ([m (in-list '(("mod_proxy_fcgi.so" . "apache2") ("mod_fcgid.so" . "libapache2-mod-fcgid")))])
    (unless (file-exists? (build-path modules-dir (car m)))
      (error 'apache-test "~a/~a is missing: install the Debian package ~a (the Makefile does)"
             modules-dir (car m) (cdr m))))
  (define raco (or (find-executable-path "raco") (error 'apache-test "raco is not on PATH")))
  (define MiB (* 1024 1024))

  (define geteuid (get-ffi-obj "geteuid" #f (_fun -> _int)))
  ;; Apache will not serve as root: it serves as www-data, who is then given access.
  (define web-user (and (zero? (geteuid)) "www-data"))

  ;; deploy-file : string -> string ; a file of deploy/apache, as Apache is given it
  (define (deploy-file name) (path->string (simplify-path (build-path deploy-dir name))))

  ;; ---------------------------------------------------------------------------------
  ;; Apache configurations.

  ;; apache-conf : path string port (listof string) string #:docroot path -> string
  ;; A whole config: the base (paths in dir, modules, prefork, logs), then body.
  (define (apache-conf dir name port modules body #:docroot [docroot (build-path dir "htdocs")])
    (string-append
     (format "ServerRoot \"~a\"\nServerName 127.0.0.1\nListen 127.0.0.1:~a\n" dir port)
     (format "PidFile \"~a/~a.pid\"\nDefaultRuntimeDir \"~a/run-~a\"\n" dir name dir name)
     (format "ErrorLog \"~a/~a-error.log\"\nLogLevel warn\n" dir name)
     (string-append*
      (for/list ([m (in-list (list* "mpm_prefork" "authz_core" modules))])
        (format "LoadModule ~a_module ~a/mod_~a.so\n" m modules-dir m)))
     "StartServers 2\nMinSpareServers 1\nMaxSpareServers 4\nMaxRequestWorkers 16\n"
     "Timeout 60\nKeepAlive Off\n"
     (if web-user (format "User ~a\nGroup ~a\n" web-user web-user) "")
     (if (member "mime" modules) "TypesConfig /dev/null\n" "")
     (format "DocumentRoot \"~a\"\n" docroot)
     "<Directory />\n    AllowOverride None\n    Require all denied\n</Directory>\n"
     body))

  ;; A front: a name and the port its Apache listens on.
  (struct front (name port) #:transparent)

  ;; call-with-apache : path string (listof string) string (front -> any)
  ;;                    #:docroot path #:errors-expected? boolean -> any
  ;; Checks the config (apache2 -t), starts Apache in the foreground, waits for its port,
  ;; runs body, stops it; its error log is added to any failure inside, and must hold no
  ;; error line unless errors are expected.
  (define (call-with-apache dir name modules body-conf proc
                            #:docroot [docroot #f] #:errors-expected? [errors-expected? #f])
    (define port (car (free-ports 1)))
    (define conf (build-path dir (string-append name ".conf")))
    (make-directory* (build-path dir (string-append "run-" name)))
    (call-with-output-file conf #:exists 'truncate
      (λ (out)
        (write-string (if docroot
                          (apache-conf dir name port modules body-conf #:docroot docroot)
                          (apache-conf dir name port modules body-conf))
                      out)))
    (define args (list "-d" (path->string dir) "-f" (path->string conf)))
    (define-values (code _out err) (run-program apache2 (append args '("-t"))))
    (unless (zero? code)
      (error 'apache-test "apache2 rejects ~a:\n~a\n~a" conf err (file->string conf)))
    (define log (build-path dir (string-append name "-error.log")))
    (call-with-process
     name apache2 (append args '("-DFOREGROUND")) #:dir dir
     (λ (p)
       (with-handlers ([exn:fail? (λ (e) (raise (add-log e log)))])
         (wait-for-tcp port 20)
         (proc (front name port)))
       (unless errors-expected?
         (test-case (format "~a: Apache logged no errors" name)
           (define text (if (file-exists? log) (file->string log) ""))
           (check-false (regexp-match? #rx"\\[[a-z_]*:(error|crit|alert|emerg)\\]" text) text))))))

  ;; add-log : exn path -> exn ; Apache's error log, appended to a failure's message
  (define (add-log e log)
    (exn:fail (format "~a\n--- ~a ---\n~a" (exn-message e) log
                      (if (file-exists? log) (file->string log) "(none)"))
              (exn-continuation-marks e)))

  ;; ---------------------------------------------------------------------------------
  ;; The checks every front gets.

  ;; body-string : http-response -> string
  (define (body-string r) (bytes->string/utf-8 (http-response-body r) #\?))

  ;; check-front : front -> void ; the checks every configuration gets
  (define (check-front f)
    (define port (front-port f))
    (define (named what) (format "~a: ~a" (front-name f) what))
    (test-case (named "GET /")
      ;; the first request may wait for mod_fcgid to start Racket
      (define r (http-request port "/" #:timeout 60))
      (check-equal? (http-response-status r) 200)
      (check-equal? (http-response-body r) #"Hello, World!\n")
      (check-regexp-match #rx"^text/plain" (http-response-header r "Content-Type")))
    (test-case (named "the app sees the path and query the client sent")
      (define r (http-request port "/where?a=1&b=%C3%A9"))
      (check-equal? (body-string r) "method=GET uri=/where?a=1&b=%C3%A9\n"))
    (test-case (named "POST a form")
      (define r (http-request port "/form" #:method "POST"
                              #:headers '("Content-Type: application/x-www-form-urlencoded")
                              #:data #"x=1&name=J%C3%B6rg+%26+Co"))
      (check-equal? (http-response-status r) 200)
      (check-equal? (body-string r) "Hello, Jörg & Co!\n"))
    (test-case (named "POST a 2 MiB body")
      (define body (pattern-bytes 5 (+ 5 (* 2 MiB))))
      (define r (http-request port "/echo" #:method "POST" #:data body #:timeout 30
                              #:headers '("Content-Type: application/octet-stream")))
      (check-equal? (http-response-status r) 200)
      (check-equal? (body-string r) (format "length=~a sha1=~a\n" (bytes-length body) (sha1-hex body))))
    (test-case (named "a 404 from the app")
      (define r (http-request port "/no/such/page?x=1"))
      (check-equal? (http-response-status r) 404)
      (check-equal? (http-response-body r) #"not found\n"))
    (test-case (named "a 3 MiB download, checksummed")
      (define n (+ (* 3 MiB) 5))
      (define r (http-request port (format "/download?size=~a" n) #:timeout 30))
      (check-equal? (http-response-status r) 200)
      (check-equal? (bytes-length (http-response-body r)) n)
      (check-equal? (sha1-hex (http-response-body r)) (sha1-hex (pattern-bytes 0 n)))))

  ;; ---------------------------------------------------------------------------------
  ;; The app, started for the proxy and trampoline fronts.

  ;; call-with-app : path string string (-> any) (-> any) -> any
  ;; `raco fastcgi serve` this module on listen; wait says when it is up, then proc runs.
  (define (call-with-app dir name listen wait proc)
    (call-with-process
     name raco (append (list "fastcgi" "serve" (path->string this-file) "--listen" listen)
                       (if (and web-user (regexp-match? #rx"^unix:" listen))
                           (list "--socket-group" web-user)
                           '()))
     #:dir dir
     (λ (p)
       (with-handlers ([exn:fail? (λ (e) (raise (add-log e (proc-stderr-file p))))])
         (wait))
       (proc))))

  ;; call-with-bad-app : path-string (-> any) -> any
  ;; An application that answers garbage: for the trampoline's 502.
  (define (call-with-bad-app path thunk)
    (define cust (make-custodian))
    (define listener (parameterize ([current-custodian cust]) (unix-socket-listen path)))
    (file-or-directory-permissions path #o666)   ; Apache's user connects too
    (parameterize ([current-custodian cust])
      (thread (λ ()
                (let loop ()
                  (define-values (in out) (unix-socket-accept listener))
                  (thread (λ ()
                            (with-handlers ([exn:fail? void])
                              (read-bytes 8 in)
                              (write-bytes #"HTTP/1.1 200 OK\r\n\r\nnot FastCGI\n" out)
                              (close-output-port out)
                              (close-input-port in))))
                  (loop)))))
    (dynamic-wind void thunk (λ () (custodian-shutdown-all cust))))

  ;; check-logged : path regexp -> void ; Apache's error log matches rx within 5 s
  (define (check-logged log rx)
    (with-handlers ([exn:fail? (λ (e) (fail (format "~a: no line matching ~s in ~a:\n~a" (exn-message e) rx log
                                                    (if (file-exists? log) (file->string log) ""))))])
      (wait-until 5 (format "~s in ~a" rx log)
                  (λ () (and (file-exists? log) (regexp-match? rx (file->string log)))))))

  ;; ---------------------------------------------------------------------------------
  ;; Set-up for a server that runs as www-data.

  ;; open-to-web-user! : path -> void ; www-data must traverse dir and write fcgid's files
  (define (open-to-web-user! dir)
    (when web-user
      (file-or-directory-permissions dir #o755)))

  ;; addon-dir-for-fcgid : path -> path
  ;; Where mod_fcgid's processes find user-scope packages (PLTADDONDIR; mod_fcgid passes
  ;; them no HOME). Ours, or, when Apache's user is www-data, a package set of its own:
  ;; `make install` as root links the package into root's home, and the checkout itself
  ;; may sit in a folder www-data cannot read, so the collection (sources and compiled
  ;; files) is copied under dir and linked there, with the info cache that makes
  ;; `raco fastcgi` a command.
  (define (addon-dir-for-fcgid dir)
    (if (not web-user)
        (find-system-path 'addon-dir)
        (let* ([addon (build-path dir "addon")]
               [vdir (build-path addon (version))]
               [copy (build-path dir "pkg" "fastcgi")]
               [copy/ (string->bytes/utf-8 (string-append (path->string copy) "/"))])
          (make-directory* (build-path vdir "share"))
          (make-directory* (build-path dir "pkg"))
          (copy-directory/files collection-dir copy)
          ;; compiled files must not look older than their sources, or they are ignored
          (define now (current-seconds))
          (for ([p (in-directory copy)] #:when (regexp-match? #rx"[.](zo|dep)$" (path->string p)))
            (file-or-directory-modify-seconds p (+ now 2)))
          (with-output-to-file (build-path vdir "links.rktd")
            (λ () (write `(("fastcgi" ,copy/)))))
          (with-output-to-file (build-path vdir "share" "info-cache.rktd")
            (λ () (write `((,copy/ (collection pkg-desc version deps build-deps raco-commands
                                               scribblings license)
                                   (lib "fastcgi") 1 0)))))
          (for* ([top (list (build-path dir "pkg") addon)]
                 [p (in-sequences (in-value top) (in-directory top))])
            (file-or-directory-permissions p (if (directory-exists? p) #o755 #o644)))
          addon)))

  ;; fcgid-apps : -> (listof natural) ; pids of processes mod_fcgid started for this test
  (define (fcgid-apps)
    (for*/list ([d (in-list (directory-list "/proc"))]
                #:when (regexp-match? #rx"^[0-9]+$" (path->string d))
                [cmd (in-value (with-handlers ([exn:fail? (λ (e) #"")])
                                 (file->bytes (build-path "/proc" d "cmdline"))))]
                #:when (and (regexp-match? #rx#"--single-process" cmd)
                            (regexp-match? (regexp-quote (path->bytes this-file)) cmd)))
      (string->number (path->string d))))

  ;; ---------------------------------------------------------------------------------
  ;; The run.

  (define trampoline (path->string (build-trampoline!)))

  (call-with-temp-dir
   "fcgi-apache"
   (λ (dir)
     (open-to-web-user! dir)
     (make-directory* (build-path dir "htdocs"))
     (define sock (path->string (build-path dir "app.sock")))
     (define tcp-port (car (free-ports 1)))

     ;; mod_proxy_fcgi and the trampoline: the app as a service, on unix and TCP
     (call-with-app
      dir "app-unix" (string-append "unix:" sock) (λ () (wait-for-unix-socket sock 90))
      (λ ()
        (call-with-app
         dir "app-tcp" (format "127.0.0.1:~a" tcp-port) (λ () (wait-for-tcp tcp-port 90))
         (λ ()
           (call-with-apache
            dir "proxy-unix" '("proxy" "proxy_fcgi")
            (format "Define FASTCGI_SOCKET ~a\nInclude ~a\n" sock (deploy-file "proxy-fcgi-unix.conf"))
            check-front)

           (call-with-apache
            dir "proxy-tcp" '("proxy" "proxy_fcgi")
            (format "Define FASTCGI_HOST 127.0.0.1\nDefine FASTCGI_PORT ~a\nInclude ~a\n"
                    tcp-port (deploy-file "proxy-fcgi-tcp.conf"))
            check-front)))

        (define dead (path->string (build-path dir "dead.sock")))
        (define bad (path->string (build-path dir "bad.sock")))
        (call-with-bad-app
         bad
         (λ ()
           (call-with-apache
            dir "trampoline" '("cgi" "alias" "env") #:errors-expected? #t
            (string-append
             (format "Define FASTCGI_TRAMPOLINE ~a\nDefine FASTCGI_CONNECT unix:~a\nInclude ~a\n"
                     trampoline sock (deploy-file "trampoline-cgi.conf"))
             ;; two more targets for the failure checks, overriding the included one
             (format "<Location \"/dead\">\n    SetEnv FASTCGI_CONNECT unix:~a\n</Location>\n" dead)
             (format "<Location \"/bad\">\n    SetEnv FASTCGI_CONNECT unix:~a\n</Location>\n" bad))
            (λ (f)
              (check-front f)
              (define log (build-path dir "trampoline-error.log"))
              (test-case "trampoline: a dead socket is a 503, at once, in the error log"
                (define t0 (current-inexact-milliseconds))
                (define r (http-request (front-port f) "/dead"))
                (define secs (/ (- (current-inexact-milliseconds) t0) 1000.0))
                (check-equal? (http-response-status r) 503)
                (check-equal? (http-response-body r) #"503 Service Unavailable\n")
                (check-true (< secs 2) (format "took ~a s" secs))
                (check-logged log (pregexp (format "fcgi-trampoline: connect unix:~a: No such file or directory \\(answered 503\\)"
                                                   (regexp-quote dead)))))
              (test-case "trampoline: garbage from the application is a 502, in the error log"
                (define r (http-request (front-port f) "/bad"))
                (check-equal? (http-response-status r) 502)
                (check-equal? (http-response-body r) #"502 Bad Gateway\n")
                (check-logged log #rx"fcgi-trampoline: bad response from the application: record version 72 \\(answered 502\\)"))))))

        ;; the .htaccess of a shared host: the trampoline as fcgi-trampoline.cgi next to it
        (define shared (build-path dir "shared"))
        (make-directory* shared)
        (copy-file trampoline (build-path shared "fcgi-trampoline.cgi"))
        (file-or-directory-permissions (build-path shared "fcgi-trampoline.cgi") #o755)
        (define htaccess (file->string (deploy-file "htaccess-trampoline")))
        (check-regexp-match #rx"unix:/home/USER/run/app.sock" htaccess)
        (call-with-output-file (build-path shared ".htaccess")
          (λ (out) (write-string (string-replace htaccess "unix:/home/USER/run/app.sock"
                                                 (string-append "unix:" sock))
                                 out)))
        (call-with-output-file (build-path shared "static.txt")
          (λ (out) (write-string "served by Apache\n" out)))
        (for ([p (in-directory shared)]) (file-or-directory-permissions p (if (directory-exists? p) #o755 #o644)))
        (file-or-directory-permissions (build-path shared "fcgi-trampoline.cgi") #o755)
        (file-or-directory-permissions shared #o755)
        (call-with-apache
         dir "htaccess" '("cgi" "env" "rewrite" "mime")
         (format "<Directory \"~a\">\n    AllowOverride FileInfo Options\n    Require all granted\n</Directory>\n"
                 shared)
         #:docroot shared
         (λ (f)
           (check-front f)
           (test-case "htaccess: a static file is Apache's, the trampoline is not a page"
             (define r (http-request (front-port f) "/static.txt"))
             (check-equal? (http-response-status r) 200)
             (check-equal? (http-response-body r) #"served by Apache\n")
             (check-equal? (http-response-status (http-request (front-port f) "/fcgi-trampoline.cgi"))
                           403))))))

     ;; mod_fcgid: Apache starts the app itself
     (define addon (addon-dir-for-fcgid dir))
     (call-with-apache
      dir "fcgid" '("fcgid" "alias")
      (string-append
       (format "FcgidIPCDir ~a/fcgid\nFcgidProcessTableFile ~a/fcgid-shm\n" dir dir)
       (format "FcgidInitialEnv PLTADDONDIR ~a\n" addon)
       (format "Define FASTCGI_APP ~a\nDefine FASTCGI_WRAPPER ~a\nInclude ~a\n"
               (path->string this-file) (deploy-file "fcgid-wrapper.sh") (deploy-file "fcgid.conf")))
      (λ (f)
        (check-front f)
        (test-case "fcgid: the app runs in processes mod_fcgid started"
          (check-true (pair? (fcgid-apps)) "no `raco fastcgi serve --single-process` process found"))))
     (test-case "fcgid: stopping Apache stops the processes it started"
       (dynamic-wind
        void
        (λ () (wait-until 15 "mod_fcgid's processes to exit" (λ () (null? (fcgid-apps)))))
        (λ ()   ; whatever failed, none of them outlives the test
          (for ([pid (in-list (fcgid-apps))])
            (run-program (string->path "/bin/kill") (list "-KILL" (number->string pid)))))))
     (void))))
