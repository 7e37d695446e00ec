#lang racket/base
;; Private sockets (private-socket.rkt), which the manager and its workers share instead of
;; files (control.rkt): no file, close-on-exec at both ends, and no other user on either
;; end: a connection from another user is closed unseen (and logged), a name another user
;; holds is not connected to. The other user is `nobody`, through setpriv.
(require ffi/unsafe/port
         racket/file
         racket/os
         rackunit
         "../fastcgi/private/worker/control.rkt"
         "../fastcgi/private/transport/transport.rkt"
         "integration/lib.rkt")

(define setpriv (path->string (require-program! "/usr/bin/setpriv" "util-linux")))
(define racket-exe (path->string (find-executable-path "racket")))
(define base (format "fastcgi-test-~a-~a" (getpid) (random 1000000000)))

;; cloexec? : fd -> boolean ; O_CLOEXEC in the fd's flags (octal, in /proc/self/fdinfo)
(define (cloexec? fd)
  (define m (regexp-match #px"flags:\\s+([0-7]+)" (file->string (format "/proc/self/fdinfo/~a" fd))))
  (positive? (bitwise-and (string->number (cadr m) 8) #o2000000)))

;; nobody-args : string -> (listof string) ; racket -e expr as uid and gid 65534
(define (nobody-args expr)
  (list "--reuid=65534" "--regid=65534" "--clear-groups" racket-exe "-e" expr))

(test-case "a connection of our user: accepted, close-on-exec at both ends"
  (define name (string-append base "/same"))
  (define l (open-private-listener name))
  (check-equal? (listener-address l) (string-append "unix:@" name))
  (define-values (in out) (private-connect name))
  (define-values (fd peer) (listener-accept-fd l))
  (check-equal? peer "unix")
  (check-true (cloexec? fd) "the accepted connection")
  (check-true (cloexec? (unsafe-port->file-descriptor in)) "the connecting end")
  (check-true (cloexec? (listener-fd l)) "the listener")
  (define-values (a-in a-out) (fd->ports fd peer))
  (write-string "hello\n" out)
  (flush-output out)
  (check-equal? (read-line a-in) "hello")
  (for-each close-input-port (list in a-in))
  (for-each close-output-port (list out a-out))
  (listener-close! l))

(test-case "a connection from another user is closed unseen, and logged"
  (define name (string-append base "/refuse"))
  (define l (open-private-listener name))
  (define receiver (make-log-receiver (current-logger) 'warning 'fastcgi))
  ;; nobody connects and reads: end of file when we close its connection
  (define expr (format "(require racket/unix-socket) (define-values (i o) (unix-socket-connect (bytes-append #\"\\0\" ~s))) (write (read-byte i))"
                       (string->bytes/utf-8 name)))
  (define result #f)
  (define t (thread (λ () (set! result (call-with-values (λ () (run-program setpriv (nobody-args expr) #:timeout 30)) list)))))
  (define accepted
    (let loop ([got '()])
      (define-values (fd peer) (listener-try-accept l))
      (cond
        [fd (loop (cons fd got))]
        [(thread-dead? t) got]
        [else (sleep 0.02) (loop got)])))
  (check-equal? accepted '() "no connection handed to the server")
  (check-equal? (car result) 0 (format "nobody's racket: ~a" (caddr result)))
  (check-equal? (cadr result) #"#<eof>")
  (define line (sync/timeout 5 receiver))
  (check-regexp-match #rx"refused 1 connection\\(s\\) from another user \\(the last: pid [0-9]+, uid 65534\\)"
                      (vector-ref line 1))
  (listener-close! l))

(test-case "a name another user holds is not connected to"
  (call-with-temp-dir
   "fcgi-private"
   (λ (dir)
     (define name (string-append base "/taken"))
     (define expr (format "(require racket/unix-socket) (define l (unix-socket-listen (bytes-append #\"\\0\" ~s))) (displayln \"listening\") (flush-output) (sleep 30)"
                          (string->bytes/utf-8 name)))
     (call-with-process
      "nobody" setpriv (nobody-args expr) #:dir dir #:stdout-pipe? #t
      (λ (p)
        (check-equal? (read-line/timeout (proc-stdout p) 20 "nobody's listener") "listening")
        (check-exn #rx"unix:@fastcgi-test-[^ ]*/taken is held by another user \\(uid 65534\\): not connecting"
                   (λ () (private-connect name))))))))

(test-case "nothing listening: a clear error; no board"
  (check-exn #rx"cannot connect to unix:@.*/none: Connection refused"
             (λ () (private-connect (string-append base "/none"))))
  (check-false (ask-board (string-append base "/none") 1)))
