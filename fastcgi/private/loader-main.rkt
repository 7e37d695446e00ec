#lang racket/base
;; The program a generation's loader runs (loader.rkt): racket -t loader-main.rkt -- CONFIG,
;; under a logger with no parent as a worker's (worker-main.rkt says why); the workers it
;; forks go on under it.
(require racket/runtime-path)
(define-runtime-path loader "loader.rkt")
(define-runtime-path config "config.rkt")
(module+ main
  (define args (current-command-line-arguments))
  (parameterize ([current-logger (make-logger #f #f)])
    ((dynamic-require loader 'run-loader)
     ((dynamic-require config 'read-serve-config)
      (open-input-string (vector-ref args (sub1 (vector-length args))))))))
