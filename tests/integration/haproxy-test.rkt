#lang racket/base
;; The published deploy/haproxy/haproxy.cfg, run as published (placeholders replaced): a
;; real HAProxy chrooted into a temporary directory and running as the haproxy user and
;; group, in front of deploy-app.rkt served by `raco fastcgi serve` on a unix socket inside
;; the chroot, mode 0660, group haproxy. Checked: HAProxy really is chrooted and not root;
;; path-info gives SCRIPT_NAME and PATH_INFO; a %0a path is refused by HAProxy, not passed
;; on; concurrent requests go one at a time on a connection as published (HAProxy 2.6
;; multiplexes with errors, see the file), and with the file's two multiplexing lines
;; uncommented, concurrent requests from separate client connections share FastCGI
;; connections (the app counts the requests in flight on each connection).
(module+ test
  (require racket/file
           racket/list
           racket/string
           rackunit
           "deploy-lib.rkt"
           "lib.rkt")

  (define haproxy (require-program! "/usr/sbin/haproxy" "haproxy"))

  ;; user-ids : string -> (values natural natural) ; uid and gid of a system user
  ;; The Debian package creates the haproxy user and group; without them the test cannot
  ;; show the group permissions, so it fails.
  (define (user-ids name)
    (define line (for/first ([l (in-list (file->lines "/etc/passwd"))]
                             #:when (string-prefix? l (string-append name ":")))
                   l))
    (unless line (error 'haproxy-test "no user ~a in /etc/passwd (the haproxy package creates it)" name))
    (define fields (string-split line ":" #:trim? #f))
    (values (string->number (list-ref fields 2)) (string->number (list-ref fields 3))))

  ;; parse-info : http-response -> (listof string)
  ;; pid, conn, peak, keep, script-name, path-info, uri of a 200 /info answer
  (define (parse-info r)
    (check-equal? (http-response-status r) 200)
    (define m (regexp-match #rx"^pid=([0-9]+) conn=([0-9]+) peak=([0-9]+) keep=(#t|#f) script-name=(\"[^\"]*\") path-info=(\"[^\"]*\") uri=(\"[^\"]*\")\n$"
                            (http-response-body r)))
    (unless m (fail (format "unexpected answer ~s" (http-response-body r))))
    (map bytes->string/utf-8 (cdr m)))

  ;; proc-status-field : natural string -> string ; a line of /proc/PID/status, after the name
  (define (proc-status-field pid name)
    (define line (for/first ([l (in-list (file->lines (format "/proc/~a/status" pid)))]
                             #:when (string-prefix? l (string-append name ":")))
                   l))
    (string-trim (substring line (add1 (string-length name)))))

;; concurrent-info : natural natural -> (listof (listof string))
  ;; n requests at once, each from its own client connection, each held 1.5 s by the app
  (define (concurrent-info port n)
    (define results (make-vector n #f))
    (define threads
      (for/list ([i (in-range n)])
        (thread (λ ()
                  (vector-set! results i
                               (with-handlers ([exn:fail? exn-message])
                                 (http-request port "/app/info?sleep=1.5" #:timeout 30)))))))
    (for-each thread-wait threads)
    (for/list ([r (in-vector results)])
      (unless (http-response? r) (fail (format "request failed: ~a" r)))
      (parse-info r)))

  (define (run dir)
    (define-values (uid gid) (user-ids "haproxy"))
    (define port (car (free-ports 1)))
    (define-values (cfg run-dir) (haproxy-published-conf! dir (format "127.0.0.1:~a" port)))
    (define chroot (build-path dir "chroot"))
    (define sock (build-path run-dir "app.sock"))
    (define-values (code out err) (run-program haproxy (list "-c" "-f" (path->string cfg))))
    (unless (zero? code) (error 'haproxy-test "haproxy rejects the published file:\n~a~a" out err))
    (define app (start-app "app" deploy-app (string-append "unix:" (path->string sock))
                           #:dir dir #:args '("--socket-group" "haproxy")))
    (define hp (start-process "haproxy" haproxy (list "-f" (path->string cfg) "-db") #:dir dir))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app (string-append "unix:" (path->string sock)) app)
       (wait-for-tcp port 10)

       (test-case "HAProxy runs chrooted, as haproxy; the socket is 0660 root:haproxy"
         (check-equal? (resolve-path (format "/proc/~a/root" (proc-pid hp))) chroot)
         (check-equal? (car (string-split (proc-status-field (proc-pid hp) "Uid"))) (number->string uid))
         (check-equal? (car (string-split (proc-status-field (proc-pid hp) "Gid"))) (number->string gid))
         (define st (file-or-directory-stat sock))
         (check-equal? (bitwise-and (hash-ref st 'mode) #o777) #o660)
         (check-equal? (hash-ref st 'group-id) gid))

       (test-case "path-info: SCRIPT_NAME /app, PATH_INFO the rest"
         (define a (parse-info (http-request port "/app/info/x%20y?z=1")))
         (check-equal? (list-ref a 3) "#t" "FCGI_KEEP_CONN")
         (check-equal? (drop a 4) '("\"/app\"" "\"/info/x y\"" "\"/app/info/x%20y?z=1\"")))

       (test-case "a path with %0a is refused by HAProxy; the app keeps serving"
         (define r (http-request port (string-append "/app/x.php%0aabc?" (make-string 1800 #\Q))))
         (check-true (and (memv (http-response-status r) '(400 500)) #t)
                     (format "status ~a" (http-response-status r)))
         (check-false (http-response-header r "X-App-Host") "the app answered it")
         (parse-info (http-request port "/app/info")))

       (test-case "12 concurrent requests from 12 client connections: one at a time on a connection"
         (define answers (concurrent-info port 12))
         (define peak (apply max (map (λ (a) (string->number (caddr a))) answers)))
         (check-equal? peak 1 "the published file does not multiplex (HAProxy 2.6's IH 500s)"))

       (test-case "with the file's two multiplexing lines uncommented, requests are multiplexed"
         (define mpx (haproxy-multiplexing-on (file->string cfg)))
         (define mpx-port (car (free-ports 1)))
         (define mpx-cfg (build-path dir "haproxy-mpx.cfg"))
         (display-to-file (regexp-replace #rx"bind [^\n]*" mpx (format "bind 127.0.0.1:~a" mpx-port)) mpx-cfg)
         (define hp2 (start-process "haproxy-mpx" haproxy (list "-f" (path->string mpx-cfg) "-db") #:dir dir))
         (dynamic-wind
          void
          (λ ()
            (wait-for-tcp mpx-port 10)
            (define answers (concurrent-info mpx-port 12))
            (define conns (remove-duplicates (map (λ (a) (take a 2)) answers)))
            (define peak (apply max (map (λ (a) (string->number (caddr a))) answers)))
            (printf "haproxy-test: 12 requests over ~a FastCGI connections, at most ~a at once on one\n"
                    (length conns) peak)
            (check-true (< (length conns) 12) (format "12 requests took ~a connections" (length conns)))
            (check-true (>= peak 2) "no connection ever carried two requests at once"))
          (λ () (stop-process! hp2))))

       (test-case "HAProxy and the app logged no errors"
         (check-clean-log "haproxy" (proc-stderr-file hp) #rx"(?i:alert|emerg|\\[error\\])")
         (check-clean-log "app" (proc-stderr-file app) #rx" (error|fatal) ")))
     (λ ()
       (stop-process! hp)
       (stop-process! app))))

  (call-with-temp-dir "fcgi-haproxy" run))
