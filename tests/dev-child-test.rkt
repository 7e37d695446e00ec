#lang racket/base
;; dev-child.rkt: the command line that starts the app's process under `raco fastcgi dev`
;; (its serve-config as config.rkt writes it, and dev's settings), in this process; and the
;; process itself, started with that command line as dev-reload.rkt starts it: at the end
;; of its stdin before the line that loads the app it exits 0 and removes dev's folder (dev
;; is gone); an app that does not load is exit 3, its error in the dev-error file and the
;; app file in the dev-files list. Reloading through HTTP: dev-test.
(require compiler/find-exe
         racket/file
         racket/list
         racket/os
         racket/port
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/dev/dev-child.rkt"
         "integration/lib.rkt")
(require/expose "../fastcgi/private/dev/dev-reload.rkt" (system-dirs))

(define (dev-settings dir)
  (hasheq 'dev-files (path->string (build-path dir "files-1"))
          'dev-error (path->string (build-path dir "error-1"))
          'warm-from (path->string (build-path dir "warm"))
          'system-dirs (map path->string (system-dirs))
          'dev-dir (path->string dir)
          'parent-pid (getpid)))

(define (config-for app sock)
  (make-serve-config #:app app #:listen (string-append "unix:" sock) #:socket-mode #o600
                     #:graceful-timeout 3 #:log-level 'warning))

(test-case "child-arguments: racket's flags, then the serve-config as written, then dev's settings"
  (define cfg (config-for "/srv/app.rkt" "/tmp/x/app.sock"))
  (define dev (dev-settings (string->path "/tmp/x")))
  (define args (child-arguments cfg dev))
  (check-equal? (take args 4) '("-N" "fastcgi-dev-app" "-l" "racket/base"))
  (check-equal? (list-ref args 4) "-e")
  (check-regexp-match #rx"^\\(require \\(submod \\(file \".*/dev-child.rkt\"\\) child\\)\\)$" (list-ref args 5))
  (check-equal? (length args) 8)
  (check-equal? (read-serve-config (open-input-string (list-ref args 6))) cfg)
  (check-equal? (read (open-input-string (list-ref args 7))) dev))

;; start-child : path path -> (values subprocess output-port path)
;; The app's process for app, as dev starts it; its stdin, and the folder standing for dev's.
(define (start-child dir app)
  (define dev-dir (build-path dir "dev"))
  (make-directory dev-dir)
  (define-values (p out in err)
    (apply subprocess (current-output-port) #f (current-error-port) (find-exe)
           (child-arguments (config-for (path->string app) (path->string (build-path dev-dir "app.sock")))
                            (dev-settings dev-dir))))
  (values p in dev-dir))

(test-case "the end of stdin before the load line: exit 0, dev's folder removed"
  (call-with-temp-dir
   "fcgi-dchild"
   (λ (dir)
     (define-values (p in dev-dir) (start-child dir (build-path dir "app.rkt")))
     (close-output-port in)
     (check-equal? (sync/timeout 60 p) p "it exits")
     (check-equal? (subprocess-status p) 0)
     (check-false (directory-exists? dev-dir)))))

(test-case "an app that does not load: exit 3, the error in dev-error, the app file in dev-files"
  (call-with-temp-dir
   "fcgi-dchild"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (display-to-file "#lang racket/base\n(provide start)\n(define (start r) r)\n(error 'app \"broken at load\")\n" app)
     (define-values (p in dev-dir) (start-child dir app))
     (dynamic-wind
      void
      (λ ()
        (write-string "load\n" in)
        (flush-output in)
        (check-equal? (sync/timeout 60 p) p "it exits")
        (check-equal? (subprocess-status p) 3)
        (check-regexp-match #rx"app: broken at load" (file->string (build-path dev-dir "error-1")))
        (define entries (with-input-from-file (build-path dev-dir "files-1") (λ () (port->list read))))
        (check-not-false (assoc 'app (map (λ (e) (cons (car e) (cdr e))) entries)))
        (check-equal? (cadr (assq 'app entries)) (path->string app)))
      (λ () (close-output-port in) (subprocess-kill p #t))))))
