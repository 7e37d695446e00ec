#lang racket/base
;; deploy/container/Dockerfile's command as PID 1 of a PID namespace of its own, what a
;; container gives it (no container engine runs here): `unshare --pid --fork --mount-proc`
;; runs the Dockerfile's CMD, with the app and the listen address replaced by a test app
;; and a unix socket in a temporary folder. It serves, reaps the orphans a handler's
;; program leaves (as PID 1 every orphan of the namespace is its), reloads through `ctl`
;; run inside the namespace (nsenter), and stops with exit status 0 on SIGTERM (docker
;; stop) and on SIGINT. Every wait is bounded.
(require json
         racket/file
         racket/list
         racket/runtime-path
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/probe-app.rkt"
         "lib/serve.rkt")

(define-runtime-path dockerfile "../deploy/container/Dockerfile")
(define unshare "/usr/bin/unshare")
(define nsenter "/usr/bin/nsenter")

;; dockerfile-command : -> (listof string) ; the Dockerfile's CMD, an exec-form JSON array
(define (dockerfile-command)
  (define line (for/first ([l (in-list (file->lines dockerfile))] #:when (regexp-match? #rx"^CMD " l)) l))
  (string->jsexpr (substring line 4)))

;; test-command : path path path -> (listof string)
;; CMD with the app, the listen address and the pid file of this test; raco as on PATH.
(define (test-command app sock pid-file)
  (define cmd (dockerfile-command))
  (check-equal? (take cmd 3) '("raco" "fastcgi" "serve") "CMD runs raco fastcgi serve")
  (for/list ([arg (in-list (cons raco (cdr cmd)))] [prev (in-list (cons #f (cons raco (cdr cmd))))])
    (cond [(equal? arg "/srv/app/app.rkt") (path->string app)]
          [(equal? prev "--listen") (string-append "unix:" (path->string sock))]
          [(equal? prev "--pid-file") (path->string pid-file)]
          [else arg])))

;; A manager as PID 1: its folder, socket, pid file, the unshare process, and the
;; manager's pid outside the namespace.
(struct pid1 (dir sock pid-file proc host-pid))

;; call-with-pid1 : (pid1 -> any) -> any
(define (call-with-pid1 body)
  (call-with-temp-dir
   "fcgi-pid1"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (define sock (build-path dir "app.sock"))
     (define pid-file (build-path dir "fastcgi.pid"))
     (display-to-file (app-source "v1") app)
     (define p (start-process "pid1" unshare
                              (append '("--pid" "--fork" "--mount-proc") (test-command app sock pid-file))
                              #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (define host-pid
          (wait-until 30 "unshare's child" (λ () (first-child (proc-pid p)))))
        (check-equal? (namespace-pids host-pid) (list host-pid 1) "PID 1 of its namespace")
        (define s (pid1 dir sock pid-file p host-pid))
        (with-handlers ([exn:fail? (λ (e) (raise (exn:fail (format "~a\nstderr:\n~a" (exn-message e)
                                                                   (file->string (proc-stderr-file p)))
                                                           (exn-continuation-marks e))))])
          (wait-until 60 "it answers" (λ () (equal? (get s "/") "v1"))))
        (body s))
      (λ () (stop-process! p #:timeout 10))))))

;; get : pid1 string -> (or/c string #f)
(define (get s uri)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (status headers body)
      (fastcgi-request (string-append "unix:" (path->string (pid1-sock s))) #:uri uri #:timeout 20))
    (bytes->string/utf-8 body #\?)))

;; exit-status : pid1 seconds -> (or/c natural #f) ; unshare's, which is the manager's
(define (exit-status s secs)
  (define sp (proc-subprocess (pid1-proc s)))
  (and (sync/timeout secs sp) (subprocess-status sp)))

;; first-child : natural -> (or/c natural #f) ; a child of pid, from /proc
(define (first-child pid)
  (for/first ([d (in-list (directory-list "/proc"))]
              #:when (let ([n (string->number (path->string d))])
                       (and n (eqv? pid (parent-of n)))))
    (string->number (path->string d))))

;; parent-of : natural -> (or/c natural #f)
(define (parent-of pid)
  (define stat (with-handlers ([exn:fail? (λ (e) "")]) (file->string (format "/proc/~a/stat" pid))))
  (define m (regexp-match #rx"\\) [A-Za-z] ([0-9]+)" stat))
  (and m (string->number (cadr m))))

;; namespace-pids : natural -> (listof natural) ; /proc/PID/status's NSpid: outermost first
(define (namespace-pids pid)
  (define m (regexp-match #rx"NSpid:([^\n]*)" (file->string (format "/proc/~a/status" pid))))
  (map string->number (string-split (cadr m))))

(test-case "PID 1 of a PID namespace: serves, reaps every orphan, reloads through ctl inside, stops on SIGTERM with 0"
  (call-with-pid1
   (λ (s)
     (for ([_ (in-range 5)]) (check-equal? (get s "/daemon") "left one"))
     (define status-file (pid-file->status-file (pid1-pid-file s)))
     (wait-until 15 "5 orphans reaped"
                 (λ () (>= (hash-ref (or (read-status-file status-file) (hasheq)) 'orphans_reaped 0) 5)))
     (check-equal? (zombie-children (pid1-host-pid s)) '())
     (check-equal? (string-trim (file->string (pid1-pid-file s))) "1" "the pid file holds the namespace's pid")
     ;; ctl inside the namespace, as `docker exec` runs it
     (display-to-file (app-source "v2") (build-path (pid1-dir s) "app.rkt") #:exists 'truncate)
     (define-values (code out err)
       ;; --root: the target's root (which a test run in a chroot does not share with the
       ;; mount namespace's), as `docker exec` is in the container's
       (run-program* nsenter (list "--target" (number->string (pid1-host-pid s)) "--pid" "--mount"
                                   "--root" "--wd"
                                   raco "fastcgi" "ctl" "reload" "--timeout" "40"
                                   "--pid-file" (path->string (pid1-pid-file s)))))
     (check-equal? code 0 err)
     (check-equal? (get s "/") "v2")
     (check-true (send-signal! (pid1-host-pid s) SIGTERM))
     (check-equal? (exit-status s 30) 0))))

(test-case "PID 1 of a PID namespace: SIGINT stops it with exit status 0"
  (call-with-pid1
   (λ (s)
     (check-true (send-signal! (pid1-host-pid s) SIGINT))
     (check-equal? (exit-status s 30) 0))))

(test-case "two managers, each PID 1 of its own namespace, on one network namespace: each worker takes its own siblings' connections"
  ;; abstract socket names belong to the network namespace: named by the manager's pid,
  ;; both pools' worker 1 would want the same handover address (the second could not
  ;; receive, and the first's retiring workers would hand connections to the other pool)
  (call-with-pid1
   (λ (a)
     (call-with-pid1
      (λ (b)
        (check-equal? (get b "/") "v1")
        (for ([s (list a b)])
          (check-false (regexp-match? #rx"cannot receive connections from retiring workers"
                                      (file->string (proc-stderr-file (pid1-proc s))))
                       "its workers' handover receivers bound")))))))
