#lang racket/base
;; ctl.rkt: `raco fastcgi ctl status|reload|stop --pid-file FILE`. For real against a
;; manager (`raco fastcgi serve`, two workers); and in this process, each way it can be
;; refused (one clear line), status read from a status file, and stop and reload against a
;; `sleep` standing for the manager. Reloads that run for real: reload-serial-test.
(require json
         racket/file
         racket/os
         racket/port
         racket/string
         rackunit
         "../fastcgi/private/cli/ctl.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/serve.rkt")

;; A manager with its pid file, under a temp folder.
(struct pool (pid-file manager))

;; call-with-pool : (pool -> any) -> any ; two workers ready
(define (call-with-pool body)
  (call-with-temp-dir
   "fcgi-ctl"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define app (path->string (build-path dir "app.rkt")))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (display-to-file good-source app)
     (define mgr (start-process "manager" raco
                                (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                      "--pid-file" pid-file "--workers" "2")
                                #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (wait-until 60 "2 workers ready"
                    (λ () (= 2 (length (board-pids (read-status-file (pid-file->status-file pid-file))
                                                   '("idle" "busy"))))))
        (body (pool pid-file mgr)))
      (λ () (stop-process! mgr #:timeout 10))))))

;; manager-exit : pool seconds -> (or/c natural #f) ; waits for the manager's exit status
(define (manager-exit p secs)
  (define sp (proc-subprocess (pool-manager p)))
  (and (sync/timeout secs sp) (subprocess-status sp)))

(test-case "raco fastcgi ctl status and stop"
  (call-with-pool
   (λ (p)
     (define-values (code out err)
       (run-program* raco (list "fastcgi" "ctl" "status" "--pid-file" (pool-pid-file p))))
     (check-equal? code 0)
     (check-regexp-match #rx"total workers: +2" out)
     (define-values (jcode jout jerr)
       (run-program* raco (list "fastcgi" "ctl" "status" "--json" "--pid-file" (pool-pid-file p))))
     (check-equal? (length (hash-ref (string->jsexpr jout) 'workers)) 2)
     (define-values (scode sout serr)
       (run-program* raco (list "fastcgi" "ctl" "stop" "--pid-file" (pool-pid-file p))))
     (check-equal? scode 0)
     (check-equal? (manager-exit p 5) 0)
     (define-values (ncode nout nerr)
       (run-program* raco (list "fastcgi" "ctl" "status" "--pid-file" (pool-pid-file p))))
     (check-equal? ncode 1)
     (check-regexp-match #rx"cannot read|not running" nerr))))

;; ctl : string ... -> (values (or/c natural #f) string string)
;; ctl-command in this process: the exit code it asked for (#f: none), stdout, and stderr
;; or the user error's message. The command comes first in args and is passed last, as
;; cli.rkt passes it (racket/cmdline wants the flags first).
(define (ctl . args)
  (define out (open-output-string))
  (define err (open-output-string))
  (define code
    (let/ec k
      (parameterize ([current-output-port out]
                     [current-error-port err]
                     [exit-handler (λ (c) (k c))])
        (with-handlers ([exn:fail:user? (λ (e) (write-string (exn-message e) err) 'user-error)])
          (ctl-command (list->vector (append (cdr args) (list (car args)))))
          #f))))
  (values code (get-output-string out) (get-output-string err)))

(define (with-files proc)
  (call-with-temp-dir "fcgi-ctl" (λ (dir) (proc (path->string (build-path dir "m.pid"))))))

;; with-named-sleep : (subprocess -> any) -> any
;; a `sleep` named as a manager is (ctl checks that the pid file's process runs fastcgi)
(define (with-named-sleep proc)
  ;; with SIGHUP and SIGTERM at their default action (a shell cannot reset one ignored at
  ;; its start: a test run under nohup leaves SIGHUP ignored), so that they end it
  (define-values (sp o i e) (subprocess #f #f #f (find-executable-path "env")
                                        "--default-signal=HUP,INT,TERM" "bash" "-c"
                                        "exec -a raco-fastcgi-serve sleep 60"))
  (for ([p (list o i e)]) (if (input-port? p) (close-input-port p) (close-output-port p)))
  (wait-until 5 "the sleep runs"
              (λ () (equal? (with-handlers ([exn:fail? (λ (x) #f)])
                              (file->string (format "/proc/~a/comm" (subprocess-pid sp))))
                            "sleep\n")))
  (dynamic-wind void (λ () (proc sp)) (λ () (subprocess-kill sp #t))))

(test-case "refused, each with one line: no --pid-file, no such file, not a pid, no such process, no status, no such command"
  (with-files
   (λ (pid-file)
     (define (refused args rx #:one-line? [one-line? #t])
       (define-values (code out err) (apply ctl args))
       (check-equal? code 'user-error (format "~s" args))
       (check-regexp-match rx err)
       (when one-line? (check-false (regexp-match? #rx"\n" err) "one line")))
     (refused '("status") #rx"^raco-fastcgi: ctl: give --pid-file FILE")
     ;; (the system's message follows, on lines of its own)
     (refused (list "status" "--pid-file" pid-file) #rx"^raco-fastcgi: ctl: cannot read .*m\\.pid"
              #:one-line? #f)
     (display-to-file "twelve\n" pid-file)
     (refused (list "status" "--pid-file" pid-file) #rx"does not hold a pid: \"twelve\\\\n\"")
     (display-to-file "999999999\n" pid-file #:exists 'truncate)
     (refused (list "stop" "--pid-file" pid-file) #rx"no process 999999999 .*: the manager is not running$")
     ;; a process that runs no fastcgi: what a pid from another PID namespace names here
     (define-values (other o i e) (subprocess #f #f #f (find-executable-path "sleep") "60"))
     (for ([p (list o i e)]) (if (input-port? p) (close-input-port p) (close-output-port p)))
     (wait-until 5 "the sleep runs"
                 (λ () (regexp-match? #rx"sleep" (with-handlers ([exn:fail? (λ (x) "")])
                                                    (file->string (format "/proc/~a/cmdline" (subprocess-pid other)))))))
     (display-to-file (format "~a\n" (subprocess-pid other)) pid-file #:exists 'truncate)
     (refused (list "stop" "--pid-file" pid-file)
              #rx"ctl: process [0-9]+ \\(from .*m\\.pid\\) is not a raco fastcgi manager \\(it runs [^ ]*sleep\\): a pid file written in another PID namespace \\(a container\\) holds a pid of that namespace; run ctl inside it$")
     (check-equal? (subprocess-status other) 'running "no signal sent")
     (subprocess-kill other #t)
     (with-named-sleep
      (λ (sp)
        (display-to-file (format "~a\n" (subprocess-pid sp)) pid-file #:exists 'truncate)
        (refused (list "status" "--pid-file" pid-file) #rx"^raco-fastcgi: ctl: no status in .*m\\.pid\\.status\\.json yet$")
        (refused (list "restart" "--pid-file" pid-file) #rx"ctl: expected status, reload, stop or stacks, got \"restart\"$")
        (refused (list "status" "--timeout" "soon" "--pid-file" pid-file) #rx"--timeout"))))))

(test-case "status: the status file as text, or as JSON with --json"
  (with-files
   (λ (pid-file)
     (display-to-file (format "~a\n" (getpid)) pid-file)
     (define board (hasheq 'pool "app.rkt" 'pm "static" 'total_workers 3 'workers '()))
     (call-with-output-file (string-append pid-file ".status.json") (λ (o) (write-json board o)))
     (define-values (code out err) (ctl "status" "--pid-file" pid-file))
     (check-false code)
     (check-regexp-match #rx"total workers: +3" out)
     (define-values (jcode jout jerr) (ctl "status" "--json" "--pid-file" pid-file))
     (check-false jcode)
     (check-equal? (hash-ref (string->jsexpr jout) 'total_workers) 3)
     (check-regexp-match #rx"\n$" jout))))

;; with-sleep : (path-string subprocess -> any) -> any ; a `sleep` as the manager
(define (with-sleep proc)
  (with-files
   (λ (pid-file)
     (with-named-sleep
      (λ (sp)
        (display-to-file (format "~a\n" (subprocess-pid sp)) pid-file)
        (proc pid-file sp))))))

(test-case "stop: SIGTERM, then it waits until the manager has exited"
  (with-sleep
   (λ (pid-file sp)
     (define-values (code out err) (ctl "stop" "--pid-file" pid-file))
     (check-false code)
     (check-equal? out "stopped\n")
     (check-equal? (subprocess-status sp) (+ 128 SIGTERM)))))

(test-case "reload: SIGHUP; a manager that exits instead of reloading is exit 1 with one line"
  (with-sleep
   (λ (pid-file sp)
     (define-values (code out err) (ctl "reload" "--timeout" "10" "--pid-file" pid-file))
     (check-equal? code 1)
     (check-equal? err (format "raco fastcgi ctl: the manager (pid ~a) exited\n" (subprocess-pid sp)))
     (check-equal? (subprocess-status sp) (+ 128 SIGHUP)))))
