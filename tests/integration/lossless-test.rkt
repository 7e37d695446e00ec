#lang racket/base
;; Reloads, recycles and a graceful stop under a load that mixes GET and POST (with
;; bodies), through the published nginx (deploy/nginx/racket-app.conf: upstream keepalive)
;; and HAProxy (deploy/haproxy/haproxy.cfg: kept connections) files, and for reloads and
;; recycling Apache's (deploy/apache/proxy-fcgi-tcp.conf: mod_proxy_fcgi, enablereuse=on,
;; the app on TCP), with wrk as the client (24 connections). A front may send a request on
;; an idle kept connection at the moment a retiring worker would close it; nginx retries a
;; GET elsewhere but never a POST it has sent, so such a close shows here as a 502 (Apache
;; answered 503). The rule under test (handover.rkt): a retiring worker hands its kept
;; connections to a sibling instead of closing them, and a stopping one closes a kept
;; connection only right after an answer on it, or after it stayed idle for drain-timeout.
;; Checked: every answer is the app's own (200), no socket error, and the fault really
;; happened (the pool's counters say so).
(module+ test
  (require racket/file
           racket/list
           racket/string
           rackunit
           (only-in "../../fastcgi/private/os/ffi.rkt" c-geteuid)
           "../../fastcgi/private/os/signals.rkt"
           "deploy-lib.rkt"
           "lib.rkt"
           (only-in "../lib/serve.rkt" pid-file->status-file read-status-file))

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))
  (define haproxy (require-program! "/usr/sbin/haproxy" "haproxy"))
  (define apache2 (require-program! "/usr/sbin/apache2" "apache2"))

  ;; apache-main-conf : path string natural -> string
  ;; A throw-away Apache (prefork, its files in dir, listening on listen) that includes
  ;; the published deploy/apache/proxy-fcgi-tcp.conf for the app on 127.0.0.1:app-port.
  (define (apache-main-conf dir listen app-port)
    (string-append
     (format "ServerRoot \"~a\"\nServerName 127.0.0.1\nListen ~a\n" dir listen)
     (format "PidFile \"~a/apache.pid\"\nDefaultRuntimeDir \"~a/run\"\n" dir dir)
     (format "ErrorLog \"~a/apache-error.log\"\nLogLevel warn\n" dir)
     (apply string-append
            (for/list ([m (in-list '("mpm_prefork" "authz_core" "proxy" "proxy_fcgi"))])
              (format "LoadModule ~a_module /usr/lib/apache2/modules/mod_~a.so\n" m m)))
     "StartServers 4\nMinSpareServers 4\nMaxSpareServers 8\nMaxRequestWorkers 32\n"
     "Timeout 60\nKeepAlive On\n"
     ;; as root, Apache serves as www-data
     (if (zero? (c-geteuid)) "User www-data\nGroup www-data\n" "")
     (format "DocumentRoot \"~a/htdocs\"\n" dir)
     (format "Define FASTCGI_HOST 127.0.0.1\nDefine FASTCGI_PORT ~a\nInclude ~a\n"
             app-port (path->string (repo-file "deploy" "apache" "proxy-fcgi-tcp.conf")))))
  (define app (repo-file "tests" "reliability" "app.rkt"))

  ;; board : path -> hash ; the pool's scoreboard (next to the pid file)
  (define (board pid-file) (or (read-status-file (pid-file->status-file pid-file)) (hasheq)))

  (define (manager-pid pid-file) (string->number (string-trim (file->string pid-file))))

  ;; with-front : symbol path (listof string) (natural path proc -> any) -> any
  ;; The pool (2 workers, the reliability app) on a unix socket behind the front, run as
  ;; the published file says; body gets the front's port, the pid file and the pool.
  (define (with-front front dir serve-args body)
    (define port (car (free-ports 1)))
    (define listen (format "127.0.0.1:~a" port))
    (define pid-file (build-path dir "pool.pid"))
    (define-values (app-listen front-args conf-check)
      (case front
        [(nginx)
         (define sock (build-path dir "app.sock"))
         (copy-file "/etc/nginx/fastcgi_params" (build-path dir "fastcgi_params") #t)
         (define site (render-template! (repo-file "deploy" "nginx" "racket-app.conf")
                                        (build-path dir "racket-app.conf")
                                        `(("SOCKET" . ,(path->string sock)) ("LISTEN" . ,listen))))
         (define conf (build-path dir "nginx.conf"))
         (call-with-output-file conf #:exists 'truncate
           (λ (out) (write-string (nginx-main-conf dir (list site)) out)))
         (define args (list "-c" (path->string conf) "-p" (path->string dir) "-e" "stderr"))
         (values (string-append "unix:" (path->string sock)) args (list* "-t" "-q" args))]
        [(haproxy)
         (define-values (cfg run-dir) (haproxy-published-conf! dir listen))
         (values (string-append "unix:" (path->string (build-path run-dir "app.sock")))
                 (list "-f" (path->string cfg) "-db")
                 (list "-c" "-f" (path->string cfg)))]
        [(apache)
         ;; the app on TCP, as proxy-fcgi-tcp.conf (mod_proxy_fcgi, enablereuse=on) has it
         (define app-port (car (free-ports 1)))
         (define conf (build-path dir "apache.conf"))
         (file-or-directory-permissions dir #o755)
         (make-directory* (build-path dir "run"))
         (make-directory* (build-path dir "htdocs"))
         (call-with-output-file conf #:exists 'truncate
           (λ (out) (write-string (apache-main-conf dir listen app-port) out)))
         (define args (list "-d" (path->string dir) "-f" (path->string conf)))
         (values (format "127.0.0.1:~a" app-port) (append args '("-DFOREGROUND")) (append args '("-t")))]))
    (define program (case front [(nginx) nginx] [(haproxy) haproxy] [(apache) apache2]))
    (define-values (code out err) (run-program program conf-check))
    (unless (zero? code) (error 'lossless-test "~a rejects the published file:\n~a~a" front out err))
    (define pool (start-app "pool" app app-listen #:dir dir
                            #:args (append (list "--workers" "2" "--pid-file" (path->string pid-file))
                                           (if (eq? front 'haproxy) '("--socket-group" "haproxy") '())
                                           serve-args)))
    (define fp (start-process (symbol->string front) program front-args #:dir dir))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app app-listen pool)
       (wait-for-tcp port 10)
       (body port pid-file pool))
     (λ ()
       (stop-process! fp)
       (stop-process! pool #:timeout 30))))

  ;; check-all-answered : string hash -> void
  (define (check-all-answered what r)
    (check-true (> (hash-ref r 'requests) 500) (format "~a: the load ran (~a)" what r))
    (check-equal? (for/sum ([k '(non2xx connect read write timeout)]) (hash-ref r k)) 0
                  (format "~a: every request answered by the app: ~a" what r)))

  ;; LOSSLESS_ONLY=nginx (say) runs only the scenarios whose title has that text
  (define only (getenv "LOSSLESS_ONLY"))
  (define-syntax-rule (test-case* title body ...)
    (when (or (not only) (regexp-match? (regexp-quote only) title))
      (test-case title body ...)))

  (define (scenario front name serve-args fault check-fault)
    (test-case* (format "~a, ~a: no request lost" front name)
      (call-with-temp-dir "fastcgi-lossless"
        (λ (dir)
          (with-front front dir serve-args
            (λ (port pid-file pool)
              (define t (thread (λ () (fault pid-file pool))))
              (define r (run-wrk dir port 9))
              (thread-wait t)
              (check-all-answered (format "~a ~a" front name) r)
              (check-fault (board pid-file) (file-text (proc-stderr-file pool)))))))))

  ;; reloads, each given time to finish
  (define (reload-often pid-file pool)
    (for ([_ (in-range 3)])
      (sleep 2.5)
      (send-signal! (manager-pid pid-file) SIGHUP)))
  (define (reloaded board log)
    (check-true (>= (hash-ref board 'reloads 0) 1) (format "a reload was done: ~a" (hash-ref board 'reloads #f))))
  (define (recycled board log)
    (check-true (>= (hash-ref board 'recycled 0) 1) (format "a worker was recycled: ~a" (hash-ref board 'recycled #f))))

  (for ([front '(nginx haproxy apache)])
    (scenario front "SIGHUP reloads" '() reload-often reloaded)
    (scenario front "--max-requests recycling" '("--max-requests" "300") void recycled))
  ;; (a --max-memory below what a worker holds at start recycles each worker as soon as
  ;; it is ready: a forked worker's own memory is about 10 MiB; the hard ceiling, which
  ;; stops a worker at once, is put out of the way)
  (define max-memory-args '("--max-memory" "4m" "--max-memory-hard" "100g"))
  (scenario 'nginx "--max-memory recycling" max-memory-args void recycled)
  (scenario 'haproxy "--max-memory recycling" max-memory-args void recycled)

  ;; A graceful stop under load: the front's requests fail once nothing listens (nginx
  ;; logs connect() failed), but none that it sent on a kept connection.
  (test-case* "nginx, graceful stop: no sent request lost"
    (call-with-temp-dir "fastcgi-lossless"
      (λ (dir)
        (with-front 'nginx dir '()
          (λ (port pid-file pool)
            (define t (thread (λ () (sleep 3) (send-signal! (manager-pid pid-file) SIGTERM))))
            (define r (run-wrk dir port 6))
            (thread-wait t)
            (check-true (> (hash-ref r 'requests) 500) (format "the load ran: ~a" r))
            (check-true (> (hash-ref r 'non2xx) 0) (format "the stop refused later requests: ~a" r))
            (wait-until 40 "the pool to exit"
                        (λ () (not (eq? 'running (subprocess-status (proc-subprocess pool))))))
            (check-equal? (subprocess-status (proc-subprocess pool)) 0 "the pool stopped cleanly")
            (define errors (filter (λ (l) (regexp-match? #rx"\\[(error|crit|alert)\\]" l))
                                   (file->lines (build-path dir "nginx.stderr"))))
            (check-true (pair? errors) "nginx saw the pool go")
            (define lost (filter (λ (l) (not (regexp-match? #rx"connect\\(\\) to unix:[^ ]* failed" l))) errors))
            (check-equal? lost '() "every request that failed was refused at connect, none cut"))))))

  ;; The same through HAProxy, whose log (level notice in the published file) does not
  ;; show requests: a request refused once nothing listens is HAProxy's 503 (as is the
  ;; app's 503 for a newcomer on a connection while it stops); one cut under
  ;; it would be HAProxy's 502 or 500. (wrk may count a few read errors: HAProxy closes the
  ;; client's connection after its own 503, under the request wrk sent next.)
  (test-case* "haproxy, graceful stop: no sent request lost"
    (call-with-temp-dir "fastcgi-lossless"
      (λ (dir)
        (with-front 'haproxy dir '()
          (λ (port pid-file pool)
            (define t (thread (λ () (sleep 3) (send-signal! (manager-pid pid-file) SIGTERM))))
            (define r (run-wrk dir port 6))
            (thread-wait t)
            (define codes (hash-ref r 'codes))
            (check-true (> (hash-ref codes 200 0) 500) (format "the load ran: ~a" r))
            (check-true (> (hash-ref codes 503 0) 0) (format "the stop refused later requests: ~a" r))
            (check-equal? (for/sum ([(k v) (in-hash codes)] #:unless (memv k '(200 503))) v) 0
                          (format "nothing but 200 and 503: ~a" r))))))))
