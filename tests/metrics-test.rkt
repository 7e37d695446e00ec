#lang racket/base
;; The request metrics for real (metrics.rkt, status-metrics.rkt, queue-time.rkt):
;; `raco fastcgi serve --workers 2`, 37 requests of known status and size classes straight
;; to its socket, the status path scraped as JSON and OpenMetrics (checked by Prometheus'
;; `promtool check metrics`), the counts equal to what was sent, and kept when a worker is
;; killed and replaced; queue time from HTTP_X_REQUEST_START in the metrics and the access
;; log, and with --max-queue-delay a request that already waited past it answered 503 at
;; once. Every wait is bounded.
(require json
         racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define promtool (require-program! "/usr/bin/promtool" "prometheus"))

;; /s/CODE/SIZE answers status CODE with a head of head-size bytes and SIZE bytes of body.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (define uri (bytes->string/utf-8 (fastcgi-param r \"REQUEST_URI\" #\"/\") #\\?))\n"
   "  (define m (regexp-match #rx\"^/s/([0-9]+)/([0-9]+)$\" uri))\n"
   "  (define out (fastcgi-request-stdout r))\n"
   "  (if m\n"
   "      (write-bytes (bytes-append (string->bytes/latin-1 (format \"Status: ~a x\\r\\n\\r\\n\" (cadr m)))\n"
   "                                 (make-bytes (string->number (caddr m)) 120)) out)\n"
   "      (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" out)))\n"))
(define head-size 17)                   ; "Status: 200 x\r\n\r\n"

