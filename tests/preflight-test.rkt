#lang racket/base
;; preflight.rkt: the checks made before a server starts, by tables in this process: the
;; files it will write can be opened (and a check leaves none behind), the listen address
;; makes sense, and each refusal is one user error naming the option. `serve --check` as a
;; whole: check-test.
(require racket/file
         racket/list
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/worker/preflight.rkt"
         "integration/lib.rkt")

;; refusal : (-> any) -> (or/c string #f) ; the user error's message, #f when none
(define (refusal thunk)
  (with-handlers ([exn:fail:user? exn-message]) (thunk) #f))

(test-case "check-writable-file!: stdout, a new file (removed again), an existing one (kept as it was)"
  (call-with-temp-dir
   "fcgi-pre"
   (λ (dir)
     (define new (path->string (build-path dir "new.log")))
     (define old (path->string (build-path dir "old.log")))
     (display-to-file "kept\n" old)
     (for ([p (list "-" new old)])
       (check-false (refusal (λ () (check-writable-file! "--access-log" p))) p))
     (check-false (file-exists? new) "a check leaves nothing behind")
     (check-equal? (file->string old) "kept\n"))))

(test-case "check-writable-file!: a file that cannot be opened is one line naming the flag"
  (call-with-temp-dir
   "fcgi-pre"
   (λ (dir)
     ;; path -> the reason in the message
     (define table
       (list (list "/nonexistent/dir/a.log" "No such file or directory")
             (list (path->string dir) "path refers to a directory")))
     (for ([row (in-list table)])
       (check-equal? (refusal (λ () (check-writable-file! "--slow-log" (first row))))
                     (format "raco-fastcgi: --slow-log ~a: cannot open it for writing: ~a"
                             (first row) (second row)))))))

(test-case "check-serve-paths!: the access log, the slow log, and the pid file unless told not to"
  (define (cfg . kvs) (hash->serve-config (apply hash kvs)))
  (define bad "/nonexistent/dir/f")
  (define table                          ; field flag
    '((access-log "--access-log") (slow-log "--slow-log") (pid-file "--pid-file")))
  (for ([row (in-list table)])
    (check-regexp-match (regexp (string-append "^raco-fastcgi: " (second row) " " bad ": cannot open it"))
                        (refusal (λ () (check-serve-paths! (cfg (first row) bad))))))
  (check-false (refusal (λ () (check-serve-paths! (cfg 'pid-file bad) #:pid-file? #f))))
  (check-false (refusal (λ () (check-serve-paths! (cfg))))))

(test-case "check-listen-address!: what the address is, or why it cannot be"
  (call-with-temp-dir
   "fcgi-pre"
   (λ (dir)
     (define sock (format "unix:~a" (build-path dir "app.sock")))
     (define (check-address . kvs)
       (define c (hash->serve-config (apply hash kvs)))
       (with-handlers ([exn:fail:user? (λ (e) (list 'refused (exn-message e)))])
         (check-listen-address! c)))
     ;; config -> result
     (define table
       (list (list '() "inherited (fd 0 or systemd socket activation, at start)")
             (list (list 'listen sock) sock)
             (list (list 'listen "127.0.0.1:9000") "127.0.0.1:9000")
             (list (list 'listen "[::1]:9000") "[::1]:9000")
             (list (list 'listen sock 'socket-owner 0 'socket-group 0) sock)
             (list (list 'listen "unix:/nonexistent/dir/x.sock")
                   '(refused "raco-fastcgi: --listen unix:/nonexistent/dir/x.sock: no folder /nonexistent/dir/ for the socket"))
             (list (list 'listen sock 'socket-owner "no-such-user-here")
                   '(refused "raco-fastcgi: --socket-owner no-such-user-here: unknown user"))
             (list (list 'listen sock 'socket-group "no-such-group-here")
                   '(refused "raco-fastcgi: --socket-group no-such-group-here: unknown group"))))
     (for ([row (in-list table)])
       (check-equal? (apply check-address (first row)) (second row) (format "~s" (first row))))
     (define bad (check-address 'listen "nonsense"))
     (check-equal? (first bad) 'refused)
     (check-regexp-match #rx"^raco-fastcgi: .*nonsense" (second bad))
     (check-false (file-exists? (build-path dir "app.sock")) "the address is not bound"))))

(test-case "filesystem-reason: the system's words, else the message's first line"
  (define table
    '(("open-output-file: cannot open output file\n  path: /x\n  system error: Permission denied; errno=13"
       "Permission denied")
      ("delete-file: cannot delete file\n  system error: No such file or directory; rkt_err=3"
       "No such file or directory")
      ("something else\nmore" "something else")))
  (for ([row (in-list table)])
    (check-equal? (filesystem-reason (exn:fail:filesystem (first row) (current-continuation-marks)))
                  (second row))))
