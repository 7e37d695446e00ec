#lang racket/base
;; Log lines to stderr, one line each: time, level, message. The `fastcgi` topic at the
;; chosen level, every other topic (the application's own loggers) at warning and above.
;; Messages of the `fastcgi` topic are escaped where they are made; every other topic's
;; message is escaped here (log-escape), so an application that logs untrusted text
;; cannot forge or split a line either.
(require racket/date
         "log.rkt")
(provide start-stderr-logging!
         flush-logging)

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
                (write-line v err)
                (loop)]
               [else
                ;; flush: print what is already queued, then signal that flush's caller
                ;; (each call has its own semaphore: a post that comes after its caller
                ;; gave up must not answer the next call)
                (define done (thread-receive))
                (let drain ()
                  (define v (sync/timeout 0 receiver))
                  (when v (write-line v err) (drain)))
                (semaphore-post done)
                (loop)]))))))

;; write-line : (vector level message data topic) output-port -> void
(define (write-line v out)
  (define level (vector-ref v 0))
  (define msg (if (eq? (vector-ref v 3) 'fastcgi) (vector-ref v 1) (log-escape (vector-ref v 1))))
  (define d (seconds->date (current-seconds) #f))
  (write-string (string-append (parameterize ([date-display-format 'iso-8601]) (date->string d #t))
                               " " (symbol->string level) line-tag " " msg "\n")
                out)
  (flush-output out))

(define line-tag "")

;; flush-logging : -> any ; wait (at most 2 s) until queued log lines are printed
;; #f: the wait timed out (or the printer is gone)
(define (flush-logging)
  (cond
    [printer
     (define done (make-semaphore 0))
     (and (thread-send printer done #f)
          (sync/timeout 2 done))]
    [else #t]))
