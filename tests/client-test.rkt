#lang racket/base
;; The client against a tiny FastCGI server written here, on a unix socket in a temp dir.
;; The server's behaviour is picked per request by the MODE param:
;;   echo (default): the params and the stdin length; also a stray record for id 999
;;   pair: held until two pair requests are in, then their STDOUT records interleaved
;;   hang: no answer until ABORT_REQUEST, then END_REQUEST with app status 99
;;   eof:  the connection is closed without an answer
(require racket/file
         racket/string
         racket/unix-socket
         rackunit
         (submod "../fastcgi/private/transport/client.rkt" private)
         "../fastcgi/client.rkt"
         "../fastcgi/private/protocol/protocol.rkt")

;; -- parse-cgi-response --------------------------------------------------------------------
(for ([row (in-list
            `((#"Content-Type: text/plain\r\n\r\nhi" 200 (("Content-Type" . "text/plain")) #"hi")
              (#"Status: 404 Not Found\nX-A:  b \n\nnope\n\nmore"
               404 (("Status" . "404 Not Found") ("X-A" . "b")) #"nope\n\nmore")
              (#"Location: /x\r\n\r\n" 302 (("Location" . "/x")) #"")
              (#"Status: 301\r\nLocation: /y\r\n\r\n"
               301 (("Status" . "301") ("Location" . "/y")) #"")
              (#"status: 503 Busy\n\n" 503 (("status" . "503 Busy")) #"")
              (#"X-Only: 1\n" 200 (("X-Only" . "1")) #"")
              (#"" 200 () #"")
              (#"\r\nbody" 200 () #"body")))])
  (define-values (status headers body) (parse-cgi-response (car row)))
  (check-equal? (list status headers body) (cdr row) (format "~s" (car row))))
(for ([bad (in-list '(#"just text" #"Status: abc\n\n" #": empty name\n\n"))])
  (check-exn exn:fail:fastcgi:protocol? (λ () (parse-cgi-response bad)) (format "~s" bad)))

;; -- the params a front sends ---------------------------------------------------------------
(let ([ps (cgi-params "POST" "/a%20b/c?x=1#frag"
                      '(("Host" . "example.org:8080") ("Content-Type" . "text/plain")
                        ("X-Forwarded-For" . "10.0.0.1"))
                      5 '(("SERVER_PORT" . "9") ("EXTRA" . "e")))])
  (for ([expected (in-list '(("REQUEST_URI" . "/a%20b/c?x=1#frag") ("PATH_INFO" . #"/a b/c")
                             ("QUERY_STRING" . "x=1") ("SERVER_NAME" . "example.org")
                             ("SERVER_PORT" . "9") ("CONTENT_LENGTH" . "5")
                             ("CONTENT_TYPE" . "text/plain") ("HTTP_HOST" . "example.org:8080")
                             ("HTTP_X_FORWARDED_FOR" . "10.0.0.1") ("EXTRA" . "e")))])
    (check-equal? (assoc (car expected) ps) expected))
  (check-false (assoc "HTTP_CONTENT_TYPE" ps)))

;; -- the test server ------------------------------------------------------------------------
(define known-values '((#"FCGI_MAX_REQS" . #"7") (#"FCGI_MPXS_CONNS" . #"1")))

;; serve : input-port output-port -> void ; one connection, until EOF, MODE=eof or no KEEP_CONN
(define (serve in out)
  (define d (make-decoder))
  (define params (make-hasheqv))  ; id -> params bytes so far
  (define stdin (make-hasheqv))   ; id -> stdin length so far
  (define keep (make-hasheqv))    ; id -> keep-conn?
  (define held '())               ; pair requests waiting for their partner
  (define (end! id status)
    (write-record 'stdout id #"" out)
    (write-record 'end-request id (end-request-content status 'request-complete) out))
  (define (echo id ps)
    (define lines (for/list ([p ps]) (bytes-append (car p) #"=" (cdr p) #"\n")))
    (write-record 'stdout 999 #"stray" out)
    (write-record 'stderr id #"warn" out)
    (write-stream 'stdout id
                  (bytes-append #"Content-Type: text/plain\n\n"
                                (string->bytes/utf-8 (format "ID=~a\n" id))
                                (apply bytes-append lines)
                                (string->bytes/utf-8 (format "STDIN=~a\n" (hash-ref stdin id))))
                  out #:end? #f)
    (end! id 0))
  (define (pair id)
    (set! held (cons id held))
    (when (= 2 (length held))
      (define ids (reverse held))
      (set! held '())
      (for* ([part '(1 2)] [i ids])
        (write-record 'stdout i (string->bytes/utf-8 (format "~a:~a," i part)) out))
      (for ([i (reverse ids)]) (end! i 0))))
  ;; handle! : record (-> none) -> void ; stop ends the connection
  (define (handle! r stop)
    (define id (record-id r))
    (define c (record-content r))
    (case (record-type r)
      [(begin-request)
       (define-values (_role keep-conn?) (parse-begin-request c))
       (hash-set! keep id keep-conn?)
       (hash-set! params id #"")
       (hash-set! stdin id 0)]
      [(params) (hash-update! params id (λ (b) (bytes-append b c)))]
      [(stdin)
       (cond
         [(positive? (bytes-length c)) (hash-update! stdin id (λ (n) (+ n (bytes-length c))))]
         [else
          (define ps (parse-pairs (hash-ref params id)))
          (case (cond [(assoc #"MODE" ps) => cdr] [else #"echo"])
            [(#"echo") (echo id ps) (unless (hash-ref keep id) (stop))]
            [(#"pair") (pair id)]
            [(#"eof") (stop)])])]
      [(abort-request) (end! id 99)]
      [(get-values)
       (define asked (map car (parse-pairs c)))
       (write-record 'get-values-result 0
                     (pairs->bytes (filter (λ (k) (member (car k) asked)) known-values))
                     out)])
    (flush-output out))
  (let/ec stop
    (let loop ()
      (unless (eof-object? (decoder-read! d in))
        (let drain ()
          (define r (decoder-next! d))
          (when r (handle! r stop) (drain)))
        (loop))))
  (close-output-port out)
  (close-input-port in))

(define dir (make-temporary-file "fcgi-client-test-~a" 'directory))
(define sock (path->string (build-path dir "s.sock")))
(define address (string-append "unix:" sock))
(define server-cust (make-custodian))

(dynamic-wind
 void
 (λ ()
   (parameterize ([current-custodian server-cust])
     (define listener (unix-socket-listen sock))
     (thread (λ () (let loop ()
                     (define-values (in out) (unix-socket-accept listener))
                     (thread (λ () (serve in out)))
                     (loop)))))

   (test-case "echo: params as list and hash, a streamed port body, stderr, a stray id"
     (define c (fastcgi-connect address))
     (define big (make-bytes 200000 120))
     (define r (fastcgi-call c #:params '(("A" . "1") (#"B" . #"two"))
                             #:stdin (open-input-bytes big)))
     (check-equal? (fcgi-reply-id r) 1)
     (check-equal? (fcgi-reply-stdout r)
                   #"Content-Type: text/plain\n\nID=1\nA=1\nB=two\nSTDIN=200000\n")
     (check-equal? (fcgi-reply-stderr r) #"warn")
     (check-equal? (list (fcgi-reply-app-status r) (fcgi-reply-protocol-status r))
                   '(0 request-complete))
     (define r2 (fastcgi-call c #:params (hash "Z" "z" "Y" "y") #:id 42))
     (check-equal? (fcgi-reply-stdout r2) #"Content-Type: text/plain\n\nID=42\nY=y\nZ=z\nSTDIN=0\n")
     (fcgi-client-close c))

   (test-case "multiplexing: two requests on one connection, interleaved answers"
     (define c (fastcgi-connect address))
     (define e1 (fastcgi-call-evt c #:params '(("MODE" . "pair"))))
     (define e2 (fastcgi-call-evt c #:params '(("MODE" . "pair"))))
     (check-exn #rx"already in flight" (λ () (fastcgi-call c #:params '() #:id 2)))
     (define r2 (sync e2))
     (define r1 (sync e1))
     (check-equal? (map fcgi-reply-id (list r1 r2)) '(1 2))
     (check-equal? (fcgi-reply-stdout r1) #"1:1,1:2,")
     (check-equal? (fcgi-reply-stdout r2) #"2:1,2:2,")
     (check-equal? (fcgi-reply-id (fastcgi-call c #:params '())) 1 "the lowest free id again")
     (fcgi-client-close c))

   (test-case "get-values: the known names, on id 0"
     (define c (fastcgi-connect address))
     (check-equal? (fastcgi-get-values c '("FCGI_MPXS_CONNS" "NOPE" "FCGI_MAX_REQS"))
                   '(("FCGI_MAX_REQS" . "7") ("FCGI_MPXS_CONNS" . "1")))
     (fcgi-client-close c))

   (test-case "abort, send-raw and timeout"
     (define c (fastcgi-connect address))
     (define e (fastcgi-call-evt c #:params '(("MODE" . "hang"))))
     (check-false (sync/timeout 0.1 e))
     (fastcgi-abort c 1)
     (check-equal? (fcgi-reply-app-status (sync/timeout 5 e)) 99)
     (define e3 (fastcgi-call-evt c #:params '(("MODE" . "hang")) #:id 3))
     (fastcgi-send-raw c (record->bytes 'abort-request 3 #""))
     (check-equal? (fcgi-reply-app-status (sync/timeout 5 e3)) 99)
     (check-exn #rx"no answer within the 0.2 s timeout"
                (λ () (fastcgi-call c #:params '(("MODE" . "hang")) #:timeout 0.2)))
     (fcgi-client-close c))

   (test-case "keep-conn off: the server closes after the reply, no error"
     (define c (fastcgi-connect address))
     (check-equal? (fcgi-reply-protocol-status (fastcgi-call c #:params '() #:keep-conn? #f))
                   'request-complete)
     (check-exn #rx"connection to .* is closed"
                (λ () (sync/timeout 5 (fastcgi-call-evt c #:params '()))))
     (fcgi-client-close c))

   (test-case "EOF before END_REQUEST fails every pending call"
     (define c (fastcgi-connect address))
     (define hang (fastcgi-call-evt c #:params '(("MODE" . "hang"))))
     (check-exn #rx"connection closed before END_REQUEST for request id 2"
                (λ () (fastcgi-call c #:params '(("MODE" . "eof")))))
     (check-exn #rx"connection closed before END_REQUEST for request id 1"
                (λ () (sync/timeout 5 hang)))
     (fcgi-client-close c))

   (test-case "connect errors"
     (check-exn #rx"cannot connect to unix:/nonexistent/x.sock: No such file or directory"
                (λ () (fastcgi-connect "unix:/nonexistent/x.sock")))
     (check-exn #rx"cannot connect to nonsense: bad address" (λ () (fastcgi-connect "nonsense")))
     (check-exn exn:fail:fastcgi? (λ () (fastcgi-connect "127.0.0.1:1")))))
 (λ ()
   (custodian-shutdown-all server-cust)
   (delete-directory/files dir)))
