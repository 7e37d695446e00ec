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
         "../fastcgi/client.rkt"
         "../fastcgi/private/protocol.rkt")

;; -- parse-cgi-response --------------------------------------------------------------------
(for ([row (in-list
            `((#"Content-Type: text/plain\r\n\r\nhi" 200 (("Content-Type" . "text/plain")) #"hi")
              (#"Status: 404 Not Found\nX-A:  b \n\nnope\n\nmore"
               404 (("Status" . "404 Not Found") ("X-A" . "b")) #"nope\n\nmore")
              (#"Location: /x\r\n\r\n" 302 (("Location" . "/x")) #"")
              (#"Status: 301\r\nLocation: /y\r\n\r\n" 301 (("Status" . "301") ("Location" . "/y")) #"")
              (#"status: 503 Busy\n\n" 503 (("status" . "503 Busy")) #"")
              (#"X-Only: 1\n" 200 (("X-Only" . "1")) #"")
              (#"" 200 () #"")
              (#"\r\nbody" 200 () #"body")))])
  (define-values (status headers body) (parse-cgi-response (car row)))
  (check-equal? (list status headers body) (cdr row) (format "~s" (car row))))
(for ([bad (in-list '(#"just text" #"Status: abc\n\n" #": empty name\n\n"))])
  (check-exn exn:fail:fastcgi:protocol? (λ () (parse-cgi-response bad)) (format "~s" bad)))

;; -- the test server ------------------------------------------------------------------------
;; serve : input-port output-port -> void ; one connection, until EOF or MODE=eof
(define (serve in out)
  (define d (make-decoder))
  (define params (make-hasheqv))  ; id -> params bytes so far
  (define stdin (make-hasheqv))   ; id -> stdin length so far
  (define keep (make-hasheqv))    ; id -> keep-conn?
  (define held '())               ; pair requests waiting for their partner
  (define (end! id status)
    (write-record 'stdout id #"" out)
    (write-record 'end-request id (end-request-content status 'request-complete) out))
  (define (answer! id ps)
    (define mode (cond [(assoc #"MODE" ps) => cdr] [else #"echo"]))
    (case mode
      [(#"echo")
       (write-record 'stdout 999 #"stray" out)
       (write-record 'stderr id #"warn" out)
       (write-stream 'stdout id
                     (bytes-append #"Content-Type: text/plain\n\n"
                                   (string->bytes/utf-8 (format "ID=~a\n" id))
                                   (apply bytes-append
                                          (for/list ([p ps]) (bytes-append (car p) #"=" (cdr p) #"\n")))
                                   (string->bytes/utf-8 (format "STDIN=~a\n" (hash-ref stdin id))))
                     out #:end? #f)
       (end! id 0)]
      [(#"pair")
       (set! held (cons id held))
       (when (= 2 (length held))
         (define ids (reverse held))
         (set! held '())
         (for* ([part '(1 2)] [i ids])
           (write-record 'stdout i (string->bytes/utf-8 (format "~a:~a," i part)) out))
         (for ([i (reverse ids)]) (end! i 0)))]
      [(#"eof") (close-output-port out)])
    (unless (port-closed? out) (flush-output out))
    (not (or (port-closed? out) (and (eq? mode #"echo") (not (hash-ref keep id))))))
  (let loop ()
    (unless (eof-object? (decoder-read! d in))
      (define continue?
        (let drain ()
          (define r (decoder-next! d))
          (cond
            [(not r) #t]
            [else
             (define id (record-id r))
             (define c (record-content r))
             (define go?
               (case (record-type r)
                 [(begin-request)
                  (define-values (role keep-conn?) (parse-begin-request c))
                  (hash-set! keep id keep-conn?)
                  (hash-set! params id #"")
                  (hash-set! stdin id 0)
                  #t]
                 [(params) (hash-update! params id (λ (b) (bytes-append b c))) #t]
                 [(stdin)
                  (cond [(positive? (bytes-length c)) (hash-update! stdin id (λ (n) (+ n (bytes-length c)))) #t]
                        [else (answer! id (parse-pairs (hash-ref params id)))])]
                 [(abort-request) (end! id 99) (flush-output out) #t]
                 [(get-values)
                  (define known '((#"FCGI_MAX_REQS" . #"7") (#"FCGI_MPXS_CONNS" . #"1")))
                  (write-record 'get-values-result 0
                                (pairs->bytes (for*/list ([p (parse-pairs c)] [k (in-value (assoc (car p) known))] #:when k) k))
                                out)
                  (flush-output out)
                  #t]
                 [else #t]))
             (and go? (drain))])))
      (when continue? (loop))))
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
     (define r (fastcgi-call c #:params `(("A" . "1") (#"B" . #"two")) #:stdin (open-input-bytes big)))
     (check-equal? (fcgi-reply-id r) 1)
     (check-equal? (fcgi-reply-stdout r)
                   #"Content-Type: text/plain\n\nID=1\nA=1\nB=two\nSTDIN=200000\n")
     (check-equal? (fcgi-reply-stderr r) #"warn")
     (check-equal? (list (fcgi-reply-app-status r) (fcgi-reply-protocol-status r)) '(0 request-complete))
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
                   '(("FCGI_MPXS_CONNS" . "1") ("FCGI_MAX_REQS" . "7")))
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
     (check-exn #rx"connection to .* is closed" (λ () (sync/timeout 5 (fastcgi-call-evt c #:params '()))))
     (fcgi-client-close c))

   (test-case "EOF before END_REQUEST fails every pending call"
     (define c (fastcgi-connect address))
     (define hang (fastcgi-call-evt c #:params '(("MODE" . "hang"))))
     (check-exn #rx"connection closed before END_REQUEST for request id 2"
                (λ () (fastcgi-call c #:params '(("MODE" . "eof")))))
     (check-exn #rx"connection closed before END_REQUEST for request id 1" (λ () (sync/timeout 5 hang)))
     (fcgi-client-close c))

   (test-case "connect errors"
     (check-exn #rx"cannot connect to unix:/nonexistent/x.sock: No such file or directory"
                (λ () (fastcgi-connect "unix:/nonexistent/x.sock")))
     (check-exn #rx"cannot connect to nonsense: bad address" (λ () (fastcgi-connect "nonsense")))
     (check-exn exn:fail:fastcgi? (λ () (fastcgi-connect "127.0.0.1:1")))))
 (λ ()
   (custodian-shutdown-all server-cust)
   (delete-directory/files dir)))
