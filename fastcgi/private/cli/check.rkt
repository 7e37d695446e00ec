#lang racket/base
;; `raco fastcgi serve --check`, like `nginx -t` and `php-fpm -t`: the options have been
;; parsed and their values checked (serve-cli.rkt); here the files the server would write are
;; opened, the listen address is looked at, and the app is loaded in this process by the
;; loader the workers use, with the same limits and servlet settings. Nothing is served:
;; the address is not bound (a running server holds it), and no file is left behind.
(require "../worker/config.rkt"
         "../util/log.rkt"
         "../os/logging.rkt"
         "../worker/preflight.rkt"
         "../transport/transport.rkt"
         "../worker/serve-app.rkt")
(provide check-serve)

;; check-serve : serve-config -> none
;; Exits 0 with one line on stdout when all is well; a problem is a user error (one line
;; on stderr, exit status 1).
(define (check-serve cfg)
  ;; the app's and the loader's warnings are shown
  (start-stderr-logging! 'warning)
  (check-serve-paths! cfg)
  (define where (check-listen-address! cfg))
  (define allowed (serve-config-allowed-clients cfg))
  (when allowed (parse-allowed-clients allowed))
  (define-values (handler roles servlet)
    (load-configured-app cfg (λ (msg) (flush-logging) (raise-user-error 'raco-fastcgi "~a" msg))))
  (flush-logging)
  (printf "raco fastcgi serve: configuration ok: ~a loads (~a; roles ~a), listen ~a\n"
          (log-escape (serve-config-app cfg)) (if servlet "servlet" "raw handler") roles where)
  (exit 0))