;; The requests: count, status, body size.
(define sent '((15 200 100) (10 404 2000) (5 500 70000) (4 302 0) (3 201 20000)))

;; call-with-serve : (or/c (listof string) (path -> (listof string))) (string string path -> any) -> any
;; The server with the extra options (or those for its folder), once 2 workers are ready;
;; body gets the socket address, the pid file, the folder.
(define (call-with-serve opts body)
  (call-with-served-app app-source
                        (λ (dir) (list* "--status-path" "/status" (if (procedure? opts) (opts dir) opts)))
                        #:name "fcgi-metrics" #:ready 2
                        (λ (s) (body (served-address s) (served-pid-file s) (served-dir s)))))

;; board-file : string -> hash ; the status the manager wrote (reading it sends no request)
(define (board-file pid-file) (or (read-status-file (pid-file->status-file pid-file)) (hasheq)))
;; classes : hash -> (listof natural) ; 1xx..5xx
(define (classes b)
  (define r (hash-ref b 'responses (hasheq)))
  (for/list ([k (in-list '(|1xx| |2xx| |3xx| |4xx| |5xx|))]) (hash-ref r k 0)))
;; wait-classes : string (listof natural) -> hash ; the status once its classes are these
(define (wait-classes pid-file want)
  (wait-until 10 (format "responses ~a" want)
              (λ () (let ([b (board-file pid-file)]) (and (equal? (classes b) want) b)))))
;; size-buckets : hash -> (listof natural) ; the cumulative response size counts
(define (size-buckets b) (map second (hash-ref (hash-ref b 'response_size_bytes) 'buckets)))

(define size-sum (for/sum ([s (in-list sent)]) (* (first s) (+ head-size (third s)))))
(define expected-sizes '(19 19 29 29 32 37 37 37 37 37))   ; le 256 1024 4096 ... +Inf

;; kill-pid! : natural natural -> void
(define (kill-pid! pid sig) (send-signal! pid sig))

;; check-promtool : string -> void
;; promtool reads the Prometheus text format, where a counter's family is named with its
;; _total: the OpenMetrics family names of counters (without it) leave their samples with
;; "no help text" there. Anything else it reports fails, and so does a parse error.
(define (check-promtool om)
  (define-values (out err code) (run-program/text promtool '("check" "metrics") om))
  (define counters
    (for/list ([m (in-list (regexp-match* #px"(?m:^# TYPE (\\S+) counter$)" om #:match-select cadr))]) m))
  (check-not-false (memv code '(0 3)) (format "promtool exit ~a: ~a" code err))
  (for ([l (in-list (string-split (string-append out err) "\n"))])
    (define m (regexp-match #px"^(\\S+)_total no help text$" l))
    (check-true (and m (member (cadr m) counters) #t) (format "promtool: ~a" l))))

;; run-program/text : path (listof string) string -> (values string string natural)
;; integration/lib.rkt's run-program, the input and output as text
(define (run-program/text program args input)
  (define-values (code out err) (run-program program args #:stdin (string->bytes/utf-8 input)))
  (values (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?) code))

(test-case "37 requests: their status classes, sizes and count, in JSON, OpenMetrics (promtool) and after a worker dies"
  (call-with-serve
   '("--workers" "2")
   (λ (addr pid-file dir)
     (for* ([s (in-list sent)] [_ (in-range (first s))])
       (define-values (status headers body) (fastcgi-request addr #:uri (format "/s/~a/~a" (second s) (third s))))
       (check-equal? status (second s)))
     (define b (wait-classes pid-file '(0 18 4 10 5)))
     (check-equal? (size-buckets b) expected-sizes)
     (check-equal? (hash-ref (hash-ref b 'response_size_bytes) 'sum) size-sum)
     (check-equal? (hash-ref (hash-ref b 'request_duration_seconds) 'count) 37)
     (check-equal? (hash-ref (hash-ref b 'queue_time_seconds) 'count) 0 "no HTTP_X_REQUEST_START")
     ;; per worker: its own series, which add up to the pool's
     (define ws (hash-ref b 'workers))
     (check-equal? (length ws) 2)
     (check-equal? (apply map + (map classes ws)) '(0 18 4 10 5))
     ;; the status path as JSON: the same counts (this request is not in them yet)
     (define-values (js-status js-headers js-body) (fastcgi-request addr #:uri "/status?json"))
     (check-equal? js-status 200)
     (define js (bytes->jsexpr js-body))
     (check-equal? (classes js) '(0 18 4 10 5))
     (check-equal? (size-buckets js) expected-sizes)
     ;; as OpenMetrics, once the JSON scrape is counted too
     (define b2 (wait-classes pid-file '(0 19 4 10 5)))
     (define-values (om-status om-headers om-body) (fastcgi-request addr #:uri "/status?openmetrics"))
     (define om (bytes->string/utf-8 om-body))
     (define lines (string-split om "\n"))
     (check-equal? (last lines) "# EOF")
     (for ([want (in-list '("fastcgi_responses_total{pool=\"app.rkt\",class=\"2xx\"} 19"
                            "fastcgi_responses_total{pool=\"app.rkt\",class=\"3xx\"} 4"
                            "fastcgi_responses_total{pool=\"app.rkt\",class=\"4xx\"} 10"
                            "fastcgi_responses_total{pool=\"app.rkt\",class=\"5xx\"} 5"
                            "fastcgi_request_duration_seconds_count{pool=\"app.rkt\"} 38"
                            "fastcgi_request_duration_seconds_bucket{pool=\"app.rkt\",le=\"+Inf\"} 38"
                            "fastcgi_queue_time_seconds_count{pool=\"app.rkt\"} 0"
                            "fastcgi_response_size_bytes_bucket{pool=\"app.rkt\",le=\"256\"} 19"))])
       (check-not-false (member want lines) want))
     (check-not-false (member (format "fastcgi_response_size_bytes_bucket{pool=\"app.rkt\",le=\"262144\"} ~a"
                                      (list-ref (size-buckets b2) 5))
                              lines))
     (for ([w (in-list (hash-ref b2 'workers))])
       (check-regexp-match (pregexp (format "(?m:^fastcgi_worker_responses_total\\{pool=\"app.rkt\",pid=\"~a\",generation=\"1\",class=\"4xx\"\\} ~a$)"
                                            (hash-ref w 'pid) (list-ref (classes w) 3)))
                           om))
     (check-promtool om)
     ;; the Prometheus text format of the same: promtool finds nothing to say of it
     (define-values (pt-status pt-headers pt-body) (fastcgi-request addr #:uri "/status?prometheus"))
     (check-equal? pt-status 200)
     (check-equal? (cdr (or (assoc "content-type" pt-headers string-ci=?) '(#f . #f)))
                   "text/plain; version=0.0.4; charset=utf-8")
     (define pt (bytes->string/utf-8 pt-body))
     (check-false (regexp-match? #rx"# EOF|# UNIT" pt))
     (check-regexp-match #rx"(?m:^# TYPE fastcgi_responses_total counter$)" pt)
     (check-regexp-match #rx"(?m:^# TYPE fastcgi_request_duration_seconds histogram$)" pt)
     (define-values (p-out p-err p-code) (run-program/text promtool '("check" "metrics") pt))
     (check-equal? (list p-code p-out p-err) (list 0 "" ""))
     ;; a worker killed: the pool's counts stay (its own go into the totals), its
     ;; replacement starts at 0. (What a worker answered in the last moment before a
     ;; SIGKILL, before it reported, is lost: the kill waits for the OpenMetrics scrape.)
     (define b2* (wait-classes pid-file '(0 21 4 10 5)))
     (define victim (hash-ref (car (hash-ref b2* 'workers)) 'pid))
     (kill-pid! victim SIGKILL)
     (define b3 (wait-until 60 "the worker replaced"
                            (λ () (let ([b (board-file pid-file)])
                                    (and (= 2 (length (board-pids b '("idle" "busy"))))
                                         (not (memv victim (board-pids b '("idle" "busy" "starting")))) b)))))
     (check-equal? (classes b3) '(0 21 4 10 5) "the pool's counts are kept")
     (check-equal? (size-buckets b3) (size-buckets b2*))
     (check-equal? (hash-ref b3 'request_duration_seconds) (hash-ref b2* 'request_duration_seconds))
     (check-true (for/or ([w (in-list (hash-ref b3 'workers))]) (equal? (classes w) '(0 0 0 0 0)))
                 "the new worker's own counts start at 0"))))

;; start-param : real -> (listof (cons string string)) ; HTTP_X_REQUEST_START, ms ago, as nginx's ${msec}
(define (start-param ms-ago)
  (define t (- (current-inexact-milliseconds) ms-ago))
  (list (cons "HTTP_X_REQUEST_START" (format "t=~a.~a" (quotient (exact-floor t) 1000)
                                             (~r3 (remainder (exact-floor t) 1000))))))
(define (exact-floor x) (inexact->exact (floor x)))
(define (~r3 n) (string-append (make-string (- 3 (string-length (number->string n))) #\0) (number->string n)))

(test-case "queue time: recorded from HTTP_X_REQUEST_START, in the access log; past --max-queue-delay: 503 at once"
  (call-with-serve
   (λ (dir) (list "--workers" "2" "--max-queue-delay" "1"
                  "--access-log" (path->string (build-path dir "access.log"))))
   (λ (addr pid-file dir)
     (define access (build-path dir "access.log"))
     (define (ask uri params)
       (define-values (status headers body) (fastcgi-request addr #:uri uri #:params-extra params))
       status)
     ;; waited 5 s already, over the 1 s allowed: shed at once, its handler never runs
     (check-equal? (ask "/s/200/5" (start-param 5000)) 503)
     ;; waited 0.2 s: served, and its queue time recorded
     (check-equal? (ask "/s/200/6" (start-param 200)) 200)
     ;; in Apache's form (microseconds, no t=)
     (check-equal? (ask "/s/200/7" (list (cons "HTTP_X_REQUEST_START"
                                               (number->string (* 1000 (exact-floor (- (current-inexact-milliseconds) 300)))))))
                   200)
     ;; malformed, an hour ahead: no queue time, never an error
     (check-equal? (ask "/s/200/8" '(("HTTP_X_REQUEST_START" . "t=soon"))) 200)
     (check-equal? (ask "/s/200/9" (start-param -3600000)) 200)
     (check-equal? (ask "/s/200/10" '()) 200)
     (define b (wait-classes pid-file '(0 5 0 0 1)))
     (define q (hash-ref b 'queue_time_seconds))
     (check-equal? (hash-ref q 'count) 3)
     (check-true (<= 5.4 (hash-ref q 'sum) 7) (format "queue time sum ~a s" (hash-ref q 'sum)))
     ;; le 0.1: none; le 0.25: the 0.2 s one (at least 0.2); +Inf: all three
     (check-equal? (second (list-ref (hash-ref q 'buckets) 6)) 0)
     (check-equal? (second (last (hash-ref q 'buckets))) 3)
     (check-true (>= (hash-ref b 'shed_requests) 1))
     ;; the access log: the queue time (ms) last, - without one
     (define lines (wait-until 5 "six access lines"
                               (λ () (let ([ls (if (file-exists? access) (file->lines access) '())])
                                       (and (= 6 (length ls)) ls)))))
     (define (queue-of uri)
       (for/first ([l (in-list lines)] #:when (regexp-match? (regexp-quote (format "\"GET ~a\"" uri)) l))
         (cadr (regexp-match #px" (\\S+)$" l))))
     (check-regexp-match #px"^503 " (cadr (regexp-match #px"\" (.*)$" (for/first ([l lines] #:when (regexp-match? #rx"/s/200/5\"" l)) l))))
     (check-true (<= 5000 (string->number (queue-of "/s/200/5")) 6000) (queue-of "/s/200/5"))
     (check-true (<= 200 (string->number (queue-of "/s/200/6")) 1000) (queue-of "/s/200/6"))
     (check-true (<= 300 (string->number (queue-of "/s/200/7")) 1100) (queue-of "/s/200/7"))
     (for ([uri (in-list '("/s/200/8" "/s/200/9" "/s/200/10"))])
       (check-equal? (queue-of uri) "-" uri)))))
