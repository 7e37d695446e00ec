#lang racket/base
;; The answers a worker (or the single process) makes itself, before its app: the status
;; path (the pool's status, rendered by pool-status.rkt in the format the query asks for)
;; and the ping path, with their CGI heads from cgi.rkt; and the status board of a
;; single-process server, which has no manager to keep one.
(require "../util/jsexpr.rkt"
         (only-in "../os/ffi.rkt" [c-getpid getpid])
         (only-in "../protocol/cgi.rkt" cgi-head status-page)
         "../util/clock.rkt"
         "config.rkt"
         (only-in "../engine/connection.rkt" queue-delay-ms)
         (only-in "../os/log-file.rkt" log-lines-dropped)
         "../status/pool-status.rkt"
         "../status/stacks-text.rkt"
         (only-in "stacks.rkt" running-stacks)
         "../engine/request.rkt"
         "../engine/wire.rkt")
(provide wrap-status-paths
         single-board
         single-stacks)

;; single-board : server serve-config flonum [hash] -> hash
;; The status of a single-process server; mjs: its request metrics (metrics->jsexpr), on the
;; pool and on its one worker.
(define (single-board srv cfg start-ms [mjs (hasheq)])
  (define now (now-ms))
  (define stats (server-stats srv))
  (define running (unbox (server-running srv)))
  (define rss (let ([m (with-handlers ([exn:fail? (λ (e) #f)])
                         (regexp-match #rx"VmRSS:[ \t]*([0-9]+) kB" (call-with-input-file "/proc/self/status" port->string*)))])
                (and m (* 1024 (string->number (cadr m))))))
  (define (with-metrics h) (for/fold ([h h]) ([(k v) (in-hash mjs)]) (hash-set h k v)))
  (with-metrics
   (hasheq 'pool (let-values ([(b n d) (split-path (serve-config-app cfg))]) (path->string n))
          'pm "single" 'listen (or (serve-config-listen cfg) "inherited") 'master_pid (getpid)
          'start_time (inexact->exact (floor (/ (wall-ms-at start-ms) 1000)))
          'uptime (inexact->exact (floor (/ (- now start-ms) 1000)))
          'generation 1
          'accepted_connections (hash-ref stats 'connections 0)
          'requests (hash-ref stats 'requests 0)
          'listen_queue (json-null)
          'active_workers (if (positive? running) 1 0)
          'idle_workers (if (positive? running) 0 1)
          'total_workers 1 'max_active_workers 1 'max_workers_reached 0
          'slow_requests 0 'shed_requests (hash-ref stats 'shed 0) 'restarts 0 'recycled 0 'reloads 0 'reload_failures 0
          'log_dropped (log-lines-dropped)
          'workers (list (with-metrics
                         (hasheq 'pid (getpid) 'state (if (positive? running) "busy" "idle")
                                 'generation 1 'requests (hash-ref stats 'requests 0)
                                 'active running 'connections (hash-ref stats 'connections 0)
                                 'shed (hash-ref stats 'shed 0)
                                 'queue_delay (inexact->exact (round (queue-delay-ms srv)))
                                 'memory (or rss (json-null))
                                 'uptime (inexact->exact (floor (/ (- now start-ms) 1000)))))))))

;; single-stacks : server -> hash ; manager-stacks.rkt's answer, for a single process
(define (single-stacks srv)
  (hasheq 'workers (list (hasheq 'pid (getpid) 'id 1 'generation 1 'state "ready" 'answered #t
                                 'requests (running-stacks srv)))))

;; port->string* : input-port -> string
(define (port->string* in)
  (let ([o (open-output-string)]) (copy-port* in o) (get-output-string o)))
;; copy-port* : input-port output-port -> void
(define (copy-port* in out)
  (define bs (read-bytes 4096 in))
  (unless (eof-object? bs) (write-bytes bs out) (copy-port* in out)))

;; wrap-status-paths : handler #:status-path #:ping-path #:board #:stacks -> handler
;; Requests for the status or ping path are answered here and never reach the app. The path
;; is REQUEST_URI without its query (SCRIPT_NAME when the front sends no REQUEST_URI).
;; board: -> (or/c hash #f), the pool status now; stacks: -> (or/c hash #f), what every
;; running request does now (?stacks: manager-stacks.rkt's answer).
(define (wrap-status-paths handler #:status-path status-path #:ping-path ping-path #:board board
                           #:stacks [stacks (λ () #f)])
  (cond
    [(not (or status-path ping-path)) handler]
    [else
     (define status-b (and status-path (string->bytes/utf-8 status-path)))
     (define ping-b (and ping-path (string->bytes/utf-8 ping-path)))
     (λ (r)
       (define path (request-path r))
       (cond
         [(and status-b (equal? path status-b))
          (if (member "stacks" (query-keys (request-param r #"QUERY_STRING")))
              (answer-stacks r (stacks))
              (answer-status r (board)))]
         [(and ping-b (equal? path ping-b))
          (write-bytes ping-answer (fastcgi-request-stdout r))]
         [else (handler r)]))]))

;; request-path : fastcgi-request -> (or/c bytes #f)
(define (request-path r)
  (define uri (request-param r #"REQUEST_URI"))
  (cond
    [uri (car (regexp-match #rx#"^[^?]*" uri))]
    [else (request-param r #"SCRIPT_NAME")]))

;; The status and ping answers change with each request: no cache may keep them.
(define no-store '((#"Cache-Control" . #"no-store")))
(define ping-answer (bytes-append (cgi-head #f #"text/plain" no-store) #"pong\n"))

;; answer-stacks : fastcgi-request (or/c hash #f) -> void
;; ?stacks: text, or JSON with json too; 503 when the manager did not answer.
(define (answer-stacks r answer)
  (define out (fastcgi-request-stdout r))
  (cond
    [answer
     (define json? (member "json" (query-keys (request-param r #"QUERY_STRING"))))
     (write-bytes (bytes-append (cgi-head #f (if json? #"application/json" #"text/plain; charset=utf-8") no-store)
                                (render-stacks answer (if json? 'json 'text)))
                  out)]
    [else (write-bytes (status-page 503 #"no answer from the manager\n") out)]))

;; answer-status : fastcgi-request (or/c hash #f) -> void
;; The board in the query's format; 503 while the manager has not published one yet.
(define (answer-status r board)
  (define out (fastcgi-request-stdout r))
  (cond
    [board
     (define fmt (status-format (request-param r #"QUERY_STRING")))
     (write-bytes (bytes-append (cgi-head #f (status-content-type fmt) no-store) (render-status board fmt))
                  out)]
    [else (write-bytes (status-page 503 #"no status yet\n") out)]))
