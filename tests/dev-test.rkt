#lang racket/base
;; `raco fastcgi dev` as a process, through HTTP: reloading after a change to the app file,
;; to a module it requires and to a template it includes; a load error as a 500 page that
;; a fix clears; --no-reload; --static (files, content types, traversal refused, the rest
;; to the app); a servlet with continuations; and the web-server tutorial's blog with its
;; htdocs folder, as the manual tells to run it.
(module+ test
  (require racket/file
           racket/string
           rackunit
           "integration/lib.rkt")

  (define here (let-values ([(dir _n _d) (split-path (syntax-source #'here))]) dir))
  (define cli (path->string (simplify-path (build-path here ".." "fastcgi" "private" "cli" "raco.rkt"))))
  (define racket (path->string (find-system-path 'exec-file)))
  (define racket-exe (or (find-executable-path racket) racket))
  ;; the web-server tutorial's examples (package web-server-doc), read, never changed
  (define tutorial
    (let-values ([(dir _n _d) (split-path (collection-file-path "iteration-11.rkt" "web-server"
                                                                "scribblings" "tutorial" "examples"))])
      dir))

  ;; write-file! : path string -> void
  ;; As an editor saves: a new file renamed over the old one, so that no reader ever sees
  ;; it half written.
  (define (write-file! p text)
    (define tmp (path-add-extension p #".new"))
    (call-with-output-file tmp #:exists 'truncate (λ (o) (write-string text o)))
    (rename-file-or-directory tmp p #t))

  ;; replace-in-file! : path string string -> void
  (define (replace-in-file! p from to)
    (define text (file->string p))
    (check-true (string-contains? text from) (format "~a has ~s" p from))
    (write-file! p (string-replace text from to #:all? #f)))

  ;; A running `raco fastcgi dev`: its process, HTTP port and stdout file.
  (struct dev (proc port stdout))

  ;; start-dev : path string string (listof string) #:cwd path -> dev
  ;; `raco fastcgi dev APP --port P OPTION ...`, the app first as people write it.
  (define (start-dev dir name app options #:cwd [cwd dir])
    (define port (car (free-ports 1)))
    (define p (parameterize ([current-directory cwd])
                (start-process name racket-exe (list* cli "dev" app "--port" (number->string port) options)
                               #:dir dir)))
    (dev p port (proc-stdout-file p)))

  ;; dev-output : dev -> string
  (define (dev-output d) (file->string (dev-stdout d)))

  ;; wait-dev-ready : dev -> void ; until it printed the address to open (the app loaded)
  (define (wait-dev-ready d)
    (wait-until 90 (format "~a to load its app (stderr: ~a)" (proc-name (dev-proc d))
                           (proc-stderr-file (dev-proc d)))
                (λ ()
                  (unless (eq? (subprocess-status (proc-subprocess (dev-proc d))) 'running)
                    (error 'dev-test "~a exited: ~a" (proc-name (dev-proc d))
                           (file->string (proc-stderr-file (dev-proc d)))))
                  (regexp-match? #rx"Open http://" (dev-output d)))))

  ;; get : dev string -> http-response
  (define (get d path #:method [method "GET"])
    (http-request (dev-port d) path #:method method #:timeout 30))

  (define (body r) (bytes->string/utf-8 (http-response-body r) #\?))

  ;; get/timed : dev string -> (values http-response seconds)
  (define (get/timed d path)
    (define t0 (current-inexact-milliseconds))
    (define r (get d path))
    (values r (/ (- (current-inexact-milliseconds) t0) 1000.0)))

  ;; stop-dev! : dev -> void ; SIGTERM: it exits 0 and removes its temporary folder
  ;; (the tests' last step; a test that fails earlier has its process stopped by
  ;; stop-process! alone, so that this check does not hide the first failure)
  (define (stop-dev! d)
    (define m (regexp-match #rx"behind FastCGI at unix:([^\n]*)/app.sock" (dev-output d)))
    (define status (stop-process! (dev-proc d) #:timeout 15))
    (check-equal? status 0 (format "dev exits 0 on SIGTERM; its stderr:\n~a"
                                   (file->string (proc-stderr-file (dev-proc d)))))
    (when m
      (check-false (directory-exists? (cadr m)) "dev removes its temporary folder")))

  ;; How long the first request after a change may take: a new process loads the app.
  (define reload-bound 10)

  (define app-v1
    (string-append
     "#lang racket/base\n"
     "(require web-server/http web-server/templates \"model.rkt\")\n"
     "(provide start)\n"
     "(define (start req)\n"
     "  (eprintf \"handler's stderr\\n\")\n"
     "  (response/output (λ (o) (write-string (format \"app v1 / ~a / ~a\" (model-name) (include-template \"part.html\")) o))\n"
     "                   #:mime-type #\"text/plain\"))\n"))

  (test-case "raco fastcgi dev: reloads the app, its modules and templates; load errors; --static"
    (call-with-temp-dir
     "fcgi-dev"
     (λ (dir)
       (write-file! (build-path dir "app.rkt") app-v1)
       (write-file! (build-path dir "model.rkt")
                    "#lang racket/base\n(provide model-name)\n(define (model-name) \"model m1\")\n")
       (write-file! (build-path dir "part.html") "part p1")
       (write-file! (build-path dir "secret.txt") "not for the web")
       (define public (build-path dir "public"))
       (make-directory* (build-path public "sub"))
       (write-file! (build-path public "style.css") "body { color: red }\n")
       (write-file! (build-path public "sub" "notes.txt") "notes\n")
       (make-file-or-directory-link (build-path dir "secret.txt") (build-path public "out.txt"))
       (make-file-or-directory-link "style.css" (build-path public "in.css"))
       (define d (start-dev dir "dev-reload" (path->string (build-path dir "app.rkt"))
                            (list "--static" (path->string public))))
       (dynamic-wind
        void
        (λ ()
          (wait-dev-ready d)
          ;; (a) the app answers
          (define r0 (get d "/"))
          (check-equal? (http-response-status r0) 200)
          (check-equal? (body r0) "app v1 / model m1 / part p1")
          (check-regexp-match #rx"handler's stderr" (file->string (proc-stderr-file (dev-proc d)))
                              "what the handler writes to its current-error-port is shown")

          ;; (e) --static: files with their type; traversal refused; everything else to the app
          (define css (get d "/style.css"))
          (check-equal? (http-response-status css) 200)
          (check-equal? (http-response-body css) #"body { color: red }\n")
          (check-regexp-match #rx"^text/css" (http-response-header css "Content-Type"))
          (check-equal? (http-response-body (get d "/sub/notes.txt")) #"notes\n")
          (check-equal? (http-response-body (get d "/in.css")) #"body { color: red }\n"
                        "a link that stays inside the folder is followed")
          (define head (get d "/style.css" #:method "HEAD"))
          (check-equal? (list (http-response-status head) (http-response-body head)) (list 200 #""))
          (for ([path (list "/../secret.txt" "/%2e%2e/secret.txt" "/%2E%2E/secret.txt"
                            "/sub/../../secret.txt" "/sub/%2e%2e/%2e%2e/secret.txt" "/out.txt")])
            (define r (get d path))
            (check-equal? (http-response-status r) 404 path)
            (check-false (regexp-match? #rx"not for the web" (body r)) path))
          (for ([path (list "/sub" "/sub/" "/missing.css" "/style.css/x")])
            (check-equal? (body (get d path)) "app v1 / model m1 / part p1" (format "~a goes to the app" path)))
          (check-equal? (body (get d "/style.css" #:method "POST")) "app v1 / model m1 / part p1"
                        "a POST goes to the app")

          ;; (b) a change to the app file, to a module it requires, to a template it includes:
          ;; the first request after each save gets the new code
          (for ([change (list (list "app.rkt" "app v1" "app v2" "app v2 / model m1 / part p1")
                              (list "model.rkt" "model m1" "model m2" "app v2 / model m2 / part p1")
                              (list "part.html" "part p1" "part p2" "app v2 / model m2 / part p2"))])
            (define-values (file from to expected) (apply values change))
            (replace-in-file! (build-path dir file) from to)
            (define-values (r secs) (get/timed d "/"))
            (printf "dev-test: first answer after a change to ~a: ~a s\n" file secs)
            (check-equal? (body r) expected (format "after a change to ~a" file))
            (check-true (< secs reload-bound) (format "reloaded within ~a s, took ~a s" reload-bound secs))
            (check-regexp-match (regexp (string-append "reloaded [^\n]*app.rkt after a change to [^\n]*"
                                                       (regexp-quote file)))
                                (dev-output d)))

          ;; (c) a syntax error: a 500 page with the error, until the file is fixed
          (replace-in-file! (build-path dir "app.rkt") "(provide start)" "(provide start")
          (define broken (get d "/"))
          (check-equal? (http-response-status broken) 500)
          (check-regexp-match #rx"app.rkt did not load" (body broken))
          (check-regexp-match #rx"app.rkt:3:0: read-syntax: expected a `\\)` to close `\\(`" (body broken))
          (check-equal? (http-response-status (get d "/")) 500 "still broken")
          (check-regexp-match #rx"did not load after a change to [^\n]*app.rkt" (dev-output d))
          ;; an error while a required module is instantiated, the same way
          (replace-in-file! (build-path dir "app.rkt") "(provide start" "(provide start)")
          (replace-in-file! (build-path dir "model.rkt") "(define (model-name)"
                            "(define boom (car '()))\n(define (model-name)")
          (define broken2 (get d "/"))
          (check-equal? (http-response-status broken2) 500)
          (check-regexp-match #rx"car: contract violation" (body broken2))
          (replace-in-file! (build-path dir "model.rkt") "(define boom (car '()))\n" "")
          (define fixed (get d "/"))
          (check-equal? (http-response-status fixed) 200)
          (check-equal? (body fixed) "app v2 / model m2 / part p2")
          ;; a file the app does not load is not watched
          (define reloads (length (regexp-match* #rx"reloaded" (dev-output d))))
          (write-file! (build-path dir "unrelated.rkt") "#lang racket/base\n")
          (write-file! (build-path public "style.css") "body { color: blue }\n")
          (sleep 1.2)
          (check-equal? (body (get d "/")) "app v2 / model m2 / part p2")
          (check-equal? (http-response-body (get d "/style.css")) #"body { color: blue }\n")
          (check-equal? (length (regexp-match* #rx"reloaded" (dev-output d))) reloads
                        "no reload for files the app does not load")
          (stop-dev! d))
        (λ () (stop-process! (dev-proc d)))))))

  (define servlet-v1
    (string-append
     "#lang racket/base\n"
     "(require web-server/servlet)\n"
     "(provide start)\n"
     "(define (start req)\n"
     "  (send/suspend/dispatch\n"
     "   (λ (embed/url)\n"
     "     (response/xexpr\n"
     "      `(html (body (h1 \"Choose\")\n"
     "                   (a ([href ,(embed/url (λ (r) (chosen \"one\")))]) \"one\")\n"
     "                   (a ([href ,(embed/url (λ (r) (chosen \"two\")))]) \"two\")))))))\n"
     "(define (chosen which)\n"
     "  (response/xexpr `(html (body (p ,(string-append \"You chose \" which))))))\n"))

  ;; links : http-response -> (listof string)
  (define (links r)
    (regexp-match* #rx"href=\"([^\"]*)\"" (body r) #:match-select cadr))

  (test-case "raco fastcgi dev --no-reload: a servlet with continuations; a change is not loaded"
    (call-with-temp-dir
     "fcgi-dev"
     (λ (dir)
       (define app (build-path dir "choose.rkt"))
       (write-file! app servlet-v1)
       (define d (start-dev dir "dev-no-reload" (path->string app) (list "--no-reload")))
       (dynamic-wind
        void
        (λ ()
          (wait-dev-ready d)
          (check-false (regexp-match? #rx"reloads" (dev-output d)))
          ;; (f) follow each link: the continuation it names answers
          (for ([which (list "one" "two")] [i (in-naturals)])
            (define page (get d "/"))
            (check-equal? (http-response-status page) 200)
            (check-regexp-match #rx"<h1>Choose</h1>" (body page))
            (define ls (links page))
            (check-equal? (length ls) 2 (format "two links in ~s" (body page)))
            (define r (get d (list-ref ls i)))
            (check-equal? (http-response-status r) 200)
            (check-regexp-match (regexp (string-append "You chose " which)) (body r)))
          ;; (d) the change is not loaded
          (replace-in-file! app "(h1 \"Choose\")" "(h1 \"Pick\")")
          (sleep 1.5)
          (check-regexp-match #rx"<h1>Choose</h1>" (body (get d "/")))
          (check-false (regexp-match? #rx"reloaded" (dev-output d)))
          (stop-dev! d))
        (λ () (stop-process! (dev-proc d)))))))

  (test-case "raco fastcgi dev: the web-server tutorial's blog with --static htdocs"
    (call-with-temp-dir
     "fcgi-dev"
     (λ (dir)
       ;; the manual's change: #lang web-server/insta becomes a plain module providing start
       (define source (file->lines (build-path tutorial "iteration-11.rkt")))
       (check-equal? (car source) "#lang web-server/insta")
       (write-file! (build-path dir "blog.rkt")
                    (string-join (list* "#lang racket"
                                        "(require web-server/servlet)"
                                        "(provide/contract (start (request? . -> . response?)))"
                                        (cdr source))
                                 "\n"))
       (copy-file (build-path tutorial "model-3.rkt") (build-path dir "model-3.rkt"))
       (define htdocs (build-path tutorial "htdocs"))
       (define css (file->bytes (build-path htdocs "test-static.css")))
       ;; the blog keeps its posts in the-blog-data.sqlite in the current directory
       (define d (start-dev dir "dev-blog" "blog.rkt" (list "--static" (path->string htdocs))
                            #:cwd dir))
       (dynamic-wind
        void
        (λ ()
          (wait-dev-ready d)
          (define home (get d "/"))
          (check-equal? (http-response-status home) 200)
          (check-regexp-match #rx"<title>My Blog</title>" (body home))
          (check-regexp-match #rx"First Post" (body home))
          (define sheet (get d "/test-static.css"))
          (check-equal? (http-response-status sheet) 200)
          (check-equal? (http-response-body sheet) css)
          (check-regexp-match #rx"^text/css" (http-response-header sheet "Content-Type"))
          (define post (get d (car (links home))))
          (check-equal? (http-response-status post) 200)
          (check-regexp-match #rx"Post Details" (body post))
          (check-true (file-exists? (build-path dir "the-blog-data.sqlite")))
          (stop-dev! d))
        (λ () (stop-process! (dev-proc d))))))))
