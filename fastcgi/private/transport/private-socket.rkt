#lang racket/base
;; Private sockets: the manager's control socket and the workers' relay sockets. They are
;; Linux abstract unix sockets: a name and no file, so that cleaning temporary folders
;; under a running pool removes nothing it needs. Such a name has no permissions, so each
;; end checks the other's user (SO_PEERCRED): a connection from, or a listener of, another
;; user is refused (the listener's side of the check is in listener.rkt's accept).
(require ffi/unsafe
         "../os/ffi.rkt"
         "listener.rkt"
         "transport-exn.rkt")
(provide open-private-listener
         private-connect)

;; private-sockaddr : string -> bytes ; sun_path is a NUL then the name, no terminator
(define (private-sockaddr name)
  (define nb (string->bytes/utf-8 name))
  (unless (<= 1 (bytes-length nb) (sub1 SUN_PATH_MAX))
    (raise-transport "private socket name ~s: 1 to ~a bytes" name (sub1 SUN_PATH_MAX)))
  (bytes-append (subbytes (make-sockaddr-un #"") 0 2) #"\0" nb))

;; private-address : string -> string ; for messages, as `ss -x` shows it
(define (private-address name) (string-append "unix:@" name))

;; open-private-listener : string #:backlog int -> listener
;; Accepts connections from processes of our (effective) user only.
(define (open-private-listener name #:backlog [backlog 128])
  (define where (private-address name))
  (define sa (private-sockaddr name))
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (check-syscall (c-bind fd sa (bytes-length sa)) (format "cannot bind ~a" where) close-fd)
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-fd)
  (make-listener fd 'private where #f #f (c-geteuid)))

;; private-connect : string -> (values input-port output-port)
;; A connection (close-on-exec) to the private socket of a process of our user. Raises
;; exn:fail:fastcgi:transport when nothing listens there, its queue stays full for a
;; second, or another user's process holds the name.
(define (private-connect name)
  (define where (private-address name))
  (define sa (private-sockaddr name))
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket to connect to ~a" where))
  (let loop ([tries 0])
    (define r (c-connect fd sa (bytes-length sa)))
    (define errno (if (< r 0) (saved-errno) 0))
    (cond
      [(= r 0) (void)]
      [(= errno EINTR) (loop tries)]
      ;; a unix socket's full accept queue: the connection is not under way, ask again
      [(and (= errno EAGAIN) (< tries 100)) (sleep 0.01) (loop (add1 tries))]
      [else (c-close fd) (raise-errno (format "cannot connect to ~a" where) errno)]))
  (define cred (peer-credentials fd))
  (unless (and cred (= (cadr cred) (c-geteuid)))
    (c-close fd)
    (raise-transport "~a is held by another user (uid ~a): not connecting" where (and cred (cadr cred))))
  (fd->ports fd "unix"))
