#lang racket/base
;; The processes of tests/integration/servlet-nginx-*-test.rkt: `raco fastcgi serve` with
;; its status page and pid file (the status read in the file the manager writes next to
;; its pid file, the status page's source: reading it sends no request, which would wake
;; or count on a worker), web-server's own serve/servlet running the same file, and an
;; nginx in front with kept FastCGI connections and without. Which worker took a request
;; (on its own connection, before any relay) is read in the access log. Each server runs
;; with a folder of its own as its current directory, where the blogs keep their data,
;; and as HOME, where web-server's stuffer keeps large stateless URLs.
(require compiler/find-exe
         ffi/unsafe
         json
         racket/file
         racket/list
         racket/string
         rackunit
         "blog-session.rkt"
         "browser.rkt"
         (only-in "deploy-lib.rkt" raco wait-for-app file-text)
         "lib.rkt"
         (only-in "../lib/serve.rkt" pid-file->status-file read-status-file board-pids))
(provide (struct-out server)
         call-with-server
         elapsed
         read-board
         manager-pid
         owner-pid
         c-kill
         SIGHUP
         SIGKILL
         call-with-serve/servlet
         (struct-out fronts)
         call-with-nginx
         check-clean-logs
         check-several-workers
         check-answered-elsewhere
         status)

(define nginx (require-program! "/usr/sbin/nginx" "nginx"))
(define racket-exe (find-exe))
(define t0 (current-inexact-milliseconds))

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
                         (and b (= workers (length (board-pids b '("idle" "busy"))))))))
     (parameterize ([current-server-proc p]) (body s)))
   (λ ()
     (stop-process! p #:timeout 10)
     (printf "servlet-nginx: ~a done at ~a s\n" name (elapsed)))))

;; elapsed : -> natural ; seconds since the module started
(define (elapsed) (inexact->exact (round (/ (- (current-inexact-milliseconds) t0) 1000))))

;; read-board : server -> (or/c hash #f) ; the status the manager writes next to its pid
;; file: what the status page shows, read without sending a request to any worker
(define (read-board s) (read-status-file (pid-file->status-file (server-pid-file s))))

;; manager-pid : server -> natural
(define (manager-pid s) (string->number (string-trim (file->string (server-pid-file s)))))

;; owner-pid : server string -> (or/c natural #f) ; the worker holding href's continuation
(define (owner-pid s href)
  (define n (continuation-owner href))
  (for/first ([w (in-list (hash-ref (read-board s) 'workers '()))]
              #:when (eqv? n (hash-ref w 'id #f)))
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
  (unless (zero? code) (error 'call-with-nginx "nginx rejects the configuration:\n~a" err))
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
              [m (in-value (regexp-match #px"\"GET (\\S+)\" [0-9]+ \\S+ \\S+ ([0-9]+) \\S+$" line))]
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
  (printf "servlet-nginx: ~a follows of one URL, workers that took them: ~a~a\n"
          (length pids)
          (for/list ([pid (in-list (remove-duplicates pids))]) (cons pid (count (λ (p) (eqv? p pid)) pids)))
          (if owner (format " (owner ~a)" owner) ""))
  (if relay?
      (check-true (pair? (elsewhere pids)) (format "every connection landed on the owner ~a: ~a" owner pids))
      (check-true (spread? pids) (format "every connection landed on one worker: ~a" pids))))

;; status : fronts -> hash ; the status page, through nginx
(define (status f)
  (bytes->jsexpr (http-response-body (http-request (fronts-close f) "/status?json"))))
