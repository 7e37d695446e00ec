#lang racket/base
;; What a server inherits from the way it is started does not decide what it does
;; (os/inherit.rkt, os/signals.rkt's take-signals!, the manager's orphan reaping). The
;; manager is started as users start servers, through lib/exec-with.rkt: under nohup
;; (SIGHUP ignored), by a supervisor that hands down SIGTERM and SIGHUP blocked, as a
;; shell's background job (SIGINT ignored), from a shell holding descriptor 10; and a
;; handler runs programs, one of which daemonizes. `--single-process` too. Every wait is
;; bounded.
(require racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/probe-app.rkt"
         "lib/serve.rkt")

;; get : served string -> (or/c string #f) ; the body of a GET of uri
(define (get s uri)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (status headers body) (fastcgi-request (served-address s) #:uri uri #:timeout 20))
    (bytes->string/utf-8 body #\?)))

;; ctl : served string ... -> (values natural string string)
(define (ctl s . args)
  (run-program* raco (append (list "fastcgi" "ctl") args (list "--pid-file" (served-pid-file s)))))

;; manager-exit : served seconds -> (or/c natural #f) ; its exit status, once it exited
(define (manager-exit s secs)
  (define sp (proc-subprocess (served-proc s)))
  (and (sync/timeout secs sp) (subprocess-status sp)))

;; reloads-to-v2 : served -> void ; ctl reload answers, and the new code serves
(define (reloads-to-v2 s)
  (display-to-file (app-source "v2") (build-path (served-dir s) "app.rkt") #:exists 'truncate)
  (define-values (code out err) (ctl s "reload" "--timeout" "40"))
  (check-equal? code 0 err)
  (check-equal? (get s "/") "v2"))

;; signal-ignored? : natural natural -> boolean ; from /proc/PID/status's SigIgn mask
(define (signal-ignored? pid sig)
  (define m (regexp-match #rx"SigIgn:\t([0-9a-f]+)" (file->string (format "/proc/~a/status" pid))))
  (bitwise-bit-set? (string->number (cadr m) 16) (sub1 sig)))

;; holds? : natural path -> boolean ; a descriptor of the process refers to the file
(define (holds? pid file)
  (for/or ([fd (in-list (with-handlers ([exn:fail? (λ (e) '())])
                          (directory-list (format "/proc/~a/fd" pid))))])
    (equal? (with-handlers ([exn:fail? (λ (e) #f)])
              (path->string (resolve-path (format "/proc/~a/fd/~a" pid fd))))
            (path->string file))))

(test-case "under nohup (SIGHUP ignored at exec): ctl reload reloads, and the workers take SIGHUP"
  (call-with-served-app
   (app-source "v1") '("--workers" "2") #:ready 2 #:exec-with '("--ignore" "HUP")
   (λ (s)
     (check-equal? (get s "/") "v1")
     (check-regexp-match #rx"started with SIGHUP ignored: the manager handles them all the same"
                         (file->string (proc-stderr-file (served-proc s))))
     (reloads-to-v2 s)
     ;; no worker inherits the ignored SIGHUP (they reopen their logs on it)
     (for ([pid (in-list (board-pids (read-status-file (served-status-file s)) '("idle" "busy")))])
       (check-false (signal-ignored? pid SIGHUP) (format "worker ~a ignores SIGHUP" pid))))))

(test-case "SIGTERM and SIGHUP blocked at exec (a supervisor's mask): ctl reload and ctl stop work"
  (call-with-served-app
   (app-source "v1") '("--workers" "1") #:exec-with '("--block" "HUP,TERM")
   (λ (s)
     (check-regexp-match #rx"started with SIGHUP blocked, SIGTERM blocked: the manager handles"
                         (file->string (proc-stderr-file (served-proc s))))
     (reloads-to-v2 s)
     (define-values (code out err) (ctl s "stop" "--timeout" "20"))
     (check-equal? code 0 err)
     (check-equal? (manager-exit s 5) 0))))

(test-case "SIGINT ignored at exec (a non-interactive shell's background job): SIGINT stops, exit 0"
  (call-with-served-app
   (app-source "v1") '("--workers" "1") #:exec-with '("--ignore" "INT,QUIT")
   (λ (s)
     (check-true (send-signal! (proc-pid (served-proc s)) SIGINT))
     (check-equal? (manager-exit s 20) 0))))

(test-case "an inherited descriptor (fd 10): preloading forks all the same, nothing of the pool holds it, a handler's program gets 0-2"
  (define marker (make-temporary-file "fcgi-inherited-~a"))
  (dynamic-wind
   void
   (λ ()
     (call-with-served-app
      (app-source "v1") '("--workers" "2") #:ready 2
      #:exec-with (list "--open-fd" (format "10:~a" marker))
      (λ (s)
        (define board (read-status-file (served-status-file s)))
        (check-equal? (hash-ref board 'preload) "forked" "the loader forked its workers")
        (define pool-pids (cons (hash-ref board 'loader_pid)
                                (board-pids board '("idle" "busy"))))
        (for ([pid (in-list pool-pids)])
          (check-false (holds? pid marker) (format "process ~a holds ~a" pid marker)))
        (check-equal? (get s "/fds") "0 1 2"))))
   (λ () (delete-file marker))))

(test-case "a program a handler starts gets descriptors 0-2 and nothing else"
  (call-with-served-app
   (app-source "v1") '("--workers" "1")
   (λ (s) (check-equal? (get s "/fds") "0 1 2"))))

(test-case "orphans that a handler's program leaves are reaped by the manager, and counted"
  (call-with-served-app
   (app-source "v1") '("--workers" "2") #:ready 2
   (λ (s)
     (define manager (proc-pid (served-proc s)))
     (for ([_ (in-range 5)]) (check-equal? (get s "/daemon") "left one"))
     ;; each sleep lasts 0.3 s, then is the manager's child until reaped (a tick: 0.25 s)
     (wait-until 15 "5 orphans reaped"
                 (λ () (>= (hash-ref (read-status-file (served-status-file s)) 'orphans_reaped 0) 5)))
     (check-equal? (zombie-children manager) '())
     (define-values (code out err) (ctl s "status"))
     (check-regexp-match #rx"orphans reaped: +[5-9]" out))))

(test-case "--single-process under nohup with SIGTERM blocked: SIGTERM stops it, exit 0"
  (call-with-temp-dir
   "fcgi-inherit-single"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define sock (path->string (build-path dir "app.sock")))
     (display-to-file (app-source "v1") app)
     (define p (start-process "single" (find-system-path 'exec-file)
                              (list (path->string exec-with-module) "--ignore" "HUP" "--block" "TERM"
                                    "--" raco "fastcgi" "serve" app "--single-process"
                                    "--listen" (string-append "unix:" sock))
                              #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (wait-for-unix-socket sock 60)
        (wait-until 30 "it answers"
                    (λ () (with-handlers ([exn:fail? (λ (e) #f)])
                            (define-values (st h body) (fastcgi-request (string-append "unix:" sock) #:uri "/" #:timeout 5))
                            (equal? body #"v1"))))
        (check-true (send-signal! (proc-pid p) SIGTERM))
        (define sp (proc-subprocess p))
        (check-not-false (sync/timeout 20 sp) "stopped on SIGTERM")
        (check-equal? (subprocess-status sp) 0))
      (λ () (stop-process! p))))))
