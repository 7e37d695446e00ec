#lang racket/base
;; Listening sockets a process inherits instead of opening: fd 0 (FCGI_LISTENSOCK_FILENO,
;; when the web server spawned us with a listening socket as stdin), systemd socket
;; activation (fd 3), or fd:N. Each is adopted as a listener: non-blocking and
;; close-on-exec, so no program the application starts holds it.
(require "../os/ffi.rkt"
         "listener.rkt"
         "../util/log.rkt"
         "transport-exn.rkt")
(provide adopt-fd
         inherited-listener
         fd-listening-socket?)

;; adopt-fd : fd -> listener
;; An inherited listening fd, made non-blocking and close-on-exec: no program the
;; application starts may hold it (an orphan would keep the port after we stop). A
;; standard descriptor (the FastCGI convention's fd 0) moves to a new close-on-exec number
;; and /dev/null takes its place, so a program started with our stdin gets /dev/null.
(define (adopt-fd fd)
  (unless (fd-listening-socket? fd)
    (raise-transport "fd:~a is not a listening socket" fd))
  (define held
    (cond
      [(<= fd 2)
       (define new (dup-cloexec fd))
       (when (pair? new) (raise-errno (format "cannot move fd:~a to a close-on-exec descriptor" fd) (car new)))
       (define r (null-onto! fd))
       (unless (eq? r #t)
         (c-close new)
         (raise-errno (format "cannot put /dev/null in the place of fd:~a" fd) r))
       new]
      [else
       (define r (set-cloexec! fd))
       (unless (eq? r #t) (raise-errno (format "cannot make fd:~a close-on-exec" fd) r))
       fd]))
  (define r (set-nonblocking! held))
  (unless (eq? r #t) (raise-errno (format "cannot make fd:~a non-blocking" fd) r))
  (make-listener held 'inherited (format "fd:~a" fd) #f #f))

;; fd-listening-socket? : fd -> boolean
(define (fd-listening-socket? fd)
  (define v (getsockopt-int fd SOL_SOCKET SO_ACCEPTCONN))
  (and v (not (zero? v))))

;; inherited-listener : -> (or/c listener #f)
;; fd 0 when the web server spawned us with a listening socket as stdin; otherwise systemd
;; socket activation (its variables are removed so that our children do not act on them).
(define (inherited-listener)
  (define env (current-environment-variables))
  (define (getenv* name) (environment-variables-ref env name))
  (define listen-fds
    (let ([v (getenv* #"LISTEN_FDS")]) (and v (string->number (bytes->string/latin-1 v)))))
  (define for-us?
    (equal? (getenv* #"LISTEN_PID") (string->bytes/utf-8 (number->string (c-getpid)))))
  (cond
    [(fd-listening-socket? 0) (adopt-fd 0)]
    [(and for-us? (exact-positive-integer? listen-fds))
     (for ([name '(#"LISTEN_PID" #"LISTEN_FDS" #"LISTEN_FDNAMES")])
       (environment-variables-set! env name #f))
     (when (> listen-fds 1)
       (log-fastcgi-warning "LISTEN_FDS=~a: only fd 3 is used" listen-fds))
     (adopt-fd 3)]
    [else #f]))
