#lang racket/base
;; Checks made before a server starts (`serve`, and all that `serve --check` does but load
;; the app): the files it will write can be opened, its listen address makes sense. Each
;; problem is one line for the operator (a user error naming the option), never a stack
;; trace, and a check leaves nothing behind.
(require "config.rkt"
         "../os/ffi.rkt"
         "../transport/transport.rkt")
(provide
 check-writable-file!
 check-serve-paths!
 check-listen-address!
 filesystem-reason)

;; check-writable-file! : string path-string -> void
;; Opens the file for appending and closes it again; a file that was not there before is
;; removed. "-" (standard output) is always fine.
(define (check-writable-file! flag path)
  (unless (equal? path "-")
    (define existed? (or (file-exists? path) (link-exists? path)))
    (with-handlers ([exn:fail:filesystem?
                     (λ (e) (raise-user-error 'raco-fastcgi "~a ~a: cannot open it for writing: ~a"
                                              flag path (filesystem-reason e)))])
      (close-output-port (open-output-file path #:exists 'append))
      (unless existed? (delete-file path)))))

;; check-serve-paths! : serve-config #:pid-file? boolean -> void
;; The access log, the slow log and (unless pid-file? is #f) the pid file.
(define (check-serve-paths! cfg #:pid-file? [pid-file? #t])
  (for ([get (in-list (list serve-config-access-log serve-config-slow-log
                            (if pid-file? serve-config-pid-file (λ (c) #f))))]
        [flag (in-list '("--access-log" "--slow-log" "--pid-file"))])
    (define path (get cfg))
    (when path (check-writable-file! flag path))))

;; check-listen-address! : serve-config -> string
;; The address's form; for a unix socket, that its folder exists and its owner and group
;; are known. The address is not bound (a running server holds it). Returns what it is.
(define (check-listen-address! cfg)
  (define addr (serve-config-listen cfg))
  (define (bad fmt . args)
    (raise-user-error 'raco-fastcgi "--listen ~a: ~a" addr (apply format fmt args)))
  (cond
    [(not addr) "inherited (fd 0 or systemd socket activation, at start)"]
    [else
     (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "~a" (exn-message e)))])
       (parse-listen-address addr))
     (define m (regexp-match #rx"^unix:(.*)$" addr))
     (when m
       (define-values (dir name must-be-dir?) (split-path (path->complete-path (cadr m))))
       (unless (and (path? dir) (directory-exists? dir))
         (bad "no folder ~a for the socket" dir))
       (for ([k (in-list '(socket-owner socket-group))]
             [get (in-list (list serve-config-socket-owner serve-config-socket-group))]
             [lookup (in-list (list uid-of-user gid-of-group))]
             [what (in-list '("user" "group"))])
         (define who (get cfg))
         (when (and (string? who) (not (lookup who)))
           (raise-user-error 'raco-fastcgi "--~a ~a: unknown ~a" k who what))))
     addr]))

;; filesystem-reason : exn -> string
;; The system's words ("No such file or directory") from a filesystem error, whose
;; message otherwise runs over several lines.
(define (filesystem-reason e)
  (define msg (exn-message e))
  (cond
    [(regexp-match #rx"system error: ([^;\n]*)" msg) => cadr]
    [else (car (regexp-match #rx"^[^\n]*" msg))]))
