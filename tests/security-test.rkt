#lang racket/base
;; Security checks through real connections: allowed clients from 127.0.0.1 and ::1,
;; unix socket modes and a refused bind through the public API, params never turned into
;; environment variables (httpoxy, HOSTILE.md 16), and control characters escaped in every
;; log line, in process and in a child's stderr.
;;
;; Covered elsewhere, not repeated here:
;;   allowed-clients parsing table      tests/allowed-clients-test.rkt ("allowed clients")
;;   socket modes and the live-socket   tests/open-listener-test.rkt ("unix listener: ...")
;;     refusal at the listener level
;;   params and body caps (431, 413)    tests/connection-limits-test.rkt, with
;;                                      memory bounds in tests/hostile-memory-test.rkt (13, 18)
(require net/url
         racket/file
         racket/list
         racket/port
         racket/runtime-path
         racket/tcp
         rackunit
         web-server/http
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         (only-in "../fastcgi/private/servlet/web.rkt" servlet->handler)
         "fuzz/fuzz.rkt"
         "integration/lib.rkt"
         "lib/raw-peer.rkt")

(define-runtime-path engine-dir "../fastcgi")

;; echo : fastcgi-request -> void
(define (echo r)
  (write-bytes #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nok" (fastcgi-request-stdout r)))

;; tcp-answer : string port -> (or/c natural 'refused)
;; The CGI status of one request from host (the connection not kept); 'refused when the
;; server closes without a byte of answer.
(define (tcp-answer host port)
  (define-values (in out) (tcp-connect host port))
  (with-handlers ([exn:fail? void])     ; a refusing server may have closed already
    (write-bytes (request-bytes 1 #:keep? #f) out)
    (flush-output out))
  (define got
    (with-timeout 5 (format "the answer to ~a" host)
                  (λ () (with-handlers ([exn:fail? (λ (e) #"")]) (port->bytes in)))))
  (close-input-port in)
  (with-handlers ([exn:fail? void]) (close-output-port out))
  (cond
    [(zero? (bytes-length got)) 'refused]
    [else
     (define d (make-decoder))
     (decoder-feed! d got)
     (define stdout
       (let loop ([acc #""])
         (define r (decoder-next! d))
         (cond [(not r) acc]
               [(eq? (record-type r) 'stdout) (loop (bytes-append acc (record-content r)))]
               [else (loop acc)])))
     (cgi-status stdout)]))

;; with-tcp-server : (or/c string #f) (port -> any) -> any ; dual-stack, [::]:0
(define (with-tcp-server allowed proc)
  (call-with-tcp-server echo proc #:listen "[::]:0" #:allowed-clients allowed))

(test-case "allowed clients over real connections from 127.0.0.1 and ::1"
  (define table
    ;; list, then the outcome for 127.0.0.1 and for ::1
    '(("127.0.0.1" allowed refused)
      ("::1" refused allowed)
      ("::ffff:127.0.0.1" allowed refused)       ; IPv4-mapped IPv6 matches the IPv4 peer
      ("::ffff:127.0.0.0/104" allowed refused)
      ("127.0.0.0/8, ::1/128" allowed allowed)
      ("10.0.0.0/8" refused refused)
      (#f allowed allowed)))
  (define rx (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (for ([row (in-list table)])
    (with-tcp-server (car row)
      (λ (port)
        (for ([host '("127.0.0.1" "::1")] [want (cdr row)])
          (define got (tcp-answer host port))
          (check-equal? (if (eqv? got 200) 'allowed got) want (format "~s from ~a" (car row) host))))))
  (define lines
    (let loop ([acc '()]) (define v (sync/timeout 0.2 rx)) (if v (loop (cons (vector-ref v 1) acc)) acc)))
  (check-true (for/or ([l lines]) (regexp-match? #rx"refused connection from ::1: not in the allowed clients" l)))
  (check-true (for/or ([l lines]) (regexp-match? #rx"refused connection from 127.0.0.1: not in the allowed clients" l))))

(test-case "a flood of denied connections: each closed, at most 10 log lines a second, the rest counted"
  ;; any TCP client can cause this line, one connection each: 300 of them
  (define rx (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (define n 300)
  (define t0 (current-inexact-milliseconds))
  (with-tcp-server "10.0.0.0/8"
    (λ (port)
      (for ([_ (in-range n)])
        (check-equal? (tcp-answer "127.0.0.1" port) 'refused))
      (define seconds (/ (- (current-inexact-milliseconds) t0) 1000.0))
      (define (drain)
        (let loop ([acc '()])
          (define v (sync/timeout 0.2 rx))
          (if v (loop (cons (vector-ref v 1) acc)) (reverse acc))))
      (define lines (filter (λ (l) (regexp-match? #rx"not in the allowed clients" l)) (drain)))
      (check-true (<= 1 (length lines) (* 10 (+ 2 (ceiling seconds))))
                  (format "~a lines for ~a connections in ~a s" (length lines) n seconds))
      ;; a second later, one more: its line counts the ones not written
      (sleep 1.1)
      (check-equal? (tcp-answer "127.0.0.1" port) 'refused)
      (define after (filter (λ (l) (regexp-match? #rx"not in the allowed clients" l)) (drain)))
      (check-equal? (length after) 1)
      (define (held-back l)
        (define m (regexp-match #rx"\\(([0-9]+) more like it not written\\)$" l))
        (if m (string->number (cadr m)) 0))
      (check-equal? (+ (length lines) 1 (for/sum ([l (in-list (append lines after))]) (held-back l)))
                    (+ n 1)))))

(test-case "29: an allowed-clients list that parses to nothing denies everyone"
  (for ([allowed '("" "garbage" " , ,, " "1.2.3.4/33" "::1/129")])
    (with-tcp-server allowed
      (λ (port)
        (for ([host '("127.0.0.1" "::1")])
          (check-equal? (tcp-answer host port) 'refused (format "~s from ~a" allowed host))))))
  ;; and a good list afterwards still serves
  (with-tcp-server "127.0.0.1"
    (λ (port) (check-equal? (tcp-answer "127.0.0.1" port) 200))))

(test-case "unix socket modes through serve/fastcgi-raw: 0660 default, custom 0600; a live socket refused"
  (call-with-temp-dir
   "fcgi-sec"
   (λ (dir)
     (define path (path->string (build-path dir "s.sock")))
     (define stop (serve/fastcgi-raw echo #:listen (string-append "unix:" path)))
     (check-equal? (file-or-directory-permissions path 'bits) #o660)
     (check-exn #rx"another server is listening"
                (λ () (serve/fastcgi-raw echo #:listen (string-append "unix:" path))))
     (with-peer path (λ (p) (peer-send! p (request-bytes 1)) (check-status (peer-answer p 1) 200)))
     (stop #:timeout 1)
     (define stop2 (serve/fastcgi-raw echo #:listen (string-append "unix:" path) #:socket-mode #o600))
     (check-equal? (file-or-directory-permissions path 'bits) #o600)
     (with-peer path (λ (p) (peer-send! p (request-bytes 1)) (check-status (peer-answer p 1) 200)))
     (stop2 #:timeout 1))))

;; -- 16: httpoxy ----------------------------------------------------------------------------
(define env-before (environment-variables-names (current-environment-variables)))

;; env-servlet : request -> response ; what the process and a child process see
(define (env-servlet req)
  (define proxy (headers-assq* #"Proxy" (request-headers/raw req)))
  (define-values (code out err) (run-program "/usr/bin/env" '()))
  (response/output
   (λ (o)
     (fprintf o "header=~a\ngetenv=~a\nchild=~a\n"
              (and proxy (header-value proxy)) (getenv "HTTP_PROXY")
              (regexp-match? #rx#"(?m:^HTTP_PROXY=)" out)))))

(test-case "16: a Proxy header (HTTP_PROXY) is a header, never an environment variable"
  (call-with-server
   (servlet->handler env-servlet (make-limits))
   (λ (path)
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/" "HTTP_PROXY" "http://evil.example:3128")))
         (define a (peer-answer p 1 20))
         (check-status a 200)
         (check-equal? (cgi-body (answer-stdout a))
                       #"header=http://evil.example:3128\ngetenv=#f\nchild=#f\n")))))
  (check-false (getenv "HTTP_PROXY"))
  (check-equal? (environment-variables-names (current-environment-variables)) env-before)
  ;; no engine module writes the environment; inherited-socket.rkt only removes systemd's
  ;; LISTEN_*, sd-notify.rkt only NOTIFY_SOCKET and WATCHDOG_* (the workers must not see them)
  (for ([f (in-directory engine-dir)] #:when (regexp-match? #rx"[.]rkt$" (path->string f)))
    (define text (file->string f))
    (check-false (regexp-match? #rx"putenv" text) (path->string f))
    (when (regexp-match? #rx"environment-variables-set!" text)
      (check-regexp-match #rx"(inherited-socket|sd-notify)[.]rkt$" (path->string f))
      (for ([call (in-list (regexp-match* #rx"environment-variables-set![^\n]*" text))])
        (check-regexp-match #rx" #f[)]" call (path->string f))))))

;; -- control characters in log lines ------------------------------------------------------
(define nasty "/a\r\nFAKE 2000-01-01T00:00:00 error forged\e[2J\0\177\377")

;; raising-servlet : request -> response
(define (raising-servlet req)
  (error 'servlet "failed on ~a" (url->string (request-uri req))))

(test-case "control characters (CR, LF, ESC, NUL, DEL) escaped in every log line, in process"
  (define rx (make-log-receiver fastcgi-logger 'debug 'fastcgi))
  (call-with-server
   (servlet->handler raising-servlet (make-limits))
   (λ (path)
     (with-peer path
       (λ (p)
         (for ([ps (list (params "REQUEST_URI" nasty)                          ; handler raised
                         (params "REQUEST_URI" "http://[" "HTTP_X" nasty)       ; URI does not parse
                         (params "REQUEST_URI" "/" "REQUEST_METHOD" "POST"      ; bad body
                                 "CONTENT_TYPE" "multipart/form-data; boundary=x"
                                 "CONTENT_LENGTH" "20")
                         (params "CONTENT_LENGTH" nasty))]                      ; rejected
               [id (in-naturals 1)])
           ;; request 3's body: 20 bytes that are not the multipart its params promise
           (define body (if (= id 3) (subbytes (string->bytes/utf-8 (string-append nasty "xxxxxxxx")) 0 20) #""))
           (peer-send! p (request-bytes id #:params ps #:stdin body))
           (check-not-false (memv (cgi-status (answer-stdout (peer-answer p id))) '(400 500))))
         (peer-send! p (record->bytes 'stdin 9 (string->bytes/utf-8 nasty)))
         (peer-send! p (bytes 2) (string->bytes/utf-8 nasty)))))) ; protocol error: version
  (sleep 0.3)
  (define lines
    (let loop ([acc '()]) (define v (sync/timeout 0 rx)) (if v (loop (cons (vector-ref v 1) acc)) (reverse acc))))
  (check-true (>= (length lines) 4) (format "~s" lines))
  (check-true (for/or ([l lines]) (regexp-match? (regexp-quote "from unix /a\\x0d\\x0aFAKE") l)) (format "~s" lines))
  (for ([l lines])
    (check-false (regexp-match? #px"[^ -~]" l) (format "raw control byte in ~s" l))))

(test-case "control characters escaped in every line of a child server's stderr"
  (call-with-temp-dir
   "fcgi-sec-log"
   (λ (dir)
     (call-with-fuzz-server
      dir #:args '("--log-level" "debug")
      (λ (fs)
        (define path (fuzz-server-path fs))
        (with-peer path
          (λ (p)
            (peer-send! p (request-bytes 1 #:params (params "MODE" "raise" "REQUEST_URI" nasty)))
            (check-status (peer-answer p 1) 500)
            (peer-send! p (request-bytes 2 #:params (params "CONTENT_LENGTH" nasty)))
            (check-status (peer-answer p 2) 400)
            (peer-send! p (request-bytes 3 #:role 9 #:params (params "X" nasty)))
            (check-equal? (answer-protocol-status (peer-answer p 3)) 'unknown-role)
            ;; the application's own logger (topic app), not the server's
            (peer-send! p (request-bytes 4 #:params (params "MODE" "applog" "REQUEST_URI" nasty)))
            (check-status (peer-answer p 4) 200)))
        (with-peer path (λ (p) (peer-send! p (bytes-append #"\1\1\0\0\0\10\0\0" (make-bytes 8 0)))
                          (check-true (peer-eof? p))))
        (check-equal? (child-command fs "gc") "gc done")
        (sleep 0.3)
        (define text (file->bytes (proc-stderr-file (fuzz-server-proc fs))))
        (define lines (regexp-split #rx#"\n" text))
        (check-equal? (last lines) #"" "the log ends with a newline")
        (check-true (>= (length lines) 4) (format "~s" text))
        (check-true (regexp-match? (regexp-quote #"failed on /a\\x0d\\x0aFAKE") text) (format "~s" text))
        (check-true (regexp-match? (regexp-quote #"app: saw /a\\x0d\\x0aFAKE") text) (format "~s" text))
        (for ([l (drop-right lines 1)])
          (check-true (regexp-match? #px#"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+ (debug|info|warning|error) [ -~]*$" l)
                      (format "~s" l))))))))
