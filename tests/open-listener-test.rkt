#lang racket/base
;; fastcgi/private/transport/open-listener.rkt: the listener an address names, opened on real
;; sockets: unix paths in a temp dir (mode, owner, stale and live socket files, a path too
;; long), TCP on 127.0.0.1 and ::1 port 0, and listener-for (an address, a listener, or
;; #f: the inherited one, in a child process).
(require compiler/find-exe
         ffi/unsafe/port
         racket/file
         racket/tcp
         racket/unix-socket
         rackunit
         "../fastcgi/private/os/ffi.rkt"
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/transport/transport.rkt"
         "lib/transport.rkt")

(define tmp-dir (make-temporary-file "fcgi-open-listener-~a" 'directory))
(define (tmp name) (path->string (build-path tmp-dir name)))

(test-case "unix listener: mode, round trip, peer, close removes the file"
  (define path (tmp "a.sock"))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (check-equal? (listener-kind l) 'unix)
  (check-equal? (listener-address l) (string-append "unix:" path))
  (check-equal? (file-or-directory-permissions path 'bits) #o660)
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  (listener-close! l)
  (listener-close! l)
  (check-false (exists? path)))

(test-case "unix listener: custom mode, numeric owner and group, relative path"
  (define dir-stat (file-or-directory-stat tmp-dir))
  (define l (parameterize ([current-directory tmp-dir])
              (open-listener (parse-listen-address "unix:rel.sock")
                             #:socket-mode #o600
                             #:socket-owner (hash-ref dir-stat 'user-id)
                             #:socket-group (hash-ref dir-stat 'group-id))))
  (define path (tmp "rel.sock"))
  (check-equal? (listener-address l) (string-append "unix:" path))
  (check-equal? (file-or-directory-permissions path 'bits) #o600)
  (check-equal? (hash-ref (file-or-directory-stat path) 'user-id) (hash-ref dir-stat 'user-id))
  (listener-close! l)
  (check-false (exists? path))
  (check-exn (transport-error? #rx"unknown user \"no-such-user-fcgi\"")
             (lambda () (open-listener (parse-listen-address (string-append "unix:" path))
                                       #:socket-owner "no-such-user-fcgi")))
  (check-false (exists? path)))

(test-case "user and group names resolve through getpwnam and getgrnam"
  (check-equal? (uid-of-user "root") 0)
  (check-equal? (gid-of-group "root") 0)
  (check-false (uid-of-user "no-such-user-fcgi"))
  (check-false (gid-of-group "no-such-group-fcgi")))

(test-case "unix listener: a stale socket file is replaced"
  (define path (tmp "stale.sock"))
  (define fd (c-socket AF_UNIX SOCK_STREAM 0))
  (define sa (make-sockaddr-un (string->bytes/utf-8 path)))
  (check-equal? (c-bind fd sa (bytes-length sa)) 0)
  (c-close fd)
  (check-true (exists? path))
  (define log (make-log-receiver fastcgi-logger 'info))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  ;; HOSTILE.md item 28: detected, removed (said so in the log), rebound with mode 0660
  (check-equal? (bitwise-and (file-or-directory-permissions path 'bits) #o777) #o660)
  (check-true (for/or ([_ 20])
                (define v (sync/timeout 1 log))
                (and v (regexp-match? #rx"removing stale socket unix:.*stale[.]sock" (vector-ref v 1))))
              "the removal is logged")
  (listener-close! l))

(test-case "unix listener: a live server or a regular file is refused, left untouched"
  (define path (tmp "live.sock"))
  (define spec (parse-listen-address (string-append "unix:" path)))
  (define l (open-listener spec))
  (check-exn (transport-error? #rx"another server is listening on unix:")
             (lambda () (open-listener spec)))
  ;; the probe's connection reaches the live server, which sees it close at once
  (define-values (pi po peer) (listener-accept l))
  (check-equal? (read-bytes 1 pi) eof)
  (for-each close-port (list pi po))
  (check-equal? (round-trip l (lambda () (unix-socket-connect path))) "unix")
  (listener-close! l)
  (define file (tmp "regular"))
  (call-with-output-file file (lambda (o) (write-string "keep me" o)))
  (check-exn (transport-error? #rx"not a socket")
             (lambda () (open-listener (parse-listen-address (string-append "unix:" file)))))
  (check-equal? (file->string file) "keep me"))

(test-case "unix listener: close leaves alone a file that replaced our socket"
  (define path (tmp "replaced.sock"))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (delete-file path)
  (call-with-output-file path (lambda (o) (write-string "new" o)))
  (listener-close! l)
  (check-equal? (file->string path) "new"))

(test-case "unix listener: path too long for sun_path"
  (define long-dir (build-path tmp-dir (make-string 100 #\d)))
  (make-directory long-dir)
  (check-exn (transport-error? #rx"socket path is [0-9]+ bytes, the limit is 107")
             (lambda () (parameterize ([current-directory long-dir])
                          (open-listener (parse-listen-address "unix:x.sock"))))))

(test-case "TCP listeners on 127.0.0.1 and ::1: bound port, peer, TCP_NODELAY"
  ;; "[::]" is dual-stack: an IPv4 client arrives as ::ffff:127.0.0.1, reported as 127.0.0.1
  (for ([spec '("127.0.0.1:0" "[::1]:0" "localhost:0" "[::]:0")]
        [host '("127.0.0.1" "::1" "127.0.0.1" "127.0.0.1")]
        [rx (list #rx"^127\\.0\\.0\\.1:[0-9]+$" #rx"^\\[::1\\]:[0-9]+$" #rx"^127\\.0\\.0\\.1:"
                  #rx"^\\[::\\]:[0-9]+$")])
    (define l (open-listener (parse-listen-address spec)))
    (check-equal? (listener-kind l) 'tcp)
    (check-regexp-match rx (listener-address l))
    (check-true (> (listener-port l) 0))
    (define-values (ci co) (tcp-connect host (listener-port l)))
    (define-values (si so peer) (listener-accept l))
    (check-equal? peer host spec)
    (check-equal? (getsockopt-int (unsafe-port->file-descriptor so) IPPROTO_TCP TCP_NODELAY) 1)
    (check-false (fd-listening-socket? (unsafe-port->file-descriptor so)))
    (check-true (fd-listening-socket? (listener-fd l)))
    (for-each close-port (list ci co si so))
    (check-equal? (round-trip l (lambda () (tcp-connect host (listener-port l)))) host)
    (listener-close! l)))

(test-case "TCP: a port in use is one clear error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-exn (transport-error? #rx"^fastcgi: cannot bind 127\\.0\\.0\\.1:[0-9]+: .*\\(errno 98\\)$")
             (lambda () (open-listener (parse-listen-address (listener-address l)))))
  (listener-close! l))

(test-case "listener-for: an address opened with its listener-options, a listener as is"
  (define path (tmp "for.sock"))
  (define l (listener-for (string-append "unix:" path) (make-listener-options #:socket-mode #o600)))
  (check-equal? (listener-kind l) 'unix)
  (check-equal? (file-or-directory-permissions path 'bits) #o600)
  (check-eq? (listener-for l) l)
  (listener-close! l)
  (define d (listener-for (string-append "unix:" path)))
  (check-equal? (file-or-directory-permissions path 'bits) #o660 "default-listener-options' mode")
  (listener-close! d)
  (define t (listener-for "127.0.0.1:0" (make-listener-options #:backlog 2)))
  (check-regexp-match #rx"^127[.]0[.]0[.]1:[0-9]+$" (listener-address t))
  (listener-close! t))

(test-case "listener-for #f: the inherited listener, else one clear error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (run-child l (format "exec ~a -e ~a" (find-exe)
                                     (shell-quote (child-program-with "(listener-for #f)"))))
                "ok inherited fd:0 #f")
  (listener-close! l)
  (define env (environment-variables-copy (current-environment-variables)))
  (environment-variables-set! env #"LISTEN_PID" #f)
  (unless (fd-listening-socket? 0)
    (parameterize ([current-environment-variables env])
      (check-exn (transport-error? #rx"^fastcgi: no address to listen on: give --listen")
                 (lambda () (listener-for #f))))))

(delete-directory/files tmp-dir)
