#lang racket/base
;; Reloads are serialised and truthful: a reload asked while one is under way runs after
;; it (the last asked code serves in the end), and `raco fastcgi ctl reload` waits for its
;; own reload and exits non-zero with the reason when that one failed. The app's versions
;; take a while to load (a sleep at module level) and note each load in a file, so that a
;; second reload is asked while the first one's workers are still loading. No front: the
;; tests speak FastCGI to the unix socket. Every wait is bounded.
(require racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

;; app-source : string path #:load-seconds real -> string
;; A raw app that answers "VERSION PID"; loading it appends VERSION to loads, then sleeps.
(define (app-source version loads #:load-seconds [secs 0])
  (string-append
   "#lang racket/base\n"
   "(require racket/os fastcgi)\n"
   "(provide fastcgi-handler)\n"
   (format "(with-output-to-file ~s (λ () (displayln ~s)) #:exists 'append)\n" (path->string loads) version)
   (format "(sleep ~a)\n" secs)
   "(define (fastcgi-handler r)\n"
   (format "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n~~a ~~a\\n\" ~s (getpid))\n" version)
   "                (fastcgi-request-stdout r)))\n"))

;; broken-source : string -> string ; an app that raises while it loads
(define (broken-source why)
  (string-append "#lang racket/base\n(provide fastcgi-handler)\n"
                 "(define (fastcgi-handler r) (void))\n"
                 (format "(error 'app ~s)\n" why)))

;; A running pool: its folder, socket, pid file, app file, load notes, manager process.
(struct pool (dir sock pid-file app loads manager))

;; call-with-pool : (pool -> any) -> any ; one worker serving v1
(define (call-with-pool body)
  (call-with-temp-dir
   "fcgi-rl"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define app (path->string (build-path dir "app.rkt")))
     (define loads (build-path dir "loads"))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (display-to-file (app-source "v1" loads) app)
     (define mgr (start-process "manager" raco
                                (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                      "--pid-file" pid-file "--workers" "1")
                                #:dir dir))
     (define p (pool dir sock pid-file app loads mgr))
     (dynamic-wind
      void
      (λ ()
        (wait-until 60 "v1 answers" (λ () (equal? (version p) "v1")))
        (body p))
      (λ () (stop-process! mgr #:timeout 10))))))

;; version : pool -> (or/c string #f) ; the version that answers now
(define (version p)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (status headers body)
      (fastcgi-request (string-append "unix:" (pool-sock p)) #:uri "/" #:timeout 10))
    (car (string-split (bytes->string/utf-8 body #\?)))))

;; board : pool -> hash ; the status the manager publishes
(define (board p) (or (read-status-file (pid-file->status-file (pool-pid-file p))) (hasheq)))

;; install! : pool string -> void ; the next load of the app reads this source
(define (install! p source) (display-to-file source (pool-app p) #:exists 'truncate))

;; loaded? : pool string -> boolean ; a worker has begun loading this version
(define (loaded? p v)
  (and (file-exists? (pool-loads p)) (member v (file->lines (pool-loads p))) #t))

;; hup! : pool -> void
(define (hup! p) (check-true (send-signal! (proc-pid (pool-manager p)) SIGHUP)))

;; ctl-reload : pool -> (values natural string string)
(define (ctl-reload p)
  (define-values (code out err)
    (run-program raco (list "fastcgi" "ctl" "reload" "--pid-file" (pool-pid-file p) "--timeout" "40")
                 #:timeout 50))
  (values code (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))

;; log-text : pool -> string ; the manager's stderr (the workers' too)
(define (log-text p) (file->string (proc-stderr-file (pool-manager p))))

(test-case "two SIGHUPs during a slow load: the second reload runs after the first, v3 serves"
  (call-with-pool
   (λ (p)
     (install! p (app-source "v2" (pool-loads p) #:load-seconds 2))
     (hup! p)
     (wait-until 30 "v2 loading" (λ () (loaded? p "v2")))
     (install! p (app-source "v3" (pool-loads p) #:load-seconds 2))
     (hup! p)
     (wait-until 40 "v3 answers" (λ () (equal? (version p) "v3")))
     ;; a new worker accepts on the shared socket before the manager has read its ready
     ;; line, so v3 can answer while the status still says reloads 1, generation 2
     (wait-until 10 "the status to count the second reload"
                 (λ () (>= (hash-ref (board p) 'reloads 0) 2)))
     (check-equal? (hash-ref (board p) 'reloads #f) 2 "both reloads ran")
     (check-equal? (hash-ref (board p) 'generation #f) 3)
     (check-regexp-match #rx"reload asked while one is under way: it runs after it" (log-text p)))))

(test-case "ctl reload asked during a reload waits for its own: the code it asked for serves"
  (call-with-pool
   (λ (p)
     (install! p (app-source "v2" (pool-loads p) #:load-seconds 2))
     (hup! p)
     (wait-until 30 "v2 loading" (λ () (loaded? p "v2")))
     (install! p (app-source "v3" (pool-loads p) #:load-seconds 2))
     (define-values (code out err) (ctl-reload p))
     (check-equal? code 0 err)
     (check-regexp-match #rx"reloaded: generation 3 serves" out)
     (check-equal? (version p) "v3" "when ctl reload returns, its code answers"))))

(test-case "ctl reload to broken code exits 1 with the reason, even when a reload before it worked"
  (call-with-pool
   (λ (p)
     ;; alone: the reason is on ctl's stderr and on the status
     (install! p (broken-source "broken at load (first)"))
     (define-values (code out err) (ctl-reload p))
     (check-equal? code 1)
     (check-regexp-match #rx"^raco fastcgi ctl: reload failed: .*broken at load \\(first\\)" err)
     (check-equal? (length (string-split err "\n")) 1 "one line")
     (check-regexp-match #rx"broken at load \\(first\\)" (hash-ref (board p) 'last_reload_error ""))
     (check-equal? (version p) "v1" "the running generation goes on")
     ;; asked while a good reload is under way: that one works, ctl's own fails
     (install! p (app-source "v2" (pool-loads p) #:load-seconds 2))
     (hup! p)
     (wait-until 30 "v2 loading" (λ () (loaded? p "v2")))
     (install! p (broken-source "broken at load (second)"))
     (define-values (code2 out2 err2) (ctl-reload p))
     (check-equal? code2 1 out2)
     (check-regexp-match #rx"reload failed: .*broken at load \\(second\\)" err2)
     (check-equal? (version p) "v2" "the reload before it worked"))))

;; fd-count : natural -> natural ; the process's open descriptors
(define (fd-count pid) (length (directory-list (format "/proc/~a/fd" pid))))

(test-case "reloads leave no descriptor behind in the manager"
  (call-with-pool
   (λ (p)
     (define pid (proc-pid (pool-manager p)))
     (define (reload-to! v)
       (install! p (app-source v (pool-loads p)))
       (define-values (code out err) (ctl-reload p))
       (check-equal? code 0 (format "ctl reload to ~a: ~a~a" v out err))
       (wait-until 20 (format "~a answers" v) (λ () (equal? (version p) v)))
       ;; the replaced worker has exited and the manager has seen it
       (wait-until 20 "one worker left" (λ () (= 1 (length (hash-ref (board p) 'workers '()))))))
     (reload-to! "v2")
     (define before (fd-count pid))
     (for ([v '("v3" "v4" "v5" "v6")]) (reload-to! v))
     ;; (the last replaced generation's loader stops once its worker has exited: its
     ;; descriptors go when the manager sees it exit, a moment later)
     (check-not-false (with-handlers ([exn:fail? (λ (e) #f)])
                        (wait-until 10 "the manager's descriptors back" (λ () (<= (fd-count pid) before))))
                      (format "manager descriptors: ~a after one reload, ~a after four more" before (fd-count pid))))))
