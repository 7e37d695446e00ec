#lang racket/base
;; The pool's status, as the manager publishes it (the scoreboard, scoreboard.rkt) and as
;; people and programs read it: plain text, JSON, OpenMetrics (Prometheus) and an HTML page
;; that refreshes itself. Rendering only: no I/O but reading the scoreboard file.
(require "../util/jsexpr.rkt"
         racket/list
         racket/string
         "scoreboard.rkt"
         "../util/xexpr.rkt"
         "status-metrics.rkt")
(provide read-scoreboard
         write-scoreboard!
         status-format
         query-keys
         render-status
         status-content-type)

;; status-format : (or/c bytes #f) -> symbol
;; From the query string: json, openmetrics, prometheus (the older text format), html,
;; else text. "full" is accepted for
;; php-fpm habits (the text format always lists the workers).
(define (status-format query)
  (define keys (query-keys query))
  (cond
    [(member "json" keys) 'json]
    [(member "openmetrics" keys) 'openmetrics]
    [(member "prometheus" keys) 'prometheus]
    [(member "html" keys) 'html]
    [else 'text]))

;; query-keys : (or/c bytes #f) -> (listof string) ; the names in a query string
(define (query-keys query)
  (define q (if query (bytes->string/latin-1 query) ""))
  (map (λ (kv) (car (string-split kv "=" #:trim? #f))) (string-split q "&")))

;; status-content-type : symbol -> bytes
(define (status-content-type fmt)
  (case fmt
    [(json) #"application/json"]
    [(openmetrics) #"application/openmetrics-text; version=1.0.0; charset=utf-8"]
    [(prometheus) #"text/plain; version=0.0.4; charset=utf-8"]
    [(html) #"text/html; charset=utf-8"]
    [else #"text/plain; charset=utf-8"]))

;; The pool totals, in the order the text and HTML formats show them:
;; key, label, OpenMetrics name, OpenMetrics type, help.
(define totals
  '((pool "pool" #f #f #f)
    (pm "process manager" #f #f #f)
    (listen "listen" #f #f #f)
    (master_pid "master pid" #f #f #f)
    (start_time "start time" start_time_seconds gauge "Unix time the manager started")
    (uptime "uptime (s)" uptime_seconds gauge "Seconds since the manager started")
    (generation "generation" generation gauge "Reloads so far (the workers' generation)")
    (preload "preload" #f #f #f)
    (loader_pid "loader pid" #f #f #f)
    (image_memory "image memory" image_memory_bytes gauge "Resident memory of the process that loaded the serving generation's app once and forks its workers, which share it")
    (loader_restarts "loader restarts" loader_restarts counter "Loaders started again after an unexpected exit")
    (accepted_connections "accepted connections" accepted_connections counter "Connections accepted by all workers")
    (requests "requests" requests counter "Requests handed to the app by all workers")
    (listen_queue "listen queue" listen_queue gauge "Connections waiting in the accept queue (TCP only)")
    (active_workers "active workers" active_workers gauge "Workers handling a request now")
    (idle_workers "idle workers" idle_workers gauge "Workers ready and handling nothing")
    (total_workers "total workers" total_workers gauge "Worker processes, starting and draining included")
    (late_workers "late workers" late_workers gauge "Workers that have sent nothing for 3 s or more (frozen, stopped, blocked in a foreign call); past the request timeout plus 10 s they are killed")
    (draining_workers "draining workers" draining_workers gauge "Workers being replaced (reload, recycling, fewer workers) that still finish requests or serve their servlet sessions")
    (sessions "live sessions" sessions gauge "Servlet sessions (instances holding continuations) alive in the workers")
    (max_active_workers "max active workers" max_active_workers gauge "Most workers active at once since start")
    (max_workers_reached "max workers reached" max_workers_reached counter "Times the pool wanted a worker past its maximum")
    (slow_requests "slow requests" slow_requests counter "Requests that ran past the slow threshold")
    (shed_requests "shed requests" shed_requests counter "Requests answered 503 at once because the worker was overloaded (max-queue-delay, max-concurrent, max-connections)")
    (log_dropped "log lines dropped" log_dropped counter "Log lines dropped because their log was not being read fast enough (standard error, the access and slow logs; manager and workers)")
    (restarts "restarts" restarts counter "Workers started again after an unexpected exit")
    (unresponsive_kills "unresponsive kills" unresponsive_kills counter "Workers killed and replaced because they stopped reporting")
    (recycled "recycled" recycled counter "Workers replaced after max-requests, max-memory or a stuck handler")
    (orphans_reaped "orphans reaped" orphans_reaped counter "Exited processes left behind by the programs handlers start (re-parented to the manager as subreaper or PID 1) that the manager reaped")
    (untracked_stopped "untracked stopped" untracked_stopped counter "Processes forked for the pool that the manager never tracked (a fork answered after its deadline, or a process never answered for) and stopped")
    (reloads "reloads" reloads counter "Reloads (SIGHUP) completed")
    (reload_failures "reload failures" reload_failures counter "Reloads abandoned because the new generation did not start")
    (last_reload_error "last reload error" #f #f #f)
    (canary_forwards "canary forwards" canary_forwards counter "Canary reloads whose canary passed its trial: the rest of the generation started")
    (canary_rollbacks "canary rollbacks" canary_rollbacks counter "Canary reloads rolled back: the canary died, or its share of 5xx answers was over the old generation's by more than --canary-max-errors points")
    (start_failures "start failures" start_failures gauge "Workers in a row that died before they were ready or soon after (0 again once a new worker lasts)")
    (last_start_error "last start error" #f #f #f)))

;; The per-worker columns: key, label.
(define worker-columns
  '((pid "pid") (state "state") (generation "gen") (requests "requests") (active "active")
    (connections "connections") (sessions "sessions") (shed "shed") (queue_delay "delay (ms)") (memory "memory") (private_memory "private")
    (shared_memory "shared") (uptime "uptime (s)")))

;; value->string : any -> string
(define (value->string v)
  (cond
    [(eq? v (json-null)) "-"]
    [(string? v) v]
    [(and (real? v) (inexact? v)) (number->string (/ (round (* v 10)) 10))]
    [else (format "~a" v)]))

;; render-status : hash symbol -> bytes
(define (render-status board fmt)
  (case fmt
    [(json) (jsexpr->bytes board)]
    [(openmetrics) (render-openmetrics board #:prometheus? #f)]
    [(prometheus) (render-openmetrics board #:prometheus? #t)]
    [(html) (render-html board)]
    [else (render-text board)]))

;; render-text : hash -> bytes
(define (render-text board)
  (define out (open-output-string))
  (for ([t (in-list totals)])
    (define label (second t))
    (fprintf out "~a:~a~a\n" label (make-string (max 1 (- 22 (string-length label))) #\space)
             (value->string (hash-ref board (first t) (json-null)))))
  (fprintf out "\n")
  (define rows (cons (map second worker-columns)
                     (for/list ([w (in-list (hash-ref board 'workers '()))])
                       (for/list ([c (in-list worker-columns)])
                         (value->string (hash-ref w (first c) (json-null)))))))
  (define widths (for/list ([i (in-range (length worker-columns))])
                   (apply max (map (λ (r) (string-length (list-ref r i))) rows))))
  (for ([r (in-list rows)])
    (fprintf out "~a\n"
             (string-trim
              (string-join (for/list ([cell (in-list r)] [w (in-list widths)])
                             (string-append cell (make-string (- w (string-length cell)) #\space)))
                           "  ")
              #:left? #f)))
  (string->bytes/utf-8 (get-output-string out)))

;; render-openmetrics : hash #:prometheus? boolean -> bytes
;; Counters get the _total suffix on their sample; every family has HELP and TYPE; the
;; exposition ends with # EOF. Absent values (a unix socket's listen queue) are left out.
;; The request metrics' families come from status-metrics.rkt; a worker's series are labelled
;; with its pid and generation. prom?: the Prometheus text format instead (status-metrics.rkt).
(define (render-openmetrics board #:prometheus? prom?)
  (define out (open-output-string))
  (define pool (escape-label (value->string (hash-ref board 'pool ""))))
  (for ([t (in-list totals)] #:when (third t))
    (define v (hash-ref board (first t) (json-null)))
    (when (real? v)
      (define name (format "fastcgi_~a" (third t)))
      (write-family-head out name (fourth t) (fifth t) #:prometheus? prom?)
      (fprintf out "~a~a{pool=\"~a\"} ~a\n" name (if (eq? (fourth t) 'counter) "_total" "") pool v)))
  (write-metric-families out board (format "pool=\"~a\"" pool) #:prometheus? prom?)
  (define workers (hash-ref board 'workers '()))
  ;; worker-labels : hash -> string ; pool, pid and (when known) generation
  (define (worker-labels w)
    (format "pool=\"~a\",pid=\"~a\"~a" pool (hash-ref w 'pid 0)
            (let ([g (hash-ref w 'generation #f)]) (if (real? g) (format ",generation=\"~a\"" g) ""))))
  (for ([m (in-list '((requests "fastcgi_worker_requests" counter "Requests handed to the app by the worker")
                      (active "fastcgi_worker_active" gauge "Requests the worker handles now")
                      (sessions "fastcgi_worker_sessions" gauge "Servlet sessions (instances holding continuations) alive in the worker")
                      (shed "fastcgi_worker_shed" counter "Requests the worker answered 503 because it was overloaded")
                      (queue_delay "fastcgi_worker_queue_delay_seconds" gauge "How long a runnable thread of the worker waits for the CPU (smoothed)" 1000)
                      (memory "fastcgi_worker_memory_bytes" gauge "Resident memory of the worker")
                      (private_memory "fastcgi_worker_private_memory_bytes" gauge "Memory of the worker's own: resident less what it shares (--max-memory applies to it)")
                      (shared_memory "fastcgi_worker_shared_memory_bytes" gauge "Resident memory the worker shares with other processes (the loaded image of a forked worker)")
                      (max_requests "fastcgi_worker_max_requests" gauge "The --max-requests limit the worker drew (--max-requests-jitter)")))])
    (write-family-head out (second m) (third m) (fourth m) #:prometheus? prom?)
    (for ([w (in-list workers)])
      ;; a fifth element: the board's value is in that many of the family's unit (ms: 1000)
      (define v (let ([v (hash-ref w (first m) (json-null))])
                  (if (and (real? v) (> (length m) 4)) (/ v (exact->inexact (fifth m))) v)))
      (when (real? v)
        (fprintf out "~a~a{~a} ~a\n" (second m)
                 (if (eq? (third m) 'counter) "_total" "") (worker-labels w) v))))
  (write-worker-metric-families out (for/list ([w (in-list workers)]) (cons (worker-labels w) w))
                                #:prometheus? prom?)
  (unless prom? (fprintf out "# EOF\n"))
  (string->bytes/utf-8 (get-output-string out)))

;; escape-label : string -> string ; OpenMetrics label value escapes
(define (escape-label s)
  (regexp-replace* #rx"[\\\\\"\n]" s (λ (m) (case m [("\n") "\\n"] [else (string-append "\\" m)]))))

;; render-html : hash -> bytes ; a page that refreshes every 2 seconds
(define (render-html board)
  (define (row label v) `(tr (th ,label) (td ,(value->string v))))
  (define page
    `(html
      (head (meta ([charset "utf-8"]))
            (meta ([http-equiv "refresh"] [content "2"]))
            (title ,(format "fastcgi status: ~a" (value->string (hash-ref board 'pool ""))))
            (style ,(string-append
                     "body{font-family:sans-serif;margin:2em;color:#222}"
                     "table{border-collapse:collapse;margin-bottom:2em}"
                     "th,td{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}"
                     "td.n{text-align:right;font-variant-numeric:tabular-nums}"
                     ".busy{color:#b35900;font-weight:bold}.idle{color:#2a7a2a}"
                     ".draining,.starting{color:#777}.late{color:#b00000;font-weight:bold}"
                     "table.chart td{border:none;padding:.1em .4em}table.chart td:nth-child(2){width:24em}"
                     "div.bar{background:#4a7ab5;height:1em;min-width:1px}")))
      (body
       (h1 ,(format "fastcgi pool ~a" (value->string (hash-ref board 'pool ""))))
       (table ,@(for/list ([t (in-list totals)] #:unless (memq (first t) '(pool)))
                  (define v (hash-ref board (first t) (json-null)))
                  (if (memq (first t) memory-keys)
                      `(tr (th ,(second t)) (td ,(memory->string v)))
                      (row (second t) v))))
,@(latency-chart board)
       (h2 "Workers")
       (table
        (tr ,@(for/list ([c (in-list worker-columns)]) `(th ,(second c))))
        ,@(for/list ([w (in-list (hash-ref board 'workers '()))])
            `(tr ([class ,(value->string (hash-ref w 'state ""))])
                 ,@(for/list ([c (in-list worker-columns)])
                     `(td ([class ,(if (eq? (first c) 'state) "" "n")])
                          ,(let ([v (hash-ref w (first c) (json-null))])
                             (if (memq (first c) memory-keys) (memory->string v) (value->string v))))))))
       (p "This page refreshes every 2 seconds. Also as "
          (a ([href "?json"]) "JSON") ", " (a ([href "?openmetrics"]) "OpenMetrics")
          " and " (a ([href "?"]) "text") "."))))
  (string->bytes/utf-8 (string-append "<!DOCTYPE html>\n" (xexpr->string page))))

;; The keys whose values are bytes of memory, which the HTML page shows in MiB.
(define memory-keys '(memory private_memory shared_memory image_memory))

;; memory->string : any -> string ; bytes as MiB with one decimal
(define (memory->string v)
  (if (real? v) (format "~a MiB" (/ (round (/ v 104857.6)) 10.0)) "-"))
