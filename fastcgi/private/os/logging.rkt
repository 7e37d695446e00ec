#lang racket/base
;; Log lines to stderr, one line each: time, level, message. The `fastcgi` topic at the
;; chosen level, every other topic (the application's own loggers) at warning and above.
;; Messages of the `fastcgi` topic are escaped where they are made; every other topic's
;; message is escaped here (log-escape), so an application that logs untrusted text
;; cannot forge or split a line either.
(require "log-file.rkt"
         "../util/log.rkt"
         (only-in "../util/probes.rkt" take-pending-probe-lines!))
(provide start-stderr-logging!
         flush-logging)

;; The lines go through a log-file (log-file.rkt) on the error port: a bounded buffer and
;; a writer thread of its own. The printer thread only takes messages from the receiver
;; and puts them there (when the buffer is full, it counts them as dropped without
;; making their line), so the receiver's queue stays short while nobody reads standard
;; error.
(define printer #f)

;; start-stderr-logging! : symbol #:tag (or/c string #f) -> void
;; tag: put after the level on every line (the manager and workers use their pids).
;; Called again (a worker forked from a loader, which started it), it only takes the new
;; tag: the printer thread came along with the fork.
(define (start-stderr-logging! level #:tag [tag #f])
  (set! line-tag (if tag (string-append " " tag) ""))
  (unless printer (start-printer! level))
  ;; the lines of the probes that failed as the modules loaded, before anything logged
  (for ([line (in-list (take-pending-probe-lines!))])
    (log-fastcgi-warning "~a" line)))

;; start-printer! : symbol -> void
(define (start-printer! level)
  (define receiver (make-log-receiver (current-logger) level 'fastcgi 'warning #f))
  (define lf (open-log-port (current-error-port) #:name "standard error" #:notice line-bytes))
  (define (put! v) (log-file-write! lf (λ () (message-line v))))
  (set! printer
        (thread
         (λ ()
           (let loop ()
             (define v (sync receiver (thread-receive-evt)))
             (cond
               [(vector? v)
                (put! v)
                (loop)]
               [else
                ;; flush: what is already queued goes to the log-file, whose writer then
                ;; signals that flush's caller (each call has its own semaphore: a post
                ;; that comes after its caller gave up must not answer the next call)
                (define done (thread-receive))
                (let drain ()
                  (define v (sync/timeout 0 receiver))
                  (when v (put! v) (drain)))
                (log-file-sync! lf done)
                (loop)]))))))

;; message-line : (vector level message data topic) -> bytes ; without its newline
(define (message-line v)
  (define msg (if (eq? (vector-ref v 3) 'fastcgi) (vector-ref v 1) (log-escape (vector-ref v 1))))
  (line-bytes (vector-ref v 0) msg))

;; line-bytes : symbol string -> bytes ; time, level, tag, message
(define (line-bytes level msg)
  (string->bytes/utf-8
   (string-append (seconds->iso (current-seconds))
                  " " (symbol->string level) line-tag " " msg)))

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
