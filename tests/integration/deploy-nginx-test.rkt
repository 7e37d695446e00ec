#lang racket/base
;; The published nginx files (deploy/nginx/*.conf), run as published: each is read from
;; deploy/, its placeholders replaced, and included in a throw-away nginx's http block. The
;; app is deploy-app.rkt, served by `raco fastcgi serve` once on a unix socket, once on TCP.
;; Checked: both transports answer; connections are reused (keepalive + fastcgi_keep_conn);
;; the /app/ prefix mount gives SCRIPT_NAME and PATH_INFO; the request shape of php-fpm's
;; CVE-2019-11043 (%0a in the path, long query) gets ordinary 404s and the app keeps serving;
;; the HTTP_X_REQUEST_START the files pass arrives: the app records each request's queue
;; time (status page, access log).
(module+ test
  (require json
           racket/file
           racket/list
           rackunit
           "deploy-lib.rkt"
           "lib.rkt")

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))

  ;; info : port string -> (listof string) ; the fields of an /info answer, after a 200
  (define (info port path)
    (define r (http-request port path))
    (check-equal? (http-response-status r) 200 (format "GET ~a" path))
    (check-equal? (http-response-header r "X-App-Host") "-")
    (define m (regexp-match #rx"^pid=([0-9]+) conn=([0-9]+) peak=[0-9]+ keep=(#t|#f) script-name=(\"[^\"]*\") path-info=(\"[^\"]*\") uri=(\"[^\"]*\")\n$"
                            (http-response-body r)))
    (unless m (fail (format "GET ~a: unexpected answer ~s" path (http-response-body r))))
    (for/list ([v (in-list (cdr m))]) (bytes->string/utf-8 v)))

  ;; check-reuse : port string -> void
  ;; Five requests in a row travel on one kept FastCGI connection of one worker.
  (define (check-reuse port path)
    (define answers (for/list ([_ (in-range 5)]) (info port path)))
    (check-equal? (remove-duplicates (map caddr answers)) '("#t") "FCGI_KEEP_CONN set")
    (define conns (remove-duplicates (map (λ (a) (take a 2)) answers)))
    (check-equal? (length conns) 1 (format "5 requests in a row went over connections ~a" conns)))

  ;; cve-2019-11043-paths : (listof string)
  ;; The exploit's shape: a %0a that makes fastcgi_split_path_info fail, and a query
  ;; whose length it varies to move php-fpm's buffers; here over a range of lengths.
  (define (cve-2019-11043-paths prefix)
    (for*/list ([path (list "/x.php%0aabc" "/x.php/PHP_VALUE%0Asession.auto_start=1;;;")]
                [len (in-range 1730 1830 20)])
      (string-append prefix path "?" (make-string len #\Q))))

  (define (check-cve port prefix)
    (for ([path (in-list (cve-2019-11043-paths prefix))])
      (define r (http-request port path #:headers (list (string-append "D-Pisos: 8" (make-string 40 #\=) "D"))))
      (check-true (and (memv (http-response-status r) '(400 404)) #t)
                  (format "GET ~a...: status ~a" (substring path 0 30) (http-response-status r)))))

  (define (run dir)
    (define sock (path->string (build-path dir "app.sock")))
    (define-values (unix-port tcp-port prefix-port app-port) (apply values (free-ports 4)))
    (define app-tcp (format "127.0.0.1:~a" app-port))
    (copy-file "/etc/nginx/fastcgi_params" (build-path dir "fastcgi_params"))
    (define confs
      (list (render-template! (repo-file "deploy" "nginx" "racket-app.conf") (build-path dir "racket-app.conf")
                              `(("SOCKET" . ,sock) ("LISTEN" . ,(format "127.0.0.1:~a" unix-port))))
            (render-template! (repo-file "deploy" "nginx" "racket-app-tcp.conf") (build-path dir "racket-app-tcp.conf")
                              `(("APP_ADDRESS" . ,app-tcp) ("LISTEN" . ,(format "127.0.0.1:~a" tcp-port))))
            (render-template! (repo-file "deploy" "nginx" "racket-app-prefix.conf") (build-path dir "racket-app-prefix.conf")
                              `(("SOCKET" . ,sock) ("LISTEN" . ,(format "127.0.0.1:~a" prefix-port))))))
    (define conf (build-path dir "nginx.conf"))
    (call-with-output-file conf (λ (out) (write-string (nginx-main-conf dir confs) out)))
    (define nginx-args (list "-c" (path->string conf) "-p" (path->string dir) "-e" "stderr"))
    (define-values (code _out err) (run-program nginx (list* "-t" "-q" nginx-args)))
    (unless (zero? code) (error 'deploy-nginx-test "nginx rejects the published files:\n~a" err))
    (define access (build-path dir "access.log"))
    (define app-unix (start-app "app-unix" deploy-app (string-append "unix:" sock) #:dir dir
                                #:args (list "--status-path" "/status" "--access-log" (path->string access))))
    (define app-on-tcp (start-app "app-tcp" deploy-app app-tcp #:dir dir))
    (define ng (start-process "nginx" nginx nginx-args #:dir dir))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app (string-append "unix:" sock) app-unix)
       (wait-for-app app-tcp app-on-tcp)
       (for ([p (list unix-port tcp-port prefix-port)]) (wait-for-tcp p 10))

       (test-case "racket-app.conf (unix socket): answers, one kept connection"
         (define a (info unix-port "/info?x=1"))
         (check-equal? (list-ref a 3) "\"/info\"")
         (check-equal? (list-ref a 5) "\"/info?x=1\"")
         (check-reuse unix-port "/info"))

       (test-case "racket-app-tcp.conf (TCP): answers, one kept connection"
         (define a (info tcp-port "/info/b?y=2"))
         (check-equal? (list-ref a 5) "\"/info/b?y=2\"")
         (check-reuse tcp-port "/info"))

       (test-case "racket-app-prefix.conf: SCRIPT_NAME is the mount point, PATH_INFO the rest"
         (define a (info prefix-port "/app/info/a%20b?x=1"))
         (check-equal? (list-ref a 3) "\"/app\"")
         (check-equal? (list-ref a 4) "\"/info/a b\"")
         (check-equal? (list-ref a 5) "\"/app/info/a%20b?x=1\"")
         (check-reuse prefix-port "/app/info")
         (define r (http-request prefix-port "/app"))
         (check-equal? (http-response-status r) 301)
         (check-regexp-match #rx"/app/$" (http-response-header r "Location"))
         (check-equal? (http-response-status (http-request prefix-port "/app/nothing")) 404))

       (test-case "CVE-2019-11043 request shape: ordinary 404s, the app keeps serving"
         (check-cve prefix-port "/app")
         (check-cve unix-port "")
         (check-equal? (list-ref (info prefix-port "/app/info") 4) "\"/info\"")
         (check-equal? (list-ref (info unix-port "/info") 3) "\"/info\"")
         (check-eq? (subprocess-status (proc-subprocess app-unix)) 'running))

       (test-case "HTTP_X_REQUEST_START arrives: each request's queue time recorded"
         (define (queue-count)
           (define r (http-request unix-port "/status?json"))
           (check-equal? (http-response-status r) 200)
           (hash-ref (hash-ref (bytes->jsexpr (http-response-body r)) 'queue_time_seconds) 'count))
         (define before (queue-count))
         (for ([_ (in-range 3)]) (info unix-port "/info?queued"))
         ;; the workers report every 0.1 s: the status follows, the 3 and the scrape before
         (wait-until 5 "the queue times counted" (λ () (>= (queue-count) (+ before 4))))
         (define lines (wait-until 5 "the access lines"
                                   (λ () (let ([ls (filter (λ (l) (regexp-match? #rx"/info[?]queued" l))
                                                           (if (file-exists? access) (file->lines access) '()))])
                                           (and (= 3 (length ls)) ls)))))
         (for ([l (in-list lines)])
           (check-regexp-match #px" \\d+\\.\\d\\d$" l "the queue time (ms) ends the line")))

       (test-case "nginx and the apps logged no errors"
         (check-clean-log "nginx" (proc-stderr-file ng) #rx"\\[(error|crit|alert|emerg)\\]")
         (for ([p (list app-unix app-on-tcp)])
           (check-clean-log (proc-name p) (proc-stderr-file p) #rx" (error|fatal) "))))
     (λ ()
       (stop-process! ng)
       (stop-process! app-on-tcp)
       (stop-process! app-unix))))

  (call-with-temp-dir "fcgi-dnginx" run))
