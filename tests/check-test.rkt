#lang racket/base
;; check.rkt: `raco fastcgi serve --check` loads the app and checks the options and paths
;; (preflight.rkt) without serving: exit 0 and one line for a good setup, 1 and the reason
;; otherwise; nothing left behind, and an address a running server holds is fine. Real
;; `raco fastcgi serve --check` processes in a temp folder; every wait is bounded. The
;; checks themselves, in this process: preflight-test.
(require racket/file
         racket/tcp
         rackunit
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/serve.rkt")

;; sock : path -> string
(define (sock dir) (path->string (build-path dir "app.sock")))

(test-case "serve --check: 0 and one line for a good setup, 1 and the reason otherwise; nothing served"
  (call-with-temp-dir
   "fcgi-ff"
   (λ (dir)
     (define pid-file (path->string (build-path dir "m.pid")))
     (define access (path->string (build-path dir "access.log")))
     ;; the address is not bound: a running server may hold it
     (define held (tcp-listen 0 4 #t "127.0.0.1"))
     (define-values (_a port _b _c) (tcp-addresses held #t))
     (define (check-run args #:source [source good-source])
       (define app (path->string (build-path dir "app.rkt")))
       (display-to-file source app #:exists 'truncate)
       (define-values (code out err) (run-program raco (list* "fastcgi" "serve" app "--check" args) #:timeout 30))
       (values code (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))
     (define-values (code out err)
       (check-run (list "--listen" (string-append "unix:" (sock dir)) "--pid-file" pid-file
                        "--access-log" access)))
     (check-equal? code 0 err)
     (check-regexp-match #rx"^raco fastcgi serve: configuration ok: .*app\\.rkt loads \\(raw handler" out)
     (for ([f (list (sock dir) pid-file access)])
       (check-false (file-exists? f) (format "~a: nothing left behind" f)))
     (define-values (tcode tout terr) (check-run (list "--listen" (format "127.0.0.1:~a" port))))
     (check-equal? tcode 0 terr)
     (tcp-close held)
     (define-values (bcode bout berr) (check-run '("--listen" "127.0.0.1:9000") #:source broken-source))
     (check-equal? bcode 1)
     (check-equal? (length (lines berr)) 1 berr)
     (check-regexp-match #rx"^raco-fastcgi: cannot load .*app\\.rkt: app: broken at load\n$" berr)
     (define-values (lcode lout lerr) (check-run '("--listen" "unix:/nonexistent/dir/x.sock")))
     (check-equal? lcode 1)
     (check-regexp-match #rx"^raco-fastcgi: --listen unix:/nonexistent/dir/x.sock: no folder /nonexistent/dir/ for the socket\n$" lerr)
     (define-values (acode aout aerr) (check-run '("--slow-log" "/nonexistent/dir/s.log")))
     (check-equal? acode 1)
     (check-regexp-match #rx"^raco-fastcgi: --slow-log /nonexistent/dir/s.log: cannot open it for writing" aerr))))
