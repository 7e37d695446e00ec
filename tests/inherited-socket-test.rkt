#lang racket/base
;; fastcgi/private/transport/inherited-socket.rkt: whether a descriptor is a listening socket, an
;; fd:N listener adopted (made non-blocking), and the inherited listener of a child
;; process: fd 0 (FCGI_LISTENSOCK_FILENO) and systemd socket activation on fd 3.
(require compiler/find-exe
         ffi/unsafe
         racket/tcp
         rackunit
         "../fastcgi/private/os/ffi.rkt"
         "../fastcgi/private/transport/transport.rkt"
         (only-in "../fastcgi/private/transport/inherited-socket.rkt" adopt-fd)
         "lib/transport.rkt")

(define c-pipe (get-ffi-obj "pipe" #f (_fun _bytes -> _int)))
(define c-fcntl (get-ffi-obj "fcntl" #f (_fun #:varargs-after 2 _int _int _int -> _int)))
(define F_GETFL 3)
(define F_SETFL 4)
(define O_NONBLOCK #o4000)

;; cloexec? : fd -> boolean ; FD_CLOEXEC in the descriptor's flags
(define (cloexec? fd) (= 1 (bitwise-and 1 (c-fcntl fd 1 0))))   ; F_GETFD

(test-case "adopt-fd: a listening descriptor becomes an inherited listener, close-on-exec"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define fd (c-dup (listener-fd l)))          ; dup: not close-on-exec
  (check-false (cloexec? fd))
  (define a (adopt-fd fd))
  (check-equal? (listener-fd a) fd "a descriptor over 2 keeps its number")
  (check-true (cloexec? fd))
  (check-equal? (listener-address a) (format "fd:~a" fd))
  (check-equal? (listener-kind a) 'inherited)
  (listener-close! a)
  (listener-close! l)
  (define fds (make-bytes 8))
  (check-equal? (c-pipe fds) 0)
  (define r (integer-bytes->integer fds #t #f 0 4))
  (check-exn (transport-error? (regexp (format "^fastcgi: fd:~a is not a listening socket$" r)))
             (lambda () (adopt-fd r)))
  (c-close r)
  (void (c-close (integer-bytes->integer fds #t #f 4 8))))

(test-case "inherited-listener: #f without fd 0 or a LISTEN_FDS for this process"
  (unless (fd-listening-socket? 0)
    (define env (environment-variables-copy (current-environment-variables)))
    (environment-variables-set! env #"LISTEN_PID" #f)
    (environment-variables-set! env #"LISTEN_FDS" #f)
    (parameterize ([current-environment-variables env])
      (check-false (inherited-listener) "nothing inherited"))
    (environment-variables-set! env #"LISTEN_PID" #"1")
    (environment-variables-set! env #"LISTEN_FDS" #"1")
    (parameterize ([current-environment-variables env])
      (check-false (inherited-listener) "LISTEN_PID names another process"))
    (check-equal? (environment-variables-ref env #"LISTEN_FDS") #"1" "another's variables stay")))

(test-case "inherited-listener: systemd's variables are taken off before fd 3 is adopted"
  (unless (or (fd-listening-socket? 0) (fd-listening-socket? 3))
    (define env (environment-variables-copy (current-environment-variables)))
    (environment-variables-set! env #"LISTEN_PID" (string->bytes/utf-8 (number->string (c-getpid))))
    (environment-variables-set! env #"LISTEN_FDS" #"1")
    (parameterize ([current-environment-variables env])
      (check-exn (transport-error? #rx"fd:3 is not a listening socket")
                 (lambda () (inherited-listener))))
    (check-false (environment-variables-ref env #"LISTEN_PID"))
    (check-false (environment-variables-ref env #"LISTEN_FDS"))))

(test-case "fd-listening-socket? and fd:N listeners"
  (define fds (make-bytes 8))
  (check-equal? (c-pipe fds) 0)
  (define r (integer-bytes->integer fds #t #f 0 4))
  (define w (integer-bytes->integer fds #t #f 4 8))
  (check-false (fd-listening-socket? r))
  (check-exn (transport-error? (regexp (format "fd:~a is not a listening socket" r)))
             (lambda () (open-listener (parse-listen-address (format "fd:~a" r)))))
  (c-close r)
  (c-close w)
  (check-false (fd-listening-socket? 99999))
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define blocking-fd (c-dup (listener-fd l)))
  (c-fcntl blocking-fd F_SETFL 0)
  (check-equal? (bitwise-and (c-fcntl blocking-fd F_GETFL 0) O_NONBLOCK) 0)
  (define dup-l (open-listener (parse-listen-address (format "fd:~a" blocking-fd))))
  (check-equal? (bitwise-and (c-fcntl blocking-fd F_GETFL 0) O_NONBLOCK) O_NONBLOCK)
  (check-equal? (listener-kind dup-l) 'inherited)
  (check-regexp-match #rx"^fd:[0-9]+$" (listener-address dup-l))
  (check-equal? (round-trip dup-l (lambda () (tcp-connect "127.0.0.1" (listener-port l))))
                "127.0.0.1")
  (listener-close! dup-l)
  (listener-close! l))

(define child-program (child-program-with "(inherited-listener)"))

(test-case "inherited listener: fd 0 (FCGI_LISTENSOCK_FILENO) in a child process"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "exec ~a -e ~a" (find-exe) (shell-quote child-program)))
                "ok inherited fd:0 #f")
  (listener-close! l))

(test-case "inherited listener: systemd socket activation on fd 3"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "export LISTEN_PID=$$ LISTEN_FDS=1
                                      exec ~a -e ~a 3<&0 0</dev/null"
                                     (find-exe) (shell-quote child-program)))
                "ok inherited fd:3 #f")
  (listener-close! l))
