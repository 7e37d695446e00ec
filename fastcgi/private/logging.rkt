#lang racket/base
;; Log lines to stderr, one line each: time, level, message. The `fastcgi` topic at the
;; chosen level, every other topic (the application's own loggers) at warning and above.
;; Messages of the `fastcgi` topic are escaped where they are made.
(require racket/date
         "log.rkt")
(provide start-stderr-logging!
         flush-logging)

(define done (make-semaphore 0))
(define printer #f)

;; start-stderr-logging! : symbol #:tag (or/c string #f) -> void
;; tag: put after the level on every line (the manager and workers use their pids).
(define (start-stderr-logging! level #:tag [tag #f])
  (set! line-tag (if tag (string-append " " tag) ""))
  (define receiver (make-log-receiver (current-logger) level 'fastcgi 'warning #f))
  (define err (current-error-port))
  (set! printer
        (thread
         (λ ()
           (let loop ()
             (define v (sync receiver (thread-receive-evt)))
             (cond
               [(vector? v)
                (write-line (vector-ref v 0) (vector-ref v 1) err)
                (loop)]
               [else
                ;; flush: print what is already queued, then signal
                (thread-receive)
                (let drain ()
                  (define v (sync/timeout 0 receiver))
                  (when v (write-line (vector-ref v 0) (vector-ref v 1) err) (drain)))
                (semaphore-post done)
                (loop)]))))))

;; write-line : symbol string output-port -> void
(define (write-line level msg out)
  (define d (seconds->date (current-seconds) #f))
  (write-string (string-append (parameterize ([date-display-format 'iso-8601]) (date->string d #t))
                               " " (symbol->string level) line-tag " " msg "\n")
                out)
  (flush-output out))

(define line-tag "")

;; flush-logging : -> void ; wait (at most 2 s) until queued log lines are printed
(define (flush-logging)
  (when printer
    (thread-send printer 'flush #f)
    (sync/timeout 2 done)))
