#lang racket/base
;; Routine cleanup cannot break a running pool (issue 25, item 9): the manager runs with
;; TMPDIR set to a folder of the test, which is emptied under it (as `rm -rf /tmp/*`
;; would). Then a reload (`raco fastcgi ctl reload`) and a killed worker: the new workers
;; start and serve, a servlet's continuation made before the cleanup is passed on to its
;; retiring owner, continuations move between the new workers, the status page and `ctl`
;; work. A pool without --pid-file leaves nothing in the temporary folder at all.
(require json
         racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

;; A counter whose state lives in its continuations; the page names the worker that
;; captured them.
(define servlet-source
  (string-append
   "#lang racket/base\n"
   "(require racket/os web-server/servlet)\n"
   "(provide start)\n"
   "(define (start req)\n"
   "  (let loop ([count 0])\n"
   "    (send/suspend/dispatch\n"
   "     (λ (embed/url)\n"
   "       (response/xexpr\n"
   "        `(html (body (p ([id \"state\"]) ,(format \"pid=~a count=~a\" (getpid) count))\n"
   "                     (a ([id \"next\"] [href ,(embed/url (λ (r) (loop (add1 count))))]) \"next\"))))))))\n"))

(define raw-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

;; get : natural string -> (values status bytes)
(define (get port uri)
  (define-values (status headers body)
    (fastcgi-request (format "127.0.0.1:~a" port) #:uri uri #:timeout 20))
  (values status body))

;; board : natural -> (or/c hash #f) ; the status page, as JSON
(define (board port)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (status body) (get port "/status?json"))
    (and (= status 200) (bytes->jsexpr body))))

;; serving : hash -> (listof hash) ; the workers that serve (idle or busy)
(define (serving b)
  (filter (λ (w) (member (hash-ref w 'state) '("idle" "busy"))) (hash-ref b 'workers '())))

;; page : bytes -> (list pid count next-url)
(define (page body)
  (define m (regexp-match #px#"pid=([0-9]+) count=([0-9]+)<.*id=\"next\" href=\"([^\"]*)\"" body))
  (unless m (error 'tmp-cleanup "not a counter page: ~s" (subbytes body 0 (min 300 (bytes-length body)))))
  (list (string->number (bytes->string/utf-8 (cadr m)))
        (string->number (bytes->string/utf-8 (caddr m)))
        (regexp-replace* #rx"&amp;" (bytes->string/utf-8 (cadddr m)) "\\&")))

;; follow : natural string -> (list pid count next-url)
(define (follow port url)
  (define-values (status body) (get port url))
  (unless (= status 200) (error 'tmp-cleanup "~a answered ~a: ~s" url status body))
  (page body))

;; empty-folder! : path -> (listof string) ; removes everything in dir; what was there
(define (empty-folder! dir)
  (for/list ([p (in-list (directory-list dir))])
    (delete-directory/files (build-path dir p))
    (path->string p)))

;; ctl : string ... -> (values natural string)
(define (ctl . args)
  (define-values (code out err) (run-program raco (list* "fastcgi" "ctl" args) #:timeout 90))
  (values code (string-append (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?))))

;; call-with-pool : string string (path -> (listof string)) (path natural proc -> any) -> any
;; The manager of source on a free port, with TMPDIR the folder tmp of a test folder and
;; the options (opts tmp).
(define (call-with-pool name source opts body)
  (call-with-temp-dir
   name
   (λ (dir)
     (define tmp (build-path dir "tmp"))
     (make-directory tmp)
     (define app (path->string (build-path dir "app.rkt")))
     (display-to-file source app)
     (define port (car (free-ports 1)))
     (define env (environment-variables-copy (current-environment-variables)))
     (environment-variables-set! env #"TMPDIR" (path->bytes tmp))
     (define mgr
       (parameterize ([current-environment-variables env])
         (start-process "manager" raco
                        (append (list "fastcgi" "serve" app "--listen" (format "127.0.0.1:~a" port)
                                      "--status-path" "/status")
                                (opts tmp))
                        #:dir dir)))
     (dynamic-wind
      void
      (λ () (body tmp port mgr))
      (λ () (stop-process! mgr #:timeout 10))))))

;; wait-serving : natural proc natural (hash -> boolean) string -> hash
;; Until the status page shows n serving workers and ok? holds of the board.
(define (wait-serving port mgr n what [ok? (λ (b) #t)])
  (wait-until 90 what
              (λ ()
                (unless (eq? (subprocess-status (proc-subprocess mgr)) 'running)
                  (error 'tmp-cleanup "the manager exited: ~a" (file->string (proc-stderr-file mgr))))
                (define b (board port))
                (and b (= n (length (serving b))) (ok? b) b))))

(test-case "a servlet pool: TMPDIR emptied, then a reload and a killed worker"
  (call-with-pool
   "fcgi-tmpclean" servlet-source
   (λ (tmp) (list "--workers" "2" "--pid-file" (path->string (build-path tmp "manager.pid"))))
   (λ (tmp port mgr)
     (define pid-file (path->string (build-path tmp "manager.pid")))
     (wait-serving port mgr 2 "two workers")
     ;; a session in a worker of the first generation
     (define first (follow port "/counter"))
     (define owner (car first))
     (check-equal? (second first) 0)
     (define removed (empty-folder! tmp))
     (check-not-false (member "manager.pid" removed) "the pid file was in the folder")
     (wait-until 5 "the manager to write its pid file again" (λ () (file-exists? pid-file)))
     (define-values (code out) (ctl "reload" "--pid-file" pid-file))
     (check-equal? code 0 out)
     (define b (wait-serving port mgr 2 "two workers of generation 2"
                             (λ (b) (andmap (λ (w) (= 2 (hash-ref w 'generation))) (serving b)))))
     ;; the old session, passed on to its owner (which retires and serves it)
     (define resumed (follow port (third first)))
     (check-equal? (take resumed 2) (list owner 1) "resumed in the worker that made it")
     ;; a worker killed: its replacement starts and serves
     (define victim (hash-ref (car (serving b)) 'pid))
     (send-signal! victim SIGKILL)
     (wait-serving port mgr 2 "a worker in place of the killed one"
                   (λ (b) (and (not (member victim (map (λ (w) (hash-ref w 'pid)) (serving b))))
                               (andmap (λ (w) (= 2 (hash-ref w 'generation))) (serving b)))))
     ;; a new session, over fresh connections that either worker takes
     (define start (follow port "/counter"))
     (for/fold ([p start]) ([i (in-range 1 11)])
       (define next (follow port (third p)))
       (check-equal? (take next 2) (list (car start) i) "each step resumes the session")
       next)
     (define-values (s-code s-out) (ctl "status" "--pid-file" pid-file))
     (check-equal? s-code 0 s-out)
     (check-regexp-match #rx"generation: +2" s-out)
     (check-equal? (sort (map path->string (directory-list tmp)) string<?)
                   '("manager.pid" "manager.pid.status.json")
                   "nothing else in the temporary folder")
     (define-values (stop-code stop-out) (ctl "stop" "--pid-file" pid-file))
     (check-equal? stop-code 0 stop-out))))

(test-case "a pool without --pid-file keeps nothing in TMPDIR; a new worker serves the status"
  (call-with-pool
   "fcgi-tmpclean1" raw-source (λ (tmp) (list "--workers" "1"))
   (λ (tmp port mgr)
     (define b (wait-serving port mgr 1 "one worker"))
     (define removed (empty-folder! tmp))
     (define victim (hash-ref (car (serving b)) 'pid))
     (send-signal! victim SIGKILL)
     (wait-serving port mgr 1 "a worker in place of the killed one"
                   (λ (b) (not (member victim (map (λ (w) (hash-ref w 'pid)) (serving b))))))
     (define-values (status body) (get port "/"))
     (check-equal? (list status body) '(200 #"ok\n"))
     (check-equal? removed '() "what the manager kept in the temporary folder"))))
