#lang racket/base
;; exec.rkt, as raco.rkt uses it: `raco fastcgi serve` replaces raco's process with
;; `racket cli-run.rkt serve ...`, which loads only the manager. The process is the same
;; one (the pid its parent and the pid file see), it serves, and it stops on SIGTERM with
;; exit status 0. Other commands stay in raco's process.
(require racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt")

(define raco (find-executable-path "raco"))
(define app-source
  "#lang racket/base\n(require fastcgi)\n(provide fastcgi-handler)\n(define (fastcgi-handler r)\n  (write-string \"Content-Type: text/plain\\r\\n\\r\\nexec\\n\" (fastcgi-request-stdout r)))\n")

;; take-right* : list natural -> list
(define (take-right* l n) (list-tail l (max 0 (- (length l) n))))

;; cmdline : natural -> (listof string) ; a process's arguments
(define (cmdline pid)
  (string-split (file->string (format "/proc/~a/cmdline" pid)) "\u0000"))

(test-case "serve: the same process, now racket running cli-run.rkt, serves and stops"
  (call-with-temp-dir
   "fcgi-exec"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (display-to-file app-source app)
     (define sock (path->string (build-path dir "s.sock")))
     (define pid-file (build-path dir "pid"))
     (define p (start-process "serve" raco
                              (list "fastcgi" "serve" (path->string app) "--listen" (string-append "unix:" sock)
                                    "--workers" "1" "--pid-file" (path->string pid-file))
                              #:dir dir))
     (define pid (proc-pid p))
     (wait-until 60 "the pid file" (λ () (and (file-exists? pid-file) (non-empty-string? (file->string pid-file)))))
     (check-equal? (string->number (string-trim (file->string pid-file))) pid)
     (define args (cmdline pid))
     (check-regexp-match #rx"racket" (car args))
     (check-regexp-match #rx"cli-run[.]rkt$" (cadr args))
     (check-equal? (take-right* args 8)
                   (list "serve" (path->string app) "--listen" (string-append "unix:" sock)
                         "--workers" "1" "--pid-file" (path->string pid-file)))
     (define answer
       (wait-until 60 "an answer" (λ () (with-handlers ([exn:fail? (λ (e) #f)])
                                          (call-with-values (λ () (fastcgi-request (string-append "unix:" sock)))
                                                            list)))))
     (check-equal? (list (car answer) (caddr answer)) (list 200 #"exec\n"))
     (check-equal? (stop-process! p #:timeout 30) 0))))

(test-case "ctl stays in raco's process: it answers as before"
  (define-values (code out err) (run-program raco (list "fastcgi" "ctl" "--help")))
  (check-equal? code 0 (format "~a" err))
  (check-regexp-match #rx"raco fastcgi ctl" (format "~a" out)))
