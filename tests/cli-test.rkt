#lang racket/base
;; `raco fastcgi serve` as a process: listening forms (unix, TCP, inherited fd 0, systemd),
;; graceful stop on SIGTERM with a request in flight, and clear errors for bad input
;; (`raco fastcgi request --abort-after`: request-cli-test).
(require ffi/unsafe/port
         net/http-client
         racket/tcp
         racket/file
         racket/port
         rackunit
         "../fastcgi/client.rkt"
         (only-in "../fastcgi/private/protocol/protocol.rkt" pairs->bytes record->bytes)
         "../fastcgi/private/transport/transport.rkt"
         "lib/raw-peer.rkt")

(define here (let-values ([(dir _n _d) (split-path (syntax-source #'here))]) dir))
(define cli (path->string (build-path here ".." "fastcgi" "private" "cli" "raco.rkt")))
(define racket (path->string (find-system-path 'exec-file)))
(define racket-exe (or (find-executable-path racket) racket))
(define dir (make-temporary-file "fastcgi-cli-~a" 'directory))
(define app (path->string (build-path dir "app.rkt")))
(call-with-output-file app #:exists (quote truncate)
  (λ (o)
    (write-string
     (string-append
      "#lang racket/base\n(require web-server/http)\n(provide start)\n"
      "(define (start req)\n"
      "  (when (regexp-match? #rx\"slow\" (url->string (request-uri req))) (sleep 1.5))\n"
      "  (response/output (λ (o) (write-bytes #\"Hello, World!\\n\" o)) #:mime-type #\"text/plain\"))\n"
      "(require net/url)\n")
     o)
    (void)))

;; every process spawned, so that none outlives the tests (see the end of the file)
(define spawned '())

;; spawn : (listof string) #:stdin port #:env -> (values subprocess input-port)
;; Starts `raco fastcgi ARGS...`; returns the process and its stderr (the log).
(define (spawn args #:stdin [stdin #f] #:command [command #f])
  (define-values (p out in err)
    (if command
        (subprocess #f stdin #f "/bin/sh" "-c" command)
        (apply subprocess #f stdin #f racket-exe cli args)))
  (set! spawned (cons p spawned))
  (when in (close-output-port in))
  (values p err out))

;; wait-ready : input-port -> string ; the log until the "listening on" line
(define (wait-ready err)
  (define line (sync/timeout 30 (read-line-evt err)))
  (cond
    [(eof-object? line) (fail "server exited before listening") ""]
    [(not line) (fail "server not listening after 30 s") ""]
    [(regexp-match? #rx"listening on" line) line]
    [else (wait-ready err)]))

(define (hello? address [uri "/"])
  (define-values (status headers body) (fastcgi-request address #:uri uri #:timeout 10))
  (and (= status 200) (equal? body #"Hello, World!\n")))

(define (stop! p)
  (subprocess-kill p #f)
  (check-equal? (sync/timeout 30 p) p "server did not exit on SIGTERM")
  (check-equal? (subprocess-status p) 0 "graceful stop exits 0"))

(test-case "unix socket: serves, and SIGTERM lets a slow request finish, exits 0, removes the socket"
  (define sock (path->string (build-path dir "a.sock")))
  (define-values (p err out) (spawn (list "serve" app "--listen" (string-append "unix:" sock))))
  (wait-ready err)
  (check-true (hello? (string-append "unix:" sock)))
  (check-equal? (bitwise-and (file-or-directory-permissions sock 'bits) #o777) #o660)
  (define result (make-channel))
  (thread (λ () (channel-put result (with-handlers ([exn:fail? exn-message])
                                      (hello? (string-append "unix:" sock) "/slow")))))
  (sleep 0.5)
  (stop! p)
  (check-equal? (sync/timeout 5 result) #t "the in-flight request completed")
  (check-false (file-exists? sock) "socket file removed"))

(test-case "TCP 127.0.0.1: serves"
  (define-values (p err out) (spawn (list "serve" app "--listen" "127.0.0.1:0")))
  (define line (wait-ready err))
  (define addr (cadr (regexp-match #rx"listening on ([^ ]+)" line)))
  (check-true (hello? addr))
  (stop! p))

(test-case "TCP: an empty --allowed-clients, or FCGI_WEB_SERVER_ADDRS set empty, denies every client (HOSTILE.md item 29)"
  (define (denied-with spawn-it)
    (define-values (p err out) (spawn-it))
    (define addr (cadr (regexp-match #rx"listening on ([^ ]+)" (wait-ready err))))
    (check-exn exn:fail? (λ () (hello? addr)) "the connection is closed, not served")
    (stop! p))
  (denied-with (λ () (spawn (list "serve" app "--single-process" "--listen" "127.0.0.1:0"
                                  "--allowed-clients" ""))))
  (denied-with (λ () (spawn '() #:command (format "FCGI_WEB_SERVER_ADDRS= exec ~a ~a serve ~a --listen 127.0.0.1:0"
                                                  racket-exe cli app))))
  ;; and the same variable naming this host lets it in
  (define-values (p err out)
    (spawn '() #:command (format "FCGI_WEB_SERVER_ADDRS=127.0.0.1 exec ~a ~a serve ~a --listen 127.0.0.1:0"
                                 racket-exe cli app)))
  (check-true (hello? (cadr (regexp-match #rx"listening on ([^ ]+)" (wait-ready err)))))
  (stop! p))

(test-case "inherited fd 0: the listening socket given as stdin, no --listen"
  (define sock (path->string (build-path dir "inherited.sock")))
  (define l (open-listener (parse-listen-address (string-append "unix:" sock))))
  (define stdin (unsafe-file-descriptor->port (listener-fd l) 'listener '(read)))
  (define-values (p err out) (spawn (list "serve" app) #:stdin stdin))
  (define line (wait-ready err))
  (check-regexp-match #rx"fd:0" line)
  (check-true (hello? (string-append "unix:" sock)))
  (stop! p)
  (listener-close! l))

(test-case "systemd socket activation: LISTEN_FDS=1, LISTEN_PID, fd 3"
  (define sock (path->string (build-path dir "systemd.sock")))
  (define l (open-listener (parse-listen-address (string-append "unix:" sock))))
  (define stdin (unsafe-file-descriptor->port (listener-fd l) 'listener '(read)))
  ;; the shell moves the socket from fd 0 to fd 3, and exec keeps its pid for LISTEN_PID
  (define-values (p err out)
    (spawn '() #:stdin stdin
           #:command (format "exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec ~a ~a serve ~a"
                             racket-exe cli app)))
  (wait-ready err)
  (check-true (hello? (string-append "unix:" sock)))
  (stop! p)
  (listener-close! l))

(test-case "--connection-buffer and --stdin-buffer reach the workers"
  ;; the shape of connection-test's case, through the command: two multiplexed requests
  ;; whose unfinished params together pass 200,000 bytes (under the 1 MiB default)
  (define sock (path->string (build-path dir "cb.sock")))
  (define-values (p err out)
    (spawn (list "serve" app "--workers" "1" "--listen" (string-append "unix:" sock)
                 "--connection-buffer" "200000" "--stdin-buffer" "64k")))
  (wait-ready err)
  (define (pad name n)
    (pairs->bytes (list (cons name (make-bytes (- n (bytes-length name) 4 1) 120)))))
  (with-peer sock
    (λ (c)
      (peer-send! c (begin-bytes 1) (begin-bytes 2)
                  (record->bytes 'params 1 (pad #"A" 60000))
                  (record->bytes 'params 2 (pad #"B" 60000))
                  (record->bytes 'params 1 (pad #"C" 60000))
                  (record->bytes 'params 2 (pad #"D" 60000)))
      (check-equal? (answer-protocol-status (peer-answer c 2 10)) 'overloaded)
      (peer-send! c (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #""))
      (check-status (peer-answer c 1 10) 200)))
  (check-true (hello? (string-append "unix:" sock)))
  (stop! p))

(test-case "--connection-buffer and --stdin-buffer take sizes only"
  (for ([flag (in-list '("--connection-buffer" "--stdin-buffer"))])
    (define-values (p err out) (spawn (list "serve" app "--listen" "127.0.0.1:0" flag "lots")))
    (sync/timeout 30 p)
    (check-equal? (subprocess-status p) 1)
    (check-regexp-match (regexp (string-append flag ": expected a size")) (port->string err))))

(test-case "bad input gives one clear line and exit status 1"
  (define (run . args)
    (define-values (p err out) (apply spawn (list args)))
    (sync/timeout 30 p)
    (values (subprocess-status p) (port->string err)))
  (define-values (s1 e1) (run "serve" app "--listen" "nonsense"))
  (check-equal? s1 1)
  (check-regexp-match #rx"nonsense" e1)
  (define-values (s2 e2) (run "serve" (path->string (build-path dir "missing.rkt")) "--listen" "127.0.0.1:0"))
  (check-equal? s2 1)
  (check-regexp-match #rx"not found" e2)
  (define-values (s3 e3) (run "serve" app))   ; stdin is a pipe, no systemd: nowhere to listen
  (check-equal? s3 1)
  (check-regexp-match #rx"--listen" e3)
  (define live (path->string (build-path dir "live.sock")))
  (define l (open-listener (parse-listen-address (string-append "unix:" live))))
  (define-values (s4 e4) (run "serve" app "--listen" (string-append "unix:" live)))
  (check-equal? s4 1)
  (check-regexp-match #rx"listening" e4)
  (listener-close! l))

(test-case "raco fastcgi dev: a local HTTP front forwards over FastCGI"
  (define port (let* ([l (tcp-listen 0 4 #t "127.0.0.1")]
                      [p (let-values ([(a b c d) (tcp-addresses l #t)]) b)])
                 (tcp-close l)
                 p))
  (define-values (p err out) (spawn (list "dev" app "--port" (number->string port))))
  (define line (sync/timeout 30 (read-line-evt out)))
  (check-regexp-match #rx"behind FastCGI at unix:" line)
  (define (get path)
    (let retry ([n 50])
      (with-handlers ([exn:fail? (λ (e) (if (zero? n) (raise e) (begin (sleep 0.2) (retry (sub1 n)))))])
        (define-values (status headers body)
          (http-sendrecv "127.0.0.1" path #:port port))
        (list status (port->bytes body)))))
  (define r (get "/anything?x=1"))
  (check-true (regexp-match? #rx#"^HTTP/1.1 200" (car r)))
  (check-equal? (cadr r) #"Hello, World!\n")
  (subprocess-kill p #t)
  (void (sync/timeout 10 p)))

;; a test that failed before stopping its server leaves it running: stop it here
(for ([p (in-list spawned)] #:when (eq? (subprocess-status p) 'running))
  (eprintf "cli-test: killing ~a, left running by a failed test\n" (subprocess-pid p))
  (subprocess-kill p #t)
  (sync/timeout 10 p))

(delete-directory/files dir #:must-exist? #f)
