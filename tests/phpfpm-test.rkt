#lang racket/base
;; The client and `raco fastcgi request` against a real php-fpm, started here with its own
;; configuration in a temp dir and stopped at the end, also when a test fails or on exit.
(require compiler/find-exe
         racket/file
         racket/port
         racket/runtime-path
         rackunit
         "../fastcgi/client.rkt")

(define-runtime-path cli "../fastcgi/private/cli/request-cli.rkt")
;; Debian 12's php8.2-fpm (the Makefile installs it), or the php-fpm of the Debian the
;; suite runs on (tools/test-in-chroot.sh installs it: sid's is another version)
(define php-fpm
  (or (for/first ([f (in-list (sort (map path->string (directory-list "/usr/sbin")) string>?))]
                  #:when (regexp-match? #rx"^php-fpm[0-9.]+$" f))
        (string-append "/usr/sbin/" f))
      (raise-user-error 'phpfpm-test "/usr/sbin/php-fpmVERSION is missing: install php8.2-fpm (the Makefile does)")))

(define dir (make-temporary-file "fcgi-phpfpm-test-~a" 'directory))
(define sock (path->string (build-path dir "php.sock")))
(define address (string-append "unix:" sock))
(define script (path->string (build-path dir "echo.php")))
(define script-param `(("SCRIPT_FILENAME" . ,script)))

(with-output-to-file (build-path dir "fpm.conf")
  (λ ()
    (printf "[global]\npid = ~a/fpm.pid\nerror_log = ~a/error.log\ndaemonize = no\n" dir dir)
    (printf "[www]\nlisten = ~a\npm = static\npm.max_children = 2\n" sock)))
(with-output-to-file script
  (λ ()
    (display "<?php\nheader('Content-Type: text/plain');\n")
    (display "echo 'method=', $_SERVER['REQUEST_METHOD'], \"\\n\";\n")
    (display "echo 'q=', $_GET['q'] ?? '', \"\\n\";\n")
    (display "echo 'len=', strlen(file_get_contents('php://input')), \"\\n\";\n")
    (display "echo 'x-test=', $_SERVER['HTTP_X_TEST'] ?? '', \"\\n\";\n")))

;; start-php-fpm : -> subprocess ; in its own process group; ready once the socket answers
(define (start-php-fpm)
  (define log (open-output-file (build-path dir "stdout.log")))
  (define-values (p _out in _err)
    (subprocess log #f 'stdout 'new php-fpm "-n" "-R" "-F" "-y"
                (path->string (build-path dir "fpm.conf"))))
  (close-output-port log)
  (close-output-port in)
  (let wait ([tries 200])
    (cond
      [(with-handlers ([exn:fail? (λ (_) #f)])
         (fcgi-client-close (fastcgi-connect address #:timeout 1))
         #t)
       p]
      [(or (zero? tries) (not (eq? (subprocess-status p) 'running)))
       (stop! p)
       (error 'phpfpm-test "php-fpm did not start:\n~a"
              (file->string (build-path dir (if (file-exists? (build-path dir "error.log"))
                                                "error.log"
                                                "stdout.log"))))]
      [else (sleep 0.05) (wait (sub1 tries))])))

;; stop! : subprocess -> void ; SIGINT to the group (the master stops its workers), or SIGKILL
(define (stop! p)
  (when (eq? (subprocess-status p) 'running)
    (subprocess-kill p #f)
    (unless (sync/timeout 5 p) (subprocess-kill p #t))))

;; run-cli : string ... -> (list natural string string) ; exit code, stdout, stderr
(define (run-cli . args)
  (define-values (p out in err) (apply subprocess #f #f #f (find-exe) cli args))
  (close-output-port in)
  (define-values (stdout stderr) (values (open-output-string) (open-output-string)))
  (define copiers (list (thread (λ () (copy-port out stdout)))
                        (thread (λ () (copy-port err stderr)))))
  (unless (sync/timeout 20 p) (subprocess-kill p #t))
  (for ([t copiers]) (sync/timeout 5 t))
  (close-input-port out)
  (close-input-port err)
  (list (subprocess-status p) (get-output-string stdout) (get-output-string stderr)))

(define fpm #f)
(define plumber-handle
  (plumber-add-flush! (current-plumber) (λ (_) (when fpm (stop! fpm)))))

(dynamic-wind
 (λ () (set! fpm (start-php-fpm)))
 (λ ()
   (test-case "GET with a query string and a header"
     (define-values (status headers body)
       (fastcgi-request address #:uri "/echo.php?q=hello%20world&x=1"
                        #:headers '(("X-Test" . "yes")) #:params-extra script-param))
     (check-equal? status 200)
     (check-equal? (cdr (assoc "Content-type" headers)) "text/plain;charset=UTF-8")
     (check-equal? body #"method=GET\nq=hello world\nlen=0\nx-test=yes\n"))

   (test-case "POST of a 1 MiB body"
     (define-values (status _headers body)
       (fastcgi-request address #:method "POST" #:uri "/echo.php"
                        #:headers '(("Content-Type" . "application/octet-stream"))
                        #:body (open-input-bytes (make-bytes (* 1024 1024) 97))
                        #:content-length (* 1024 1024) #:params-extra script-param))
     (check-equal? status 200)
     (check-equal? body #"method=POST\nq=\nlen=1048576\nx-test=\n"))

   (test-case "a missing script is a 404"
     (define c (fastcgi-connect address))
     (define missing (path->string (build-path dir "no.php")))
     (define r (fastcgi-call c #:params `(("SCRIPT_FILENAME" . ,missing)
                                          ("REQUEST_METHOD" . "GET"))))
     (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout r)))
     (check-equal? (list status (cdr (assoc "Status" headers)) body)
                   '(404 "404 Not Found" #"File not found.\n"))
     (check-equal? (fcgi-reply-stderr r) #"Primary script unknown")
     (check-equal? (fcgi-reply-protocol-status r) 'request-complete)
     (fcgi-client-close c))

   ;; php-fpm 8.2.35 keeps the connection after GET_VALUES (older versions closed it).
   (test-case "GET_VALUES: php-fpm answers FCGI_MPXS_CONNS 0 only, and the connection lives on"
     (define c (fastcgi-connect address))
     (check-equal? (fastcgi-get-values c '("FCGI_MAX_CONNS" "FCGI_MAX_REQS" "FCGI_MPXS_CONNS"))
                   '(("FCGI_MPXS_CONNS" . "0")))
     (check-equal? (fcgi-reply-protocol-status
                    (fastcgi-call c #:params (cons '("REQUEST_METHOD" . "GET") script-param)))
                   'request-complete)
     (fcgi-client-close c))

   (test-case "two sequential requests on one kept connection"
     (define c (fastcgi-connect address))
     (define params (append script-param '(("REQUEST_METHOD" . "GET") ("QUERY_STRING" . "q=1"))))
     (define r1 (fastcgi-call c #:params params))
     (define r2 (fastcgi-call c #:params params))
     (for ([r (list r1 r2)])
       (define-values (status _h body) (parse-cgi-response (fcgi-reply-stdout r)))
       (check-equal? (list (fcgi-reply-id r) status body)
                     '(1 200 #"method=GET\nq=1\nlen=0\nx-test=\n")))
     (fcgi-client-close c))

   (test-case "the command line: a GET, -i on a 404, get-values, --repeat, a dead socket"
     (check-equal? (run-cli "-p" (string-append "SCRIPT_FILENAME=" script) "-H" "X-Test: cli"
                            address "/echo.php?q=cli")
                   '(0 "method=GET\nq=cli\nlen=0\nx-test=cli\n" ""))
     (define not-found (run-cli "-i" "-p" (format "SCRIPT_FILENAME=~a/no.php" dir) address "/no"))
     (check-equal? (car not-found) 1)
     (check-regexp-match #rx"^HTTP/1.1 404 Not Found\r\n.*\r\n\r\nFile not found.\n$"
                         (cadr not-found))
     (check-equal? (caddr not-found) "Primary script unknown\n")
     (check-equal? (run-cli "--get-values" address) '(0 "FCGI_MPXS_CONNS=0\n" ""))
     (define batch (run-cli "--repeat" "3" "-p" (string-append "SCRIPT_FILENAME=" script)
                            address "/echo.php"))
     (check-equal? (car batch) 0)
     (check-equal? (length (regexp-match* #rx"(?m:^[123] id=1 status=200 protocol=request-complete )"
                                          (cadr batch)))
                   3)
     (define dead (path->string (build-path dir "dead.sock")))
     (check-equal? (run-cli (string-append "unix:" dead) "/")
                   (list 2 "" (format "raco fastcgi request: cannot connect to unix:~a: ~a\n"
                                      dead "No such file or directory")))))
 (λ ()
   (stop! fpm)
   (plumber-flush-handle-remove! plumber-handle)
   (delete-directory/files dir)))
