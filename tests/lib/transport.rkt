#lang racket/base
;; What the transport layer's tests share (tests/open-listener-test.rkt, listener-test,
;; inherited-socket-test, socket-io-test, transport-test): the check of a transport error's
;; message, a round trip through a listener, a child process that inherits a listener, an
;; accepted socket's descriptor with the peer's ports, and the descriptor limit reached.
(require compiler/find-exe
         ffi/unsafe
         ffi/unsafe/port
         racket/file
         racket/port
         racket/runtime-path
         racket/string
         racket/tcp
         racket/unix-socket
         rackunit
         "../../fastcgi/private/os/ffi.rkt"
         "../../fastcgi/private/util/log.rkt"
         "../../fastcgi/private/transport/transport.rkt")
(provide transport-error?
         listener-port
         round-trip
         close-port
         exists?
         c-dup
         run-child
         shell-quote
         child-program-with
         call-with-accepted-fd
         at-fd-limit)

(define-runtime-path transport-module "../../fastcgi/private/transport/transport.rkt")

(define c-dup (get-ffi-obj "dup" #f (_fun _int -> _int)))
(define c-getrlimit (get-ffi-obj "getrlimit" #f (_fun _int _bytes -> _int)))
(define c-setrlimit (get-ffi-obj "setrlimit" #f (_fun _int _bytes -> _int)))
(define RLIMIT_NOFILE 7)

;; transport-error? : regexp -> (any -> boolean)
(define ((transport-error? rx) e)
  (and (exn:fail:fastcgi:transport? e) (regexp-match? rx (exn-message e))))

;; listener-port : listener -> port number (from "HOST:PORT" or "[V6]:PORT")
(define (listener-port l)
  (string->number (cadr (regexp-match #rx":([0-9]+)$" (listener-address l)))))

;; round-trip : listener (-> (values in out)) -> peer-string
;; Connects, accepts, sends a line each way, and returns what the listener saw as the peer.
(define (round-trip l connect)
  (define-values (ci co) (connect))
  (define-values (si so peer) (listener-accept l))
  (write-string "ping\n" co)
  (flush-output co)
  (check-equal? (read-line si) "ping")
  (write-string "pong\n" so)
  (flush-output so)
  (check-equal? (read-line ci) "pong")
  (for-each close-port (list ci co si so))
  peer)

(define (close-port p) (if (input-port? p) (close-input-port p) (close-output-port p)))

;; exists? : path-string -> boolean
;; True for any file, sockets included (link-exists? is only for symbolic links).
(define (exists? p)
  (with-handlers ([exn:fail:filesystem? (lambda (e) #f)])
    (and (file-or-directory-stat p #t) #t)))

;; run-child : listener string -> string
;; Runs `sh -c script` with the listener (a dup of its fd) as stdin; the child accepts one
;; connection and writes a line about its listener; returns that line.
(define (run-child l script)
  (define child-stdin (unsafe-file-descriptor->port (c-dup (listener-fd l)) 'listener '(read)))
  (define-values (child out in err)
    (subprocess (current-output-port) child-stdin (current-error-port) "/bin/sh" "-c" script))
  (close-input-port child-stdin)
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define line (sync/timeout 20 (read-line-evt ci)))
  (unless (sync/timeout 5 child) (subprocess-kill child #t))
  (close-input-port ci)
  (close-output-port co)
  line)

;; shell-quote : string -> string
(define (shell-quote s)
  (string-append "'" (string-replace s "'" "'\\''") "'"))

;; child-program-with : string -> string ; the child's program, its listener from expr
(define (child-program-with expr)
  (format "(require (file ~s))
           (define l ~a)
           (define-values (i o peer) (listener-accept l))
           (void (write-string (format \"ok ~~a ~~a ~~a\\n\" (listener-kind l)
                                       (listener-address l) (getenv \"LISTEN_FDS\"))
                               o))
           (close-output-port o)"
          (path->string transport-module) expr))

;; call-with-accepted-fd : ((fd input-port output-port) -> any) -> any
;; The accepted end of a unix socket as a raw descriptor (non-blocking, as the server
;; has it), and the peer's end as ports; all closed afterwards.
(define (call-with-accepted-fd proc)
  (define dir (make-temporary-file "fcgi-fd-~a" 'directory))
  (define path (build-path dir "s.sock"))
  (define l (open-listener (parse-listen-address (string-append "unix:" (path->string path)))))
  (define-values (pin pout) (unix-socket-connect path))
  (define-values (fd peer) (listener-accept-fd l))
  (dynamic-wind void
                (λ () (proc fd pin pout))
                (λ ()
                  (socket-close! fd)
                  (listener-close! l)
                  (close-input-port pin)
                  (close-output-port pout)
                  (delete-directory dir))))

;; at-fd-limit : ((-> void) -> any) -> natural
;; Runs body with the process's descriptor limit lowered and every free descriptor taken;
;; body gets a procedure that gives them back. Returns the "retrying" warnings logged by
;; the time body returned; afterwards the descriptors and the limit are restored.
(define (at-fd-limit body)
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (define saved (make-bytes 16))
  (c-getrlimit RLIMIT_NOFILE saved)
  (define fillers '())
  (define (release!) (for-each c-close fillers) (set! fillers '()))
  (dynamic-wind
   (lambda ()
     (define open-fds (length (directory-list "/proc/self/fd")))
     (c-setrlimit RLIMIT_NOFILE (bytes-append (integer->integer-bytes (+ open-fds 8) 8 #f) (subbytes saved 8)))
     (let fill ()
       (define fd (c-socket AF_INET SOCK_STREAM 0))
       (when (>= fd 0) (set! fillers (cons fd fillers)) (fill))))
   (lambda ()
     (body release!)
     (let loop ([n 0])
       (define v (sync/timeout 0 receiver))
       (cond [(not v) n]
             [(regexp-match? #rx"Too many open files [(]errno 24[)]; retrying" (vector-ref v 1))
              (loop (add1 n))]
             [else (loop n)])))
   (lambda ()
     (release!)
     (c-setrlimit RLIMIT_NOFILE saved))))
