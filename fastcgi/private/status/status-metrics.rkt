#lang racket/base
;; The request metrics of the pool's status (metrics.rkt puts them on the board: the
;; histograms of request duration, queue time and response size, the answers by status
;; class), as pool-status.rkt renders them: OpenMetrics families for the pool and per
;; worker, and the HTML page's latency chart. Rendering only, from the board's JSON values.
(require racket/list)
(provide write-metric-families
         write-worker-metric-families
         write-family-head
         latency-chart)

;; Every writer of families takes #:prometheus? prom?: #f for OpenMetrics 1.0; #t for the
;; Prometheus text format 0.0.4 (what promtool checks and older scrapers read), where a
;; counter's family is named with its _total, with no # UNIT and no # EOF.

;; write-family-head : output-port string symbol string [(or/c string #f)] #:prometheus? boolean
;;                     -> void
;; HELP and TYPE (and UNIT in OpenMetrics) of a family; name without a counter's _total.
(define (write-family-head out name type help [unit #f] #:prometheus? prom?)
  (define family (if (and (eq? type 'counter) prom?) (string-append name "_total") name))
  (fprintf out "# HELP ~a ~a\n# TYPE ~a ~a\n" family help family type)
  (when (and unit (not prom?)) (fprintf out "# UNIT ~a ~a\n" family unit)))

;; The histograms: board key, OpenMetrics name (its unit last), unit, help.
(define histograms
  '((request_duration_seconds "request_duration_seconds" "seconds"
                              "Time from a request's arrival at a worker to the end of its answer")
    (queue_time_seconds "queue_time_seconds" "seconds"
                        "Time a request waited between the front receiving it (HTTP_X_REQUEST_START) and a worker taking it")
    (response_size_bytes "response_size_bytes" "bytes"
                         "CGI output bytes of an answer (its FCGI_STDOUT)")))

(define classes '(|1xx| |2xx| |3xx| |4xx| |5xx|))

;; write-metric-families : output-port hash string #:prometheus? boolean -> void
;; The pool's families; labels: the pool's label pair, already escaped (pool="...").
(define (write-metric-families out board labels #:prometheus? prom?)
  (write-families out "fastcgi_" "" (list (cons labels board)) prom?))

;; write-worker-metric-families : output-port (listof (cons string hash)) #:prometheus? boolean
;;                                -> void
;; The same per worker: each with its labels (pool, pid, generation) and its line of the board.
(define (write-worker-metric-families out workers #:prometheus? prom?)
  (write-families out "fastcgi_worker_" " (per worker)" workers prom?))

;; write-families : output-port string string (listof (cons string hash)) boolean -> void
;; A family per histogram and one of the answers by class, announced even with no sample;
;; a member without the value is left out.
(define (write-families out prefix what members prom?)
  (for ([h (in-list histograms)])
    (define name (string-append prefix (second h)))
    (write-family-head out name 'histogram (string-append (fourth h) what) (third h)
                       #:prometheus? prom?)
    (for ([m (in-list members)])
      (define v (hash-ref (cdr m) (first h) #f))
      (when (hash? v) (write-histogram out name (car m) v))))
  (define name (string-append prefix "responses"))
  (write-family-head out name 'counter (string-append "Answers by HTTP status class (1xx to 5xx)" what)
                     #:prometheus? prom?)
  (for ([m (in-list members)])
    (define v (hash-ref (cdr m) 'responses #f))
    (when (hash? v)
      (for ([c (in-list classes)])
        (fprintf out "~a_total{~a,class=\"~a\"} ~a\n" name (car m) c (hash-ref v c 0))))))

;; write-histogram : output-port string string hash -> void ; a histogram->jsexpr value
(define (write-histogram out name labels h)
  (for ([b (in-list (hash-ref h 'buckets '()))])
    (fprintf out "~a_bucket{~a,le=\"~a\"} ~a\n" name labels (first b) (second b)))
  (fprintf out "~a_count{~a} ~a\n~a_sum{~a} ~a\n" name labels (hash-ref h 'count 0)
           name labels (hash-ref h 'sum 0)))

;; latency-chart : hash -> (listof xexpr)
;; The request duration histogram as bars: a row per bucket with the requests in it (not
;; cumulative), the longest bar the full width. Nothing without the histogram.
(define (latency-chart board)
  (define h (hash-ref board 'request_duration_seconds #f))
  (cond
    [(not (hash? h)) '()]
    [else
     (define buckets (hash-ref h 'buckets '()))
     (define counts (for/list ([b (in-list buckets)] [prev (in-list (cons '(0 0) buckets))])
                      (- (second b) (second prev))))
     (define top (apply max 1 counts))
     `((h2 "Request duration")
       (table ([class "chart"])
        ,@(for/list ([b (in-list buckets)] [n (in-list counts)] [prev (in-list (cons #f buckets))])
            `(tr ([class "bar"])
                 (th ,(bucket-label (first b) (and prev (first prev))))
                 (td (div ([class "bar"] [style ,(format "width:~a%" (exact->inexact (/ (round (* 1000 (/ n top))) 10)))])))
                 (td ([class "n"]) ,(number->string n))))))]))

;; bucket-label : (or/c real string) (or/c real #f) -> string ; "≤ 2.5 ms", "> 10 s"
(define (bucket-label le prev)
  (define (duration s) (if (< s 1) (format "~a ms" (trim (* s 1000))) (format "~a s" (trim s))))
  (if (real? le) (format "≤ ~a" (duration le)) (format "> ~a" (if prev (duration prev) "0 s"))))

;; trim : real -> string ; 2.5 as "2.5", 1.0 as "1"
(define (trim x)
  (define r (/ (round (* x 1000)) 1000))
  (number->string (if (integer? r) (inexact->exact r) (exact->inexact r))))
