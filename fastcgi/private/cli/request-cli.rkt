#lang racket/base
;; `raco fastcgi request`: send a request (or a batch of them) to a FastCGI application and
;; print the answer; cgi-fcgi with HTTP-style options. Exit code: 0 for a status below 400,
;; 1 for 400 and above or a protocol status other than request-complete, 2 for usage and
;; connection errors (one line on stderr).
(require racket/cmdline
         racket/port
         (submod "../transport/client.rkt" private)
         "../transport/client.rkt"
         "../protocol/protocol.rkt")

(provide request-command)

(define program "raco fastcgi request")

;; The parsed command line. body, filter-data: #f, a path, or bytes (stdin, read once).
(struct options (address uri method headers body params role filter-data keep-conn?
                         get-values? repeat concurrent output timeout abort-after))

;; request-command : (vectorof string) -> none ; runs the command, then exits with its code
(define (request-command argv)
  (exit (with-handlers ([exn:fail? (λ (e) (report (exn-message e)) 2)])
          (run (parse-options argv)))))

;; report : string -> void ; the first line of a message on stderr, named by the program
(define (report msg)
  (define line (car (regexp-split #rx"\n" msg)))
  (eprintf "~a\n" (if (regexp-match? (regexp (string-append "^" program ": ")) line)
                      line
                      (string-append program ": " line))))

;; usage-error : string any ... -> none
(define (usage-error fmt . args)
  (raise-user-error (string->symbol program) (apply format fmt args)))

;; parse-options : (vectorof string) -> options
(define (parse-options argv)
  (define method* #f)
  (define headers '())
  (define body #f)
  (define params '())
  (define role* 'responder)
  (define filter-data #f)
  (define keep-conn? #t)
  (define get-values? #f)
  (define repeat #f)
  (define concurrent #f)
  (define output 'body)
  (define timeout* 30)
  (define abort-after #f)
  (define-values (address uri)
    (command-line
     #:program program
     #:argv argv
     #:once-each
     [("--method") method "HTTP method (default GET, or POST when a body is given)"
      (set! method* method)]
     #:multi
     [("-H" "--header") header "Add the request header \"Name: value\" (sent as HTTP_NAME)"
      (define m (regexp-match #rx"^([^: \t]+)[ \t]*:[ \t]*(.*)$" header))
      (unless m (usage-error "--header expects \"Name: value\", given ~s" header))
      (set! headers (append headers (list (cons (cadr m) (caddr m)))))]
     [("-p" "--param") name=value "Add or override the raw FastCGI param <name>"
      (define m (regexp-match #rx"^([^=]+)=(.*)$" name=value))
      (unless m (usage-error "--param expects NAME=VALUE, given ~s" name=value))
      (set! params (append params (list (cons (cadr m) (caddr m)))))]
     #:once-any
     [("-d" "--data-file") file "Send the body from <file> (- for stdin)"
      (set! body (if (equal? file "-") 'stdin (readable-file "--data-file" file)))]
     [("--stdin") "Send the body from stdin" (set! body 'stdin)]
     #:once-each
     [("--role") role "responder, authorizer or filter (default responder)"
      (set! role* (case role
                    [("responder" "authorizer" "filter") (string->symbol role)]
                    [else (usage-error "--role expects responder, authorizer or filter, given ~s"
                                       role)]))]
     [("--filter-data") file "Send <file> as the DATA stream (filter role)"
      (set! filter-data (readable-file "--filter-data" file))]
     [("--no-keep-conn") "Let the application close the connection after the reply"
      (set! keep-conn? #f)]
     [("--get-values") "Print FCGI_MAX_CONNS, FCGI_MAX_REQS, FCGI_MPXS_CONNS as NAME=VALUE"
      (set! get-values? #t)]
     [("--repeat") n "Send <n> requests on one connection, a summary line for each"
      (set! repeat (positive-integer "--repeat" n))]
     [("--concurrent") n "Keep up to <n> requests in flight, multiplexed (--repeat defaults to <n>)"
      (set! concurrent (positive-integer "--concurrent" n))]
     #:once-any
     [("--raw") "Print the CGI output as received, headers included" (set! output 'raw)]
     [("-i" "--include") "Print the status line and headers, then the body"
      (set! output 'include)]
     #:once-each
     [("--timeout") seconds "Seconds to wait to connect and for each reply (default 30)"
      (set! timeout* (positive-seconds "--timeout" seconds))]
     [("--abort-after") seconds
      "Send ABORT_REQUEST when no reply came within this many seconds, then wait for END_REQUEST"
      (set! abort-after (positive-seconds "--abort-after" seconds))]
     #:args (address [uri "/"])
     (values address uri)))
  (define total (or repeat concurrent 1))
  (when (and (not keep-conn?) (> total 1))
    (usage-error "--no-keep-conn cannot be combined with --repeat or --concurrent"))
  (when (and abort-after (> total 1))
    (usage-error "--abort-after cannot be combined with --repeat or --concurrent"))
  (options address uri (or method* (if body "POST" "GET")) headers
           (if (eq? body 'stdin) (port->bytes (current-input-port)) body)
           params role* filter-data keep-conn? get-values? total (min total (or concurrent 1))
           output timeout* abort-after))

;; readable-file : string string -> path ; a file that exists
(define (readable-file flag file)
  (unless (file-exists? file) (usage-error "~a: no such file ~s" flag file))
  (string->path file))

;; positive-integer : string string -> positive integer
(define (positive-integer flag s)
  (define n (string->number s))
  (unless (exact-positive-integer? n)
    (usage-error "~a expects a positive integer, given ~s" flag s))
  n)

;; positive-seconds : string string -> positive real
(define (positive-seconds flag s)
  (define n (string->number s))
  (unless (and (real? n) (positive? n))
    (usage-error "~a expects seconds, given ~s" flag s))
  n)

;; run : options -> natural ; the exit code
(define (run o)
  (define c (fastcgi-connect (options-address o) #:timeout (options-timeout o)))
  (dynamic-wind
   void
   (λ ()
     (cond
       [(options-get-values? o)
        (define names '("FCGI_MAX_CONNS" "FCGI_MAX_REQS" "FCGI_MPXS_CONNS"))
        (for ([p (in-list (fastcgi-get-values c names #:timeout (options-timeout o)))])
          (printf "~a=~a\n" (car p) (cdr p)))
        0]
       [(= 1 (options-repeat o)) (run-one c o)]
       [else (run-batch c o)]))
   (λ () (fcgi-client-close c))))

;; source-length : (or/c #f path bytes) -> natural
(define (source-length src)
  (cond [(not src) 0] [(bytes? src) (bytes-length src)] [else (file-size src)]))

;; call-evt : fcgi-client options -> (values evt (-> void))
;; Starts one request; the thunk closes the files it opened once the reply is in.
(define (call-evt c o)
  (define (open src) (if (path? src) (open-input-file src) (or src #"")))
  (define body (open (options-body o)))
  (define data (and (options-filter-data o) (open (options-filter-data o))))
  (define len (source-length (options-body o)))
  (define base (cgi-params (options-method o) (options-uri o) (options-headers o)
                           (and (> len 0) len) '()))
  (define params
    (append
     (case (options-role o)
       [(authorizer) (filter (λ (p) (not (member (car p) '("CONTENT_LENGTH" "PATH_INFO"
                                                            "PATH_TRANSLATED" "SCRIPT_NAME"))))
                             base)]
       [else base])
     (if data
         `(("FCGI_DATA_LENGTH" . ,(number->string (source-length (options-filter-data o))))
           ("FCGI_DATA_LAST_MOD" . ,(number->string (file-or-directory-modify-seconds
                                                      (options-filter-data o)))))
         '())))
  (values (fastcgi-call-evt c #:params (override-params params (options-params o))
                            #:stdin body #:data data #:role (options-role o)
                            #:keep-conn? (options-keep-conn? o) #:timeout (options-timeout o)
                            #:id (and (options-abort-after o) 1))
          (λ () (for ([p (list body data)] #:when (input-port? p)) (close-input-port p)))))

;; run-one : fcgi-client options -> natural
(define (run-one c o)
  (define-values (evt close!) (call-evt c o))
  (define after (options-abort-after o))
  (define aborted? #f)
  (define r
    (dynamic-wind
     void
     (λ ()
       (or (and after (sync/timeout after evt))
           (begin
             (when after
               (set! aborted? #t)
               (fastcgi-abort c 1)
               (report (format "no reply within ~a s: sent ABORT_REQUEST" after)))
             (sync evt))))
     close!))
  (define err (fcgi-reply-stderr r))
  (write-bytes err (current-error-port))
  (unless (or (zero? (bytes-length err)) (regexp-match? #rx#"\n$" err))
    (newline (current-error-port)))
  (define out (fcgi-reply-stdout r))
  (define ps (fcgi-reply-protocol-status r))
  (define status
    (with-handlers ([exn:fail:fastcgi:protocol?
                     (λ (e) (when (eq? (options-output o) 'raw) (write-bytes out))
                       (report (exn-message e))
                       #f)])
      (define-values (status headers body) (parse-cgi-response out))
      (case (options-output o)
        [(raw) (write-bytes out)]
        [(include) (print-head status headers) (write-bytes body)]
        [else (write-bytes body)])
      status))
  (unless (eq? ps 'request-complete) (report (format "the application answered ~a" ps)))
  (if (and status (< status 400) (eq? ps 'request-complete) (not aborted?)) 0 1))

;; print-head : natural (listof (cons string string)) -> void ; like curl -i
(define (print-head status headers)
  (define status-h (assf (λ (n) (string-ci=? n "Status")) headers))
  (define reason (cond [status-h (regexp-replace #rx"^[0-9]+ ?" (cdr status-h) "")]
                       [(= status 302) "Found"]
                       [else "OK"]))
  (printf "HTTP/1.1 ~a ~a\r\n" status reason)
  (for ([h (in-list headers)] #:unless (eq? h status-h))
    (printf "~a: ~a\r\n" (car h) (cdr h)))
  (printf "\r\n"))

;; run-batch : fcgi-client options -> natural
;; repeat requests, at most concurrent in flight; one summary line each as it completes.
(define (run-batch c o)
  (define results (make-channel))
  (define (start! n)
    (define t0 (current-inexact-monotonic-milliseconds))
    (define (finish r)
      (channel-put results (list n r (- (current-inexact-monotonic-milliseconds) t0))))
    (with-handlers ([exn:fail? (λ (e) (thread (λ () (finish e))))])
      (define-values (evt close!) (call-evt c o))
      (thread (λ () (finish (with-handlers ([exn:fail? values])
                              (dynamic-wind void (λ () (sync evt)) close!)))))))
  (define total (options-repeat o))
  (for ([n (in-range (options-concurrent o))]) (start! n))
  (for/fold ([code 0]) ([_ (in-range total)] [next (in-naturals (options-concurrent o))])
    (define-values (n r ms) (apply values (sync results)))
    (when (< next total) (start! next))
    (max code (summarize (add1 n) r ms))))

;; summarize : natural (or/c fcgi-reply exn) real -> natural ; prints the line, returns a code
(define (summarize n r ms)
  (cond
    [(exn? r)
     (printf "~a error ~a\n" n (car (regexp-split #rx"\n" (exn-message r))))
     1]
    [else
     (define status (with-handlers ([exn:fail:fastcgi:protocol? (λ (_) #f)])
                      (define-values (status _h _b) (parse-cgi-response (fcgi-reply-stdout r)))
                      status))
     (printf "~a id=~a status=~a protocol=~a stdout=~a stderr=~a time=~ams\n"
             n (fcgi-reply-id r) (or status "malformed") (fcgi-reply-protocol-status r)
             (bytes-length (fcgi-reply-stdout r)) (bytes-length (fcgi-reply-stderr r))
             (/ (round (* 10 ms)) 10.0))
     (if (and status (< status 400) (eq? (fcgi-reply-protocol-status r) 'request-complete)) 0 1)]))

(module+ main
  (request-command (current-command-line-arguments)))
