#lang racket/base
;; What a worker (or the single process) watches of its requests: each answered one goes
;; into the request metrics and the access log (make-observer, the server's observer); the
;; server's timer runs the scans for requests past the slow threshold (slow-watcher, the
;; slow log) and for handlers that ignore the request timeout (stuck-watcher).
(require (only-in "../os/ffi.rkt" [c-getpid getpid])
         "../util/clock.rkt"
         "../util/limits.rkt"
         "../os/log-file.rkt"
         "../util/log.rkt"
         "../status/metrics.rkt"
         "../engine/request.rkt"
         "../engine/server.rkt"
         "../util/table.rkt"
         "../engine/wire.rkt"
         (only-in "stacks.rkt" thread-stack))
(provide make-observer
         slow-watcher
         stuck-watcher)

;; make-observer : metrics (or/c log-file #f) -> (fastcgi-request flonum -> void)
;; Each answered request goes into the metrics and, with an access log, its line; its queue
;; time is from the time the front passed (queue-time.rkt) to the one it arrived here.
(define (make-observer m lf)
  (define pid (getpid))
  (λ (r ms)
    (define queue (request-queue-time-ms r))
    (metrics-record! m (fastcgi-request-status r) (fastcgi-request-bytes-out r) ms queue)
    (when lf
      (log-file-write-access! lf (current-inexact-milliseconds)
                              (or (request-param r #"REMOTE_ADDR") (string->bytes/utf-8 (fastcgi-request-peer r)))
                              (request-param r #"REQUEST_METHOD")
                              (request-param r #"REQUEST_URI")
                              (fastcgi-request-status r)
                              (fastcgi-request-bytes-out r)
                              ms pid queue))))

;; slow-watcher : server log-file real box -> (-> void)
;; At each run (twice a second): every request whose handler has run past the threshold
;; is written to the slow log once, with the handler thread's stack at that moment (what
;; it is stuck on). The slow log's writes are queued (log-file.rkt): the timer never waits
;; on the disk.
(define (slow-watcher srv lf threshold slow-count)
  (define seen (make-weak-hasheq))
  (define pid (getpid))
  (λ ()
    (define now (now-ms))
    (for* ([c (in-list (table-values (server-connections srv)))]
           [r (in-list (table-values (conn-requests c)))])
      (define t (fastcgi-request-handler r))
      (define ran (/ (- now (fastcgi-request-start-ms r)) 1000.0))
      (when (and t (> ran threshold) (not (hash-ref seen r #f)) (not (thread-dead? t)))
        (hash-set! seen r #t)
        (counter-add! slow-count 1)
        (define stack (map (λ (f) (string-append "    " f)) (thread-stack t)))
        (log-file-write!
         lf
         (string->bytes/utf-8
          (string-append
           (format "~a pid ~a request ~a from ~a \"~a ~a\" running for ~a s (threshold ~a s)"
                   (timestamp (current-inexact-milliseconds)) pid (fastcgi-request-id r) (log-escape (fastcgi-request-peer r))
                   (log-escape (or (request-param r #"REQUEST_METHOD") #"-"))
                   (log-escape (or (request-param r #"REQUEST_URI") #"-"))
                   (/ (round (* ran 10)) 10.0) threshold)
           (apply string-append (map (λ (l) (string-append "\n" (log-escape l))) stack)))))))))

;; stuck-watcher : server (string any ... -> void) -> (-> void)
;; A handler stopped by the request timeout gets a break; its request is ended 5 s later
;; whatever it does. A handler thread still running 10 s after that ignores breaks (a
;; tight loop with breaks disabled, a foreign call): the worker cannot get it back, so it
;; asks the manager to replace it (gracefully: the other requests finish). Each run of the
;; task looks once; the ask goes from a thread of its own, so that a manager slow to read
;; never holds up the timer.
(define (stuck-watcher srv report!)
  (define broken (make-weak-hasheq))          ; request -> its handler thread
  (define asked? #f)
  (λ ()
    (for* ([c (in-list (table-values (server-connections srv)))]
           [r (in-list (table-values (conn-requests c)))])
      (when (and (fastcgi-request-broken-ms r) (fastcgi-request-handler r))
        (hash-set! broken r (fastcgi-request-handler r))))
    (define now (now-ms))
    (define stuck
      (for/list ([(r t) (in-hash broken)]
                 #:when (and (not (thread-dead? t))
                             (eq? (fastcgi-request-state r) 'done)
                             (> (- now (fastcgi-request-start-ms r))
                                (* 1000 (+ 15 (limits-request-timeout (server-limits srv)))))))
        r))
    (for ([r (in-list (for/list ([(r t) (in-hash broken)] #:when (thread-dead? t)) r))])
      (hash-remove! broken r))
    (when (and (pair? stuck) (not asked?))
      (set! asked? #t)
      (log-fastcgi-error "~a handler thread(s) ignored the request timeout; asking for a fresh worker"
                         (length stuck))
      (thread (λ () (report! 'recycle #:why "a handler ignores the request timeout"))))))
