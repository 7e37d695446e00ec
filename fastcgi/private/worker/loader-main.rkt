#lang racket/base
;; The program a generation's loader, or the pool's base, runs (loader.rkt):
;; racket -t loader-main.rkt -- [base-raw | base-servlet] CONFIG, under a logger with no
;; parent as a worker's (worker-main.rkt says why); the processes it forks go on under it.
(require "../util/relative-path.rkt")
(define-relative-path loader "loader.rkt")
(define-relative-path config "config.rkt")
(module+ main
  (define args (current-command-line-arguments))
  (define mode (and (= 2 (vector-length args)) (vector-ref args 0)))
  (parameterize ([current-logger (make-logger #f #f)])
    ((dynamic-require loader 'run-loader)
     ((dynamic-require config 'read-serve-config)
      (open-input-string (vector-ref args (sub1 (vector-length args)))))
     #:base (cond [(equal? mode "base-raw") 'raw]
                  [(equal? mode "base-servlet") 'servlet]
                  [else #f]))))
