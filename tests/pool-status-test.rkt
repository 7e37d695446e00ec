#lang racket/base
;; The pool's status page (fastcgi/private/status/pool-status.rkt), by tables and without
;; processes: which format a query asks for, its content type, and what each format shows
;; of a scoreboard (text, JSON, OpenMetrics, HTML); the scoreboard file is
;; scoreboard-test's. The page served by a running manager is tested in tests/manager-test.rkt.
(require json
         racket/file
         racket/list
         racket/string
         rackunit
         xml
         "../fastcgi/private/status/metrics.rkt"
         "../fastcgi/private/status/pool-status.rkt")

;; A pool of two workers, one busy and one starting; some values absent or null.
(define board
  (hasheq 'pool "www" 'pm "pm static, 2 workers" 'listen "unix:/run/app.sock" 'master_pid 100
          'start_time 1700000000 'uptime 12.34 'generation 1 'preload "forked" 'loader_pid 99
          'image_memory 115343360 'loader_restarts 0 'accepted_connections 5 'requests 7
          'listen_queue (json-null) 'active_workers 1 'idle_workers 1 'total_workers 2
          'late_workers 0 'draining_workers 0 'sessions 0 'max_active_workers 2
          'max_workers_reached 0 'slow_requests 0 'shed_requests 3 'log_dropped 0 'restarts 0
          'unresponsive_kills 0 'recycled 0 'orphans_reaped 2 'untracked_stopped 1 'reloads 0 'reload_failures 0 'canary_forwards 2 'canary_rollbacks 1
          'last_reload_error "app.rkt: boom" 'start_failures 0
          'workers (list (hasheq 'pid 101 'state "busy" 'generation 1 'requests 4 'active 1
                                 'connections 1 'sessions 0 'shed 0 'queue_delay 0.25
                                 'memory 52428800 'private_memory 12582912 'shared_memory 39845888
                                 'max_requests 1037 'uptime 12.0)
                         (hasheq 'pid 102 'state "starting" 'generation 1 'requests 0 'active 0
                                 'connections 0 'sessions 0 'shed 0 'memory (json-null)
                                 'uptime 0.06))))

;; The request metrics of four requests (metrics.rkt): 200 in 0.5 ms of 100 bytes, 204 in
;; 2 ms of 1001 bytes with a queue time of 3 ms, 404 in 1 s of 255 bytes, 500 in 11.5 s of
;; 20 MB; on the pool and on worker 101 (generation 2); worker 102 has none yet.
(define four (make-metrics))
(metrics-record! four 200 100 0.5 #f)
(metrics-record! four 204 1001 2.0 3.0)
(metrics-record! four 404 255 1000.0 #f)
(metrics-record! four 500 20000000 11500.0 #f)
(define metrics-board
  (with-metrics
   (hasheq 'pool "www"
           'workers (list (with-metrics (hasheq 'pid 101 'generation 2 'requests 4) (list four))
                          (hasheq 'pid 102 'generation 2 'requests 0)))
   (list four)))

;; render : hash symbol -> string
(define (render b fmt) (bytes->string/utf-8 (render-status b fmt)))

(test-case "status-format: the query string -> the format"
  (for ([row (in-list
              (list (list #f 'text)
                    (list #"" 'text)
                    (list #"full" 'text)
                    (list #"json" 'json)
                    (list #"full&json" 'json)
                    (list #"json=1" 'json)
                    (list #"openmetrics" 'openmetrics)
                    (list #"prometheus" 'prometheus)
                    (list #"html" 'html)
                    (list #"html&json" 'json)
                    (list #"openmetrics&html" 'openmetrics)
                    (list #"xjson" 'text)
                    (list #"a=json" 'text)))])
    (check-equal? (status-format (car row)) (cadr row) (format "~s" (car row)))))

(test-case "status-content-type: the format -> the Content-Type"
  (for ([row (in-list
              (list (list 'text #"text/plain; charset=utf-8")
                    (list 'json #"application/json")
                    (list 'openmetrics #"application/openmetrics-text; version=1.0.0; charset=utf-8")
                    (list 'prometheus #"text/plain; version=0.0.4; charset=utf-8")
                    (list 'html #"text/html; charset=utf-8")))])
    (check-equal? (status-content-type (car row)) (cadr row) (format "~a" (car row)))))

(test-case "text: the totals, one a line, then the workers as aligned columns"
  ;; absent and null values show as -, reals with one decimal
  (check-equal?
   (string-split (render board 'text) "\n" #:trim? #f)
   '("pool:                  www"
     "process manager:       pm static, 2 workers"
     "listen:                unix:/run/app.sock"
     "master pid:            100"
     "start time:            1700000000"
     "uptime (s):            12.3"
     "generation:            1"
     "preload:               forked"
     "loader pid:            99"
     "image memory:          115343360"
     "loader restarts:       0"
     "accepted connections:  5"
     "requests:              7"
     "listen queue:          -"
     "active workers:        1"
     "idle workers:          1"
     "total workers:         2"
     "late workers:          0"
     "draining workers:      0"
     "live sessions:         0"
     "max active workers:    2"
     "max workers reached:   0"
     "slow requests:         0"
     "shed requests:         3"
     "log lines dropped:     0"
     "restarts:              0"
     "unresponsive kills:    0"
     "recycled:              0"
     "orphans reaped:        2"
     "untracked stopped:     1"
     "reloads:               0"
     "reload failures:       0"
     "last reload error:     app.rkt: boom"
     "canary forwards:       2"
     "canary rollbacks:      1"
     "start failures:        0"
     "last start error:      -"
     ""
     "pid  state     gen  requests  active  connections  sessions  shed  delay (ms)  memory    private   shared    uptime (s)"
     "101  busy      1    4         1       1            0         0     0.2         52428800  12582912  39845888  12.0"
     "102  starting  1    0         0       0            0         0     -           -         -         -         0.1"
     ""))
  ;; the text format is the default
  (check-equal? (render board 'full) (render board 'text)))

(test-case "JSON: the scoreboard as it is"
  (for ([b (in-list (list board (hasheq) (hasheq 'pool "p" 'workers '())))])
    (check-equal? (bytes->jsexpr (render-status b 'json)) b)))

;; rows: what, board -> lines that must be there (in this order), lines that must not
(define openmetrics-rows
  (list
   (list "the pool"
         board
         '("# HELP fastcgi_start_time_seconds Unix time the manager started"
           "# TYPE fastcgi_start_time_seconds gauge"
           "fastcgi_start_time_seconds{pool=\"www\"} 1700000000"
           "fastcgi_uptime_seconds{pool=\"www\"} 12.34"
           "# TYPE fastcgi_image_memory_bytes gauge"
           "fastcgi_image_memory_bytes{pool=\"www\"} 115343360"
           "fastcgi_loader_restarts_total{pool=\"www\"} 0"
           "# HELP fastcgi_requests Requests handed to the app by all workers"
           "# TYPE fastcgi_requests counter"
           "fastcgi_requests_total{pool=\"www\"} 7"
           "fastcgi_shed_requests_total{pool=\"www\"} 3"
           "# TYPE fastcgi_start_failures gauge"
           "fastcgi_start_failures{pool=\"www\"} 0"
           "# TYPE fastcgi_worker_requests counter"
           "fastcgi_worker_requests_total{pool=\"www\",pid=\"101\",generation=\"1\"} 4"
           "fastcgi_worker_requests_total{pool=\"www\",pid=\"102\",generation=\"1\"} 0"
           "fastcgi_worker_queue_delay_seconds{pool=\"www\",pid=\"101\",generation=\"1\"} 0.00025"
           "fastcgi_worker_memory_bytes{pool=\"www\",pid=\"101\",generation=\"1\"} 52428800"
           "fastcgi_worker_private_memory_bytes{pool=\"www\",pid=\"101\",generation=\"1\"} 12582912"
           "fastcgi_worker_shared_memory_bytes{pool=\"www\",pid=\"101\",generation=\"1\"} 39845888"
           "# TYPE fastcgi_worker_max_requests gauge"
           "fastcgi_worker_max_requests{pool=\"www\",pid=\"101\",generation=\"1\"} 1037"
           "# EOF")
         ;; null or absent: left out; text values have no family
         (list #rx"listen_queue" #rx"queue_delay_seconds{[^}]*pid=\"102\""
               #rx"memory_bytes{[^}]*pid=\"102\"" #rx"master_pid" #rx"reload_error" #rx"^fastcgi_pool"
               #rx"loader_pid" #rx"fastcgi_preload"))
   (list "a pool name with a quote, a backslash and a newline"
         (hasheq 'pool "a\"b\\c\nd" 'requests 1)
         '("fastcgi_requests_total{pool=\"a\\\"b\\\\c\\nd\"} 1" "# EOF")
         (list #rx"^d\"" #rx"uptime"))
   (list "no workers: the worker families are announced, with no sample"
         (hasheq 'pool "p")
         '("# TYPE fastcgi_worker_requests counter" "# TYPE fastcgi_worker_active gauge"
           "# TYPE fastcgi_worker_sessions gauge" "# TYPE fastcgi_worker_shed counter"
           "# TYPE fastcgi_worker_queue_delay_seconds gauge"
           "# TYPE fastcgi_worker_memory_bytes gauge"
           "# TYPE fastcgi_worker_request_duration_seconds histogram"
           "# TYPE fastcgi_worker_responses counter" "# EOF")
         (list #rx"^fastcgi_.*{"))
   (list "the request metrics: histograms and answers by class, of the pool and per worker"
         metrics-board
         '("# HELP fastcgi_request_duration_seconds Time from a request's arrival at a worker to the end of its answer"
           "# TYPE fastcgi_request_duration_seconds histogram"
           "# UNIT fastcgi_request_duration_seconds seconds"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"0.001\"} 1"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"0.0025\"} 2"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"0.005\"} 2"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"1.0\"} 3"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"10.0\"} 3"
           "fastcgi_request_duration_seconds_bucket{pool=\"www\",le=\"+Inf\"} 4"
           "fastcgi_request_duration_seconds_count{pool=\"www\"} 4"
           "fastcgi_request_duration_seconds_sum{pool=\"www\"} 12.5025"
           "# TYPE fastcgi_queue_time_seconds histogram"
           "fastcgi_queue_time_seconds_bucket{pool=\"www\",le=\"0.005\"} 1"
           "fastcgi_queue_time_seconds_bucket{pool=\"www\",le=\"+Inf\"} 1"
           "fastcgi_queue_time_seconds_count{pool=\"www\"} 1"
           "fastcgi_queue_time_seconds_sum{pool=\"www\"} 0.003"
           "# TYPE fastcgi_response_size_bytes histogram"
           "# UNIT fastcgi_response_size_bytes bytes"
           "fastcgi_response_size_bytes_bucket{pool=\"www\",le=\"256\"} 2"
           "fastcgi_response_size_bytes_bucket{pool=\"www\",le=\"1024\"} 3"
           "fastcgi_response_size_bytes_bucket{pool=\"www\",le=\"16777216\"} 3"
           "fastcgi_response_size_bytes_bucket{pool=\"www\",le=\"+Inf\"} 4"
           "fastcgi_response_size_bytes_sum{pool=\"www\"} 20001356"
           "# TYPE fastcgi_responses counter"
           "fastcgi_responses_total{pool=\"www\",class=\"1xx\"} 0"
           "fastcgi_responses_total{pool=\"www\",class=\"2xx\"} 2"
           "fastcgi_responses_total{pool=\"www\",class=\"4xx\"} 1"
           "fastcgi_responses_total{pool=\"www\",class=\"5xx\"} 1"
           "# TYPE fastcgi_worker_request_duration_seconds histogram"
           "fastcgi_worker_request_duration_seconds_bucket{pool=\"www\",pid=\"101\",generation=\"2\",le=\"0.001\"} 1"
           "fastcgi_worker_request_duration_seconds_count{pool=\"www\",pid=\"101\",generation=\"2\"} 4"
           "# TYPE fastcgi_worker_responses counter"
           "fastcgi_worker_responses_total{pool=\"www\",pid=\"101\",generation=\"2\",class=\"5xx\"} 1"
           "# EOF")
         (list #rx"pid=\"102\".*le=" #rx"responses_total{[^}]*pid=\"102\""))))

;; in-order? : (listof string) (listof string) -> boolean ; wanted appear in lines, in order
(define (in-order? wanted lines)
  (cond
    [(null? wanted) #t]
    [(member (car wanted) lines) => (λ (rest) (in-order? (cdr wanted) (cdr rest)))]
    [else #f]))

(test-case "OpenMetrics: a family per value, _total on counters, absent values left out, # EOF"
  (for ([row (in-list openmetrics-rows)])
    (define-values (what b present absent) (apply values row))
    (define lines (string-split (render b 'openmetrics) "\n"))
    (check-true (in-order? present lines) (format "~a:\n~a" what (string-join lines "\n")))
    (for ([rx (in-list absent)])
      (check-false (for/or ([l (in-list lines)]) (regexp-match? rx l)) (format "~a: ~s" what rx)))
    (check-equal? (last lines) "# EOF" what)
    ;; every sample follows the TYPE of its family (counters' samples end in _total,
    ;; histograms' in _bucket, _count and _sum)
    (define families
      (for/list ([l (in-list lines)] #:when (string-prefix? l "# TYPE "))
        (string-split (substring l 7))))
    (define (sample-names f)
      (case (cadr f)
        [("counter") (list (string-append (car f) "_total"))]
        [("histogram") (for/list ([x (in-list '("_bucket" "_count" "_sum"))]) (string-append (car f) x))]
        [else (list (car f))]))
    (for ([l (in-list lines)] #:unless (string-prefix? l "#"))
      (define name (car (string-split l "{")))
      (check-not-false (for/or ([f (in-list families)]) (member name (sample-names f)))
                       (format "~a: ~a has no TYPE" what l)))))

(test-case "Prometheus text: the same samples; a counter's family named with its _total, no UNIT, no EOF"
  (for ([row (in-list openmetrics-rows)])
    (define-values (what b present absent) (apply values row))
    (define om (string-split (render b 'openmetrics) "\n"))
    (define pt (string-split (render b 'prometheus) "\n"))
    (define (samples lines) (for/list ([l (in-list lines)] #:unless (string-prefix? l "#")) l))
    (check-equal? (samples pt) (samples om) what)
    (check-false (member "# EOF" pt) what)
    (check-false (for/or ([l (in-list pt)]) (string-prefix? l "# UNIT")) what)
    (for ([l (in-list om)] #:when (regexp-match? #rx"^# TYPE [^ ]+ counter$" l))
      (define family (caddr (string-split l)))
      (check-not-false (member (format "# TYPE ~a_total counter" family) pt) (format "~a: ~a" what family)))))

;; rows: what, board -> what the page must contain, what it must not
(define html-rows
  (list
   (list "the pool"
         board
         (list #rx"^<!DOCTYPE html>\n<html>"
               #rx"<meta http-equiv=\"refresh\" content=\"2\""
               #rx"<title>fastcgi status: www</title>"
               #rx"<h1>fastcgi pool www</h1>"
               #rx"<tr><th>requests</th><td>7</td></tr>"
               #rx"<tr><th>listen queue</th><td>-</td></tr>"
               #rx"<tr><th>last start error</th><td>-</td></tr>"
               #rx"<tr class=\"busy\"><td class=\"n\">101</td><td class=\"\">busy</td>"
               #rx"<td class=\"n\">50.0 MiB</td>"
               #rx"<tr class=\"starting\"><td class=\"n\">102</td>.*<td class=\"n\">-</td><td class=\"n\">0.1</td></tr>"
               #rx"<a href=\"\\?json\">JSON</a>")
         (list #rx"<th>pool</th>"))
   (list "the latency chart: a bar per duration bucket with the requests in it"
         metrics-board
         (list #rx"<h2>Request duration</h2>"
               #rx"<tr class=\"bar\"><th>≤ 1 ms</th><td><div class=\"bar\" style=\"width:100.0%\"></div></td><td class=\"n\">1</td></tr>"
               #rx"<tr class=\"bar\"><th>≤ 2.5 ms</th><td><div class=\"bar\" style=\"width:100.0%\"></div></td><td class=\"n\">1</td></tr>"
               #rx"<tr class=\"bar\"><th>≤ 5 ms</th><td><div class=\"bar\" style=\"width:0.0%\"></div></td><td class=\"n\">0</td></tr>"
               #rx"<tr class=\"bar\"><th>≤ 1 s</th><td><div class=\"bar\" style=\"width:100.0%\"></div></td><td class=\"n\">1</td></tr>"
               #rx"<tr class=\"bar\"><th>&gt; 10 s</th><td><div class=\"bar\" style=\"width:100.0%\"></div></td><td class=\"n\">1</td></tr>")
         (list))
   (list "no metrics on the board: no chart"
         board
         (list #rx"<h2>Workers</h2>")
         (list #rx"Request duration" #rx"class=\"bar\""))
   (list "markup in a value is escaped"
         (hasheq 'pool "<script>" 'last_reload_error "a & b")
         (list #rx"<title>fastcgi status: &lt;script&gt;</title>"
               #rx"<td>a &amp; b</td>")
         (list #rx"<script>"))))

(test-case "HTML: a page that refreshes itself, the totals, a row per worker, escaped values"
  (for ([row (in-list html-rows)])
    (define-values (what b present absent) (apply values row))
    (define page (render b 'html))
    (for ([rx (in-list present)])
      (check-regexp-match rx page))
    (for ([rx (in-list absent)])
      (check-false (regexp-match? rx page) (format "~a: ~s" what rx)))
    ;; well-formed: the page after its DOCTYPE reads back as XML
    (check-not-exn (λ () (string->xexpr (cadr (regexp-match #rx"^<!DOCTYPE html>\n(.*)$" page)))) what)))

