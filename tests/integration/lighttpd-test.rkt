#lang racket/base
;; The published deploy/lighttpd/lighttpd.conf, run as published (placeholders replaced):
;; a real lighttpd that spawns deploy-app.rkt itself through bin-path (a listening unix
;; socket as fd 0, which `raco fastcgi serve` detects), and asks examples/authorizer.rkt,
;; served on its own unix socket, about every request for its /private/ static folder.
(module+ test
  (require racket/file
           rackunit
           "deploy-lib.rkt"
           "lib.rkt")

  (define lighttpd (require-program! "/usr/sbin/lighttpd" "lighttpd"))

  (define secret #"the private file\n")

  (define (run dir)
    (define www (build-path dir "www"))
    (define run-dir (build-path dir "run"))
    (make-directory* (build-path www "private"))
    (make-directory run-dir)
    (call-with-output-file (build-path www "index.html") (λ (o) (write-string "<p>public</p>\n" o)))
    (call-with-output-file (build-path www "private" "a.txt") (λ (o) (write-bytes secret o)))
    (define auth-sock (path->string (build-path dir "auth.sock")))
    (define port (car (free-ports 1)))
    (define conf (render-template! (repo-file "deploy" "lighttpd" "lighttpd.conf") (build-path dir "lighttpd.conf")
                                   `(("BIND" . "127.0.0.1") ("PORT" . ,(number->string port))
                                     ("DOCROOT" . ,(path->string www)) ("RUNDIR" . ,(path->string run-dir))
                                     ("RACO" . ,(path->string raco)) ("APP" . ,(path->string deploy-app))
                                     ("AUTH_SOCKET" . ,auth-sock))))
    (define-values (code out err) (run-program lighttpd (list "-tt" "-f" (path->string conf))))
    (unless (zero? code) (error 'lighttpd-test "lighttpd rejects the published file:\n~a~a" out err))
    (define auth (start-app "authorizer" (repo-file "examples" "authorizer.rkt")
                            (string-append "unix:" auth-sock) #:dir dir))
    (define lt (start-process "lighttpd" lighttpd (list "-D" "-f" (path->string conf)) #:dir dir))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app (string-append "unix:" auth-sock) auth)
       (wait-for-tcp port 10)
       ;; lighttpd answers 503 until the app it spawned has loaded
       (define answer
         (wait-until 120 "the app lighttpd spawned to answer"
                     (λ ()
                       (define r (http-request port "/app/info/x?y=1"))
                       (and (= (http-response-status r) 200) r))))

       (test-case "bin-path: lighttpd spawned the app on its socket, as fd 0"
         (check-true (file-exists? (build-path run-dir "app.sock-0")) "lighttpd's socket for process 0")
         (check-regexp-match #rx"listening on fd:0" (file-text (proc-stderr-file lt)))
         (check-regexp-match
          #rx"^pid=[0-9]+ conn=[0-9]+ peak=[0-9]+ keep=#f script-name=\"/app\" path-info=\"/info/x\" uri=\"/app/info/x\\?y=1\"\n$"
          (bytes->string/utf-8 (http-response-body answer)))
         (check-equal? (http-response-status (http-request port "/app/nothing")) 404))

       (test-case "Authorizer: no token 401, wrong token 403, neither shows the file"
         (define none (http-request port "/private/a.txt"))
         (check-equal? (http-response-status none) 401)
         (check-equal? (http-response-header none "WWW-Authenticate") "Bearer realm=\"example\"")
         (define wrong (http-request port "/private/a.txt" #:headers '("Authorization: Bearer guess")))
         (check-equal? (http-response-status wrong) 403)
         (for ([r (list none wrong)])
           (check-false (regexp-match? #rx#"private file" (http-response-body r)))))

       (test-case "Authorizer: a valid token gets the static file"
         (define r (http-request port "/private/a.txt" #:headers '("Authorization: Bearer demo-token")))
         (check-equal? (http-response-status r) 200)
         (check-equal? (http-response-body r) secret)
         (check-regexp-match #rx"^text/plain" (http-response-header r "Content-Type"))
         (check-equal? (http-response-status (http-request port "/private/missing.txt"
                                                           #:headers '("Authorization: Bearer demo-token")))
                       404))

       (test-case "files outside /private/ are served without asking"
         (define r (http-request port "/index.html"))
         (check-equal? (http-response-status r) 200)
         (check-equal? (http-response-body r) #"<p>public</p>\n"))

       (test-case "lighttpd, the app and the Authorizer logged no errors"
         (check-clean-log "lighttpd" (proc-stderr-file lt) #rx"\\(.*\\) .*(?i:error|failed)| (error|fatal) ")
         (check-clean-log "authorizer" (proc-stderr-file auth) #rx" (error|fatal) ")))
     (λ ()
       (stop-process! lt)
       (stop-process! auth))))

  (call-with-temp-dir "fcgi-lighttpd" run))
