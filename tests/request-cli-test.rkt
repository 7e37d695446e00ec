#lang racket/base
;; request-cli.rkt: `raco fastcgi request`'s arguments parsed into its options, the head
;; it prints for -i and the summary line of a batch, by tables in this process; and
;; --abort-after for real against `raco fastcgi serve`. Requests and their answers for
;; real: client-test (the client it uses), phpfpm-test.
(require racket/file
         racket/port
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")
(require/expose "../fastcgi/private/cli/request-cli.rkt"
                (parse-options print-head summarize
                 options-address options-uri options-method options-headers options-body
                 options-params options-role options-filter-data options-keep-conn?
                 options-get-values? options-repeat options-concurrent options-output
                 options-timeout options-abort-after))

;; parse : string ... -> options ; stdin is "BODY"
(define (parse . args)
  (parameterize ([current-input-port (open-input-string "BODY")])
    (parse-options (list->vector args))))

(define (refusal . args) (with-handlers ([exn:fail? exn-message]) (apply parse args) #f))

(test-case "the defaults: GET of / on the address, one request, the body printed, 30 s"
  (define o (parse "unix:/run/app.sock"))
  (for ([get (list options-address options-uri options-method options-headers options-body
                   options-params options-role options-filter-data options-keep-conn?
                   options-get-values? options-repeat options-concurrent options-output
                   options-timeout options-abort-after)]
        [want (list "unix:/run/app.sock" "/" "GET" '() #f '() 'responder #f #t #f 1 1 'body 30 #f)])
    (check-equal? (get o) want (format "~a" (object-name get)))))

(test-case "each option reaches its field"
  (call-with-temp-dir
   "fcgi-rcli"
   (λ (dir)
     (define body (path->string (build-path dir "body")))
     (display-to-file "x" body)
     ;; args (before the address) -> accessor -> value
     (define table
       (list (list '("--method" "PUT") options-method "PUT")
             (list (list "-d" body) options-method "POST")
             (list (list "--data-file" body) options-body (string->path body))
             (list '("--stdin") options-body #"BODY")
             (list '("-d" "-") options-body #"BODY")
             (list '("-H" "X-A: 1" "--header" "Accept:text/html") options-headers
                   '(("X-A" . "1") ("Accept" . "text/html")))
             (list '("-p" "A=1" "--param" "B=x=y") options-params '(("A" . "1") ("B" . "x=y")))
             (list '("--role" "authorizer") options-role 'authorizer)
             (list (list "--role" "filter" "--filter-data" body) options-filter-data (string->path body))
             (list '("--no-keep-conn") options-keep-conn? #f)
             (list '("--get-values") options-get-values? #t)
             (list '("--repeat" "5") options-repeat 5)
             (list '("--repeat" "5") options-concurrent 1)
             (list '("--concurrent" "3") options-repeat 3)
             (list '("--concurrent" "3" "--repeat" "10") options-concurrent 3)
             (list '("--concurrent" "30" "--repeat" "10") options-concurrent 10)
             (list '("--raw") options-output 'raw)
             (list '("-i") options-output 'include)
             (list '("--timeout" "2.5") options-timeout 2.5)
             (list '("--abort-after" "1") options-abort-after 1)))
     (for ([row (in-list table)])
       (check-equal? ((cadr row) (apply parse (append (car row) '("127.0.0.1:9000" "/x"))))
                     (caddr row) (format "~s" (car row))))
     (check-equal? (options-uri (parse "127.0.0.1:9000" "/x?y=1")) "/x?y=1"))))

(test-case "refused: malformed values and options that cannot go together"
  (define table
    '((("--header" "no colon") "--header expects \"Name: value\", given \"no colon\"")
      (("--param" "noequals") "--param expects NAME=VALUE, given \"noequals\"")
      (("--data-file" "/nonexistent/body") "--data-file: no such file \"/nonexistent/body\"")
      (("--role" "boss") "--role expects responder, authorizer or filter, given \"boss\"")
      (("--repeat" "0") "--repeat expects a positive integer, given \"0\"")
      (("--concurrent" "x") "--concurrent expects a positive integer, given \"x\"")
      (("--timeout" "-1") "--timeout expects seconds, given \"-1\"")
      (("--abort-after" "0") "--abort-after expects seconds, given \"0\"")
      (("--no-keep-conn" "--repeat" "2") "--no-keep-conn cannot be combined with --repeat or --concurrent")
      (("--abort-after" "1" "--concurrent" "2") "--abort-after cannot be combined with --repeat or --concurrent")))
  (for ([row (in-list table)])
    (check-equal? (apply refusal (append (car row) '("127.0.0.1:9000")))
                  (string-append "raco fastcgi request: " (cadr row))
                  (format "~s" (car row))))
  (check-regexp-match #rx"expects" (refusal) "no address"))

(test-case "print-head: like curl -i, the reason from Status: or the usual one"
  (define (head status headers) (with-output-to-string (λ () (print-head status headers))))
  (check-equal? (head 200 '(("Content-Type" . "text/plain")))
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
  (check-equal? (head 404 '(("Status" . "404 Not Here") ("X" . "1")))
                "HTTP/1.1 404 Not Here\r\nX: 1\r\n\r\n")
  (check-equal? (head 302 '(("Location" . "/a"))) "HTTP/1.1 302 Found\r\nLocation: /a\r\n\r\n"))

(test-case "summarize: one line per request of a batch, and its exit code"
  (define (line n r) (let* ([code #f]
                            [out (with-output-to-string (λ () (set! code (summarize n r 12.34))))])
                       (list code out)))
  (check-equal? (line 1 (fcgi-reply 7 #"Status: 201 Created\r\n\r\nok" #"w" 0 'request-complete))
                '(0 "1 id=7 status=201 protocol=request-complete stdout=25 stderr=1 time=12.3ms\n"))
  (check-equal? (car (line 2 (fcgi-reply 1 #"Status: 500 Oops\r\n\r\n" #"" 0 'request-complete))) 1)
  (check-equal? (line 3 (fcgi-reply 1 #"no head" #"" 0 'overloaded))
                '(1 "3 id=1 status=malformed protocol=overloaded stdout=7 stderr=0 time=12.3ms\n"))
  (check-equal? (line 4 (exn:fail "refused\nmore" (current-continuation-marks)))
                '(1 "4 error refused\n")))

(test-case "raco fastcgi request --abort-after: ABORT_REQUEST reaches the handler, END_REQUEST ends the call"
  (call-with-temp-dir
   "fcgi-rcli"
   (λ (dir)
     (define raw (path->string (build-path dir "abort-app.rkt")))
     (define mark (path->string (build-path dir "aborted.txt")))
     (call-with-output-file raw #:exists 'truncate
       (λ (o)
         (write (quasiquote
                 (module abort-app racket/base
                   (require fastcgi)
                   (provide fastcgi-handler)
                   (define (fastcgi-handler r)
                     (sync (fastcgi-request-abort-evt r))
                     (call-with-output-file ,mark (λ (o) (write-string "abort seen" o)) #:exists 'truncate))))
                o)))
     (define sock (path->string (build-path dir "abort.sock")))
     (define p (start-process "serve" raco (list "fastcgi" "serve" raw "--listen" (string-append "unix:" sock))
                              #:dir dir))
     (wait-for-unix-socket sock 30)
     (define q (start-process "request" raco (list "fastcgi" "request" "--abort-after" "0.5"
                                                   (string-append "unix:" sock) "/")
                              #:dir dir))
     (define qp (proc-subprocess q))
     (check-equal? (sync/timeout 20 qp) qp)
     (check-equal? (subprocess-status qp) 1 "an aborted request exits 1")
     (check-regexp-match #rx"sent ABORT_REQUEST" (file->string (proc-stderr-file q)))
     (sleep 0.3)
     (check-equal? (file->string mark) "abort seen")
     (define sp (proc-subprocess p))
     (subprocess-kill sp #f)
     (check-equal? (sync/timeout 30 sp) sp "server did not exit on SIGTERM")
     (check-equal? (subprocess-status sp) 0 "graceful stop exits 0")
     (void (stop-process! p)))))
