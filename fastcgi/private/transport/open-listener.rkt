#lang racket/base
;; Opening the listener a --listen value names: a TCP port, a unix socket file (its mode,
;; owner and group set, a stale file left by a dead server removed first), an inherited fd,
;; or, for no value at all, the socket the process inherited (inherited-socket.rkt).
(require ffi/unsafe
         ffi/unsafe/atomic
         "../os/ffi.rkt"
         "inherited-socket.rkt"
         "listen-address.rkt"
         "listener-options.rkt"
         "listener.rkt"
         "../util/log.rkt"
         "transport-exn.rkt")
(provide open-listener
         listener-for)

;; listener-for : (or/c string listener #f) [listener-options] -> listener
;; A string is an address (unix:/path, HOST:PORT, [::1]:PORT, fd:N), opened with opts; a
;; listener is itself; #f means inherited: fd 0 when it is a listening socket, else
;; systemd socket activation, else an error.
(define (listener-for listen [opts default-listener-options])
  (cond
    [(listener? listen) listen]
    [(string? listen)
     (open-listener (parse-listen-address listen)
                    #:backlog (listener-options-backlog opts)
                    #:socket-mode (listener-options-socket-mode opts)
                    #:socket-owner (listener-options-socket-owner opts)
                    #:socket-group (listener-options-socket-group opts))]
    [(inherited-listener) => values]
    [else
     (raise-transport (string-append
                       "no address to listen on: give --listen (unix:/path, HOST:PORT or "
                       "fd:0); fd 0 is not a listening socket and no systemd socket "
                       "(LISTEN_FDS) was passed"))]))

;; open-listener : listen-spec #:backlog int #:socket-mode int #:socket-owner ...
;;                 #:socket-group ... -> listener
;; Each setting not given is default-listener-options' (listener-options.rkt).
(define (open-listener spec
                       #:backlog [backlog (listener-options-backlog default-listener-options)]
                       #:socket-mode [mode (listener-options-socket-mode default-listener-options)]
                       #:socket-owner [owner (listener-options-socket-owner default-listener-options)]
                       #:socket-group [group (listener-options-socket-group default-listener-options)])
  (case (listen-spec-kind spec)
    [(unix) (open-unix (listen-spec-target spec) backlog mode owner group)]
    [(tcp) (open-tcp spec backlog)]
    [else (adopt-fd (listen-spec-target spec))]))

;; open-tcp : listen-spec int -> listener
(define (open-tcp spec backlog)
  (define where (listen-spec->string spec))
  (define addr (host->bytes (listen-spec-target spec)))
  (define v6? (= 16 (bytes-length addr)))
  (define fd (c-socket (if v6? AF_INET6 AF_INET) socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (define (check-opt r what)
    (unless (eq? r #t) (close-fd) (raise-errno (format "cannot set ~a on ~a" what where) r)))
  (check-opt (setsockopt-int fd SOL_SOCKET SO_REUSEADDR 1) "SO_REUSEADDR")
  (when v6? (check-opt (setsockopt-int fd IPPROTO_IPV6 IPV6_V6ONLY 0) "IPV6_V6ONLY"))
  (define sa (make-sockaddr-in addr (listen-spec-port spec)))
  (check-syscall (c-bind fd sa (bytes-length sa)) (format "cannot bind ~a" where) close-fd)
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-fd)
  (define bound (make-bytes SOCKADDR_MAX 0))
  (check-syscall (c-getsockname fd bound (integer->integer-bytes SOCKADDR_MAX 4 #f))
                 (format "cannot read the address of ~a" where) close-fd)
  (define-values (ip port) (sockaddr->ip+port bound))
  (make-listener fd 'tcp (ip+port->string (bytes->ip ip) port) #f #f))

;; open-unix : string int int owner group -> listener
(define (open-unix path-str backlog mode owner group)
  (define path (path->complete-path path-str))
  (define path-bytes (path->bytes path))
  (define where (string-append "unix:" (path->string path)))
  (when (> (bytes-length path-bytes) SUN_PATH_MAX)
    (raise-transport "cannot listen on ~a: socket path is ~a bytes, the limit is ~a"
                     where (bytes-length path-bytes) SUN_PATH_MAX))
  (define uid (resolve-id owner uid-of-user "user"))
  (define gid (resolve-id group gid-of-group "group"))
  (define sa (make-sockaddr-un path-bytes))
  (remove-stale-socket! path sa where)
  (define fd (c-socket AF_UNIX socket-flags 0))
  (check-syscall fd (format "cannot create a socket for ~a" where))
  (define (close-fd) (c-close fd))
  (define (close-and-unlink) (c-close fd) (c-unlink path))
  ;; umask is process-wide: set it only for the bind, in atomic mode, so no other Racket
  ;; thread creates a file with it, and the socket never exists with a looser mode.
  (start-atomic)
  (define old-umask (c-umask #o177))
  (define bound (c-bind fd sa (bytes-length sa)))
  (define bind-errno (saved-errno))
  (c-umask old-umask)
  (end-atomic)
  (when (< bound 0)
    (close-fd)
    (raise-errno (format "cannot bind ~a" where) bind-errno))
  (check-syscall (c-chmod path mode) (format "cannot chmod ~a" where) close-and-unlink)
  (when (or uid gid)
    (check-syscall (c-chown path (or uid -1) (or gid -1))
                   (format "cannot chown ~a" where) close-and-unlink))
  (check-syscall (c-listen fd backlog) (format "cannot listen on ~a" where) close-and-unlink)
  (make-listener fd 'unix where path (file-id path)))

;; resolve-id : (or/c #f string exact-integer) (string -> (or/c int #f)) string -> (or/c int #f)
(define (resolve-id who lookup what)
  (cond [(string? who) (or (lookup who) (raise-transport "unknown ~a ~s" what who))]
        [else who]))

;; remove-stale-socket! : path bytes string -> void
;; A socket file left by a dead server refuses connections (ECONNREFUSED): remove it.
;; A live server, or anything that is not a socket, is left alone and reported.
(define (remove-stale-socket! path sa where)
  (define st (lstat path))
  (when st
    (unless (= #o140000 (bitwise-and (hash-ref st 'mode) #o170000))
      (raise-transport "cannot listen on ~a: the path exists and is not a socket" where))
    (define probe (c-socket AF_UNIX socket-flags 0))
    (check-syscall probe (format "cannot create a socket to probe ~a" where))
    (define r (c-connect probe sa (bytes-length sa)))
    (define errno (saved-errno))
    (c-close probe)
    (cond [(or (= r 0) (= errno EAGAIN))
           (raise-transport "another server is listening on ~a" where)]
          [(= errno ECONNREFUSED)
           (log-fastcgi-info "removing stale socket ~a" (log-escape where))
           (check-syscall (c-unlink path) (format "cannot remove stale socket ~a" where))]
          [else (raise-errno (format "cannot probe existing socket ~a" where) errno)])))
