#lang racket/base
;; What the manager and its workers share at run time, with no file: cleaning temporary
;; folders (/tmp, /var/tmp) under a running pool removes nothing that a worker started
;; later (a respawn, a reload) needs.
;;
;; - Names. The manager's control socket and each worker's relay socket (relay.rkt) are
;;   private sockets (private-socket.rkt: Linux abstract unix sockets, our user only) named
;;   under a prefix unique to the manager: PREFIX/control and PREFIX/wID-TAG. TAG is a MAC
;;   of the worker id under the pool's relay key, which only the pool knows: another user,
;;   who sees the names in /proc/net/unix, cannot take a future worker's name first.
;; - Keys. The first line the manager writes on every control connection is
;;     keys SECRET RELAY-KEY          (hex; lines.rkt)
;;   the stateless servlets' secret (--secret-file's, or one made at start) and the relay
;;   key: never on a command line, in the environment or in a file.
;; - The pool's status. A worker answering the status path connects and writes `board`;
;;   the manager answers with the scoreboard as one line of JSON (`null` before the first)
;;   and closes the connection. `stacks` (the status path's ?stacks, `ctl stacks`) is
;;   answered the same way with the running requests' stacks (manager-stacks.rkt).
(require file/sha1
         "../util/entropy.rkt"
         "../util/jsexpr.rkt"
         "../util/clock.rkt"
         "../util/hmac.rkt"
         "lines.rkt"
         "../transport/transport.rkt")
(provide make-pool-prefix
         control-name
         relay-name
         write-keys!
         read-keys
         answer-board!
         ask-board
         ask-stacks
         ask-canary-reload
         read-secret)

;; make-pool-prefix : natural -> string ; fastcgi-PID-RANDOM
(define (make-pool-prefix pid)
  (format "fastcgi-~a-~a" pid (bytes->hex-string (random-bytes 8))))

;; control-name : string -> string
(define (control-name prefix) (string-append prefix "/control"))

;; relay-name : string bytes natural -> string
(define (relay-name prefix key worker-id)
  (define tag (hmac-sha256 key (string->bytes/utf-8 (number->string worker-id))))
  (format "~a/w~a-~a" prefix worker-id (bytes->hex-string (subbytes tag 0 8))))

;; write-keys! : output-port bytes bytes -> void
(define (write-keys! out secret relay-key)
  (write-string (message-line 'manager 'keys #:secret secret #:relay-key relay-key) out)
  (newline out)
  (flush-output out))

;; read-keys : input-port real -> (values bytes bytes)
;; The manager's first line; raises exn:fail when it does not come within timeout seconds.
(define (read-keys in timeout)
  (define line (sync/timeout timeout (line-evt in)))
  (define m (and (string? line) (parse-line 'manager line)))
  (unless (and m (eq? (car m) 'keys))
    (error 'fastcgi "the manager's control connection did not start with its keys (got ~s)"
           (if (string? line) (substring line 0 (min 5 (string-length line))) line)))
  (values (hash-ref (cdr m) 'secret) (hash-ref (cdr m) 'relay-key)))

;; line-evt : input-port -> evt ; ready with the next line (a string, or eof) once read
;; Its reader thread goes on when the wait times out; every caller then drops the
;; connection, which ends it. (racket/port's read-line-evt would load racket/contract.)
(define (line-evt in)
  (define line eof)
  (define reader (thread (λ () (set! line (with-handlers ([exn:fail? (λ (e) eof)]) (read-line in 'linefeed))))))
  (wrap-evt reader (λ (_) line)))

;; answer-board! : output-port (or/c hash #f) -> void
(define (answer-board! out board)
  (write-json (or board (json-null)) out)
  (newline out)
  (flush-output out))

;; ask-board : string real -> (or/c hash #f)
;; The pool's status from the manager's control socket; #f when it does not come within
;; timeout seconds, or there is none yet.
(define (ask-board control timeout) (ask-manager control 'board timeout))

;; ask-stacks : string real -> (or/c hash #f)
;; The running requests' stacks, from every worker the manager reaches (manager-stacks.rkt);
;; #f when they do not come within timeout seconds.
(define (ask-stacks control timeout) (ask-manager control 'stacks timeout))

;; ask-canary-reload : string natural -> boolean
;; Asks the manager for a reload with a canary trial of ms milliseconds (`ctl reload
;; --canary`); #f when the control socket cannot be reached.
(define (ask-canary-reload control ms)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (in out) (private-connect control))
    (write-string (message-line 'greeting 'reload #:canary-ms ms) out)
    (newline out)
    (flush-output out)
    (close-output-port out)
    (close-input-port in)
    #t))

;; ask-manager : string symbol real -> (or/c hash #f)
;; The manager's answer to an ask (a greeting of lines.rkt): one line of JSON after the keys.
(define (ask-manager control ask timeout)
  (define cust (make-custodian))
  (dynamic-wind
   void
   (λ ()
     (with-handlers ([exn:fail? (λ (e) #f)])
       (parameterize ([current-custodian cust])
         (define-values (in out) (private-connect control))
         (write-string (message-line 'greeting ask) out)
         (newline out)
         (flush-output out)
         (define deadline (alarm-at-evt (+ (now-ms) (* 1000 timeout))))
         (define (next-line) (sync deadline (line-evt in)))
         (define keys (next-line))
         (define line (and (string? keys) (next-line)))
         (define board (and (string? line) (string->jsexpr line)))
         (and (hash? board) board))))
   (λ () (custodian-shutdown-all cust))))

;; read-secret : path-string -> bytes
;; A --secret-file's secret: its bytes less trailing white space, at least 16 of them.
(define (read-secret file)
  (define bs (call-with-input-file file (λ (in) (read-bytes 4096 in))))
  (define secret (if (eof-object? bs) #"" (regexp-replace #px#"\\s+$" bs #"")))
  (when (< (bytes-length secret) 16)
    (raise-user-error 'raco-fastcgi "--secret-file ~a: the secret must have at least 16 bytes" file))
  secret)
