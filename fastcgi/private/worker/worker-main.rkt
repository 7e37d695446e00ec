#lang racket/base
;; The program a worker process runs: racket -t worker-main.rkt -- CONFIG.
;; As in raco.rkt, the worker's modules are loaded under a logger with no parent, so the
;; root logger's default stderr receiver does not print error lines a second time (the
;; worker prints the `fastcgi` log itself, timestamped and tagged with its pid).
;; CONFIG is the serve-config the manager wrote (config.rkt's write-serve-config).
(require "../util/relative-path.rkt")
(define-relative-path worker "worker.rkt")
(define-relative-path config "config.rkt")
(module+ main
  (define args (current-command-line-arguments))
  (parameterize ([current-logger (make-logger #f #f)])
    ((dynamic-require worker 'run-worker)
     ((dynamic-require config 'read-serve-config)
      (open-input-string (vector-ref args (sub1 (vector-length args))))))))
