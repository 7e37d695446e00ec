#lang racket/base
;; Helpers for the tests of the published deployment files (deploy/) and the examples:
;; a published file is read from deploy/ and only its @NAME@ placeholders are replaced, so
;; what runs is exactly what the manual shows; apps run under the real `raco fastcgi
;; serve`, started and killed like the fronts (lib.rkt).
(require compiler/find-exe
         racket/file
         racket/list
         racket/path
         racket/string
         "../../fastcgi/client.rkt"
         "lib.rkt")
(provide repo-root
         repo-file
         deploy-app
         raco
         render-template!
         start-app
         wait-for-app
         nginx-main-conf
         haproxy-published-conf!
         haproxy-multiplexing-on
         check-clean-log
         file-text
         run-wrk
         wrk-script)

;; The checkout this file belongs to.
(define repo-root
  (simplify-path (build-path (path-only (variable-reference->module-source (#%variable-reference)))
                             'up 'up)))

;; repo-file : string ... -> path ; a file of the checkout, e.g. (repo-file "deploy" "nginx" "x.conf")
(define (repo-file . parts) (apply build-path repo-root parts))

;; The app the deployment tests serve (see the file).
(define deploy-app (repo-file "tests" "integration" "deploy-app.rkt"))

;; raco : path ; the raco next to the racket running the tests (not whichever is on PATH)
(define raco
  (let ([p (build-path (path-only (find-exe)) "raco")])
    (require-program! (path->string p) "racket")))

;; render-template! : path path (listof (cons string string)) -> path
;; Copies a published file, replacing each @NAME@ by its value; fails when the file names a
;; placeholder that was not given (so a file and its test cannot drift apart silently).
(define (render-template! src dest substitutions)
  (define text
    (for/fold ([t (file->string src)]) ([s (in-list substitutions)])
      (string-replace t (string-append "@" (car s) "@") (cdr s))))
  (define left (regexp-match* #rx"@[A-Z_]+@" text))
  (unless (null? left)
    (error 'render-template! "~a: no value for ~a" src (string-join (remove-duplicates left) ", ")))
  (call-with-output-file dest #:exists 'truncate (λ (out) (write-string text out)))
  dest)

;; start-app : string path-string string #:dir path #:args (listof string) -> proc
;; `raco fastcgi serve APP --listen ADDRESS ARGS...`, its stderr in dir/NAME.stderr.
(define (start-app name app listen #:dir dir #:args [args '()])
  (start-process name raco (list* "fastcgi" "serve" (if (path? app) (path->string app) app)
                                  "--listen" listen args)
                 #:dir dir))

;; wait-for-app : string proc seconds -> void
;; Until the app answers GET_VALUES on address: the socket alone may be up before a worker
;; accepts. Fails early, with the app's stderr, when the app process has exited.
(define (wait-for-app address p [secs 90])
  (wait-until
   secs (format "~a to answer on ~a" (proc-name p) address)
   (λ ()
     (unless (eq? (subprocess-status (proc-subprocess p)) 'running)
       (error 'wait-for-app "~a exited (~a) before answering on ~a:\n~a" (proc-name p)
              (subprocess-status (proc-subprocess p)) address (file-text (proc-stderr-file p))))
     (with-handlers ([exn:fail? (λ (e) (sleep 0.2) #f)])
       (define c (fastcgi-connect address #:timeout 2))
       (dynamic-wind void
                     (λ () (pair? (fastcgi-get-values c '("FCGI_MPXS_CONNS") #:timeout 5)))
                     (λ () (fcgi-client-close c)))))))

;; nginx-main-conf : path (listof path) -> string
;; The nginx.conf a test runs: everything that only makes sense for a throw-away nginx in
;; a temporary directory (foreground, pid and temp files there, log to stderr), and the
;; published server files included in its http block, as a site's nginx.conf includes them.
(define (nginx-main-conf dir includes)
  (define (in-dir name) (path->string (build-path dir name)))
  (string-append
   "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n"
   (format "pid ~a;\nerror_log stderr notice;\n" (in-dir "nginx.pid"))
   "events { worker_connections 512; }\n"
   "http {\n"
   "  access_log off;\n"
   "  default_type application/octet-stream;\n"
   (string-append*
    (for/list ([t (in-list '("client_body" "fastcgi" "proxy" "uwsgi" "scgi"))])
      (format "  ~a_temp_path ~a;\n" t (in-dir (string-append t "_temp")))))
   (string-append*
    (for/list ([f (in-list includes)]) (format "  include ~a;\n" (path->string f))))
   "}\n"))

;; check-clean-log : string path regexp -> void
;; Fails, showing the log, when a line of the file matches rx.
(define (check-clean-log what file rx)
  (define bad (filter (λ (l) (regexp-match? rx l)) (file->lines file)))
  (unless (null? bad)
    (error 'check-clean-log "~a logged:\n~a" what (string-join (take bad (min 20 (length bad))) "\n"))))

;; file-text : path -> string ; at most the first 100000 characters, "" when missing
(define (file-text path)
  (if (file-exists? path)
      (call-with-input-file path
        (λ (in) (let ([s (read-string 100000 in)]) (if (eof-object? s) "" s))))
      ""))

;; haproxy-published-conf! : path string -> (values path path)
;; deploy/haproxy/haproxy.cfg as published, for a HAProxy listening on listen and chrooted
;; into dir/chroot as the haproxy user and group: the chroot's root searchable by haproxy,
;; its run/ (where the app's socket goes) by the haproxy group only. The rendered file in
;; dir and the run folder, seen from outside the chroot.
(define (haproxy-published-conf! dir listen)
  (define chroot (build-path dir "chroot"))
  (define run-dir (build-path chroot "run"))
  (make-directory* run-dir)
  (file-or-directory-permissions chroot #o755)
  (run-program "/bin/chgrp" (list "haproxy" (path->string run-dir)))
  (file-or-directory-permissions run-dir #o750)
  (values (render-template! (repo-file "deploy" "haproxy" "haproxy.cfg") (build-path dir "haproxy.cfg")
                            `(("CHROOT" . ,(path->string chroot)) ("USER" . "haproxy")
                              ("GROUP" . "haproxy") ("LISTEN" . ,listen)))
          run-dir))

;; haproxy-multiplexing-on : string -> string
;; The text of deploy/haproxy/haproxy.cfg with its two commented multiplexing lines
;; (option mpxs-conns, option max-reqs N) turned on; an error if the file has them no more.
(define (haproxy-multiplexing-on text)
  (define on (regexp-replace* #rx"\n    #(option (mpxs-conns|max-reqs [0-9]+))" text "\n    \\1"))
  (unless (= 2 (length (regexp-match* #rx"\n    option (mpxs-conns|max-reqs)" on)))
    (error 'haproxy-multiplexing-on "deploy/haproxy/haproxy.cfg no longer has the two commented multiplexing lines"))
  on)

;; wrk-mix.lua: half the requests POST a 2000-byte body to /upload (answered with its
;; length), half GET /hello; done prints two lines run-wrk parses: the totals, and the
;; count of each status (summed over wrk's threads).
(define wrk-script (repo-file "tests" "integration" "wrk-mix.lua"))

;; run-wrk : path natural real [natural] #:script path #:timeout real -> hash
;; wrk on the front's port for seconds: requests non2xx connect read write timeout (those
;; with no answer within timeout seconds: wrk's default, 2), and codes (status -> count).
(define (run-wrk dir port seconds [connections 24] #:script [script wrk-script] #:timeout [timeout 2])
  (define wrk (require-program! "/usr/bin/wrk" "wrk"))
  (define-values (code out err)
    (run-program wrk (list "-t2" (format "-c~a" connections) (format "-d~as" seconds) (format "--timeout=~as" timeout)
                           "-s" (path->string script)
                           (format "http://127.0.0.1:~a/" port))
                 #:timeout (+ seconds 30)))
  (define text (if (bytes? out) (bytes->string/utf-8 out #\?) out))
  (define m (regexp-match #rx"RESULT requests=([0-9]+) non2xx=([0-9]+) connect=([0-9]+) read=([0-9]+) write=([0-9]+) timeout=([0-9]+)" text))
  (unless m (error 'run-wrk "wrk printed no result (exit ~a):\n~a~a" code out err))
  (define codes (let ([c (regexp-match #rx"CODES([ 0-9=]*)" text)])
                  (for/hash ([p (in-list (regexp-match* #rx"([0-9]+)=([0-9]+)" (if c (cadr c) "")
                                                       #:match-select cdr))])
                    (values (string->number (car p)) (string->number (cadr p))))))
  (hash-set (for/hasheq ([k '(requests non2xx connect read write timeout)] [v (cdr m)])
              (values k (string->number v)))
            'codes codes))
