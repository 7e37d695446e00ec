#lang racket/base
;; fastcgi/private/status/histogram.rkt and metrics.rkt, by tables: which bucket a value goes in,
;; the counts and sum, merge, the report line and back, the JSON form.
(require racket/list
         rackunit
         "../fastcgi/private/status/histogram.rkt"
         "../fastcgi/private/status/metrics.rkt")

;; rows: bounds, values -> the cumulative bucket counts, count, sum (in the unit)
(define rows
  (list (list time-bounds '() '(0 0 0 0 0 0 0 0 0 0 0 0 0 0) 0 0)
        ;; a value equal to a bound is in that bound's bucket (le)
        (list time-bounds '(0 1000) '(2 2 2 2 2 2 2 2 2 2 2 2 2 2) 2 1000)
        (list time-bounds '(1001 2500 2501) '(0 2 3 3 3 3 3 3 3 3 3 3 3 3) 3 6002)
        (list time-bounds '(10000000 10000001) '(0 0 0 0 0 0 0 0 0 0 0 0 1 2) 2 20000001)
        (list size-bounds '(0 256 257 16777216 16777217) '(2 3 3 3 3 3 3 3 4 5) 5 33554946)))

(test-case "observe!: the bucket of each value, the count and the sum"
  (for ([row (in-list rows)])
    (define-values (bounds vs cumulative count sum) (apply values row))
    (define h (make-histogram bounds))
    (for ([v (in-list vs)]) (observe! h v))
    (define js (histogram->jsexpr h 1))
    (check-equal? (map second (hash-ref js 'buckets)) cumulative (format "~a" vs))
    (check-equal? (histogram-count h) count)
    (check-equal? (hash-ref js 'count) count)
    (check-equal? (histogram-sum h) sum)
    ;; the list form and back; merged with itself, everything doubles
    (define back (list->histogram bounds (histogram->list h)))
    (check-equal? (histogram->list back) (histogram->list h))
    (check-equal? (histogram->list (histogram-merge h back)) (map (λ (n) (* 2 n)) (histogram->list h)))))

(test-case "list->histogram: the wrong length or not naturals is #f"
  (for ([l (in-list (list '() '(1 2 3) (make-list 14 0) (make-list 16 0)
                          (append (make-list 15 0) '(-1)) (append (make-list 15 0) '(1.5))))])
    (check-false (list->histogram time-bounds l) (format "~s" l)))
  (check-true (histogram? (list->histogram time-bounds (make-list 15 0)))))

(test-case "histogram->jsexpr: bounds in seconds, the last +Inf"
  (define h (make-histogram time-bounds))
  (observe! h 2000)
  (define js (histogram->jsexpr h 1000000))
  (check-equal? (map first (hash-ref js 'buckets))
                '(0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1.0 2.5 5.0 10.0 "+Inf"))
  (check-equal? (hash-ref js 'sum) 0.002))

;; rows: status, bytes, duration ms, queue ms -> class counts after, queue count after
(test-case "metrics: status classes, the queue time only when known, the line and back"
  (define m (make-metrics))
  (for ([r (in-list '((200 10 1.0 #f) (204 0 0.2 3.0) (301 5 0.1 #f) (404 9 0.3 0.0)
                      (500 7 -1.0 #f) (503 7 5.0 2.0) (#f 0 1.0 #f) (99 0 1.0 #f) (600 0 1.0 #f)))])
    (apply metrics-record! m r))
  (define js (metrics->jsexpr m))
  (check-equal? (hash-ref js 'responses) (hasheq '|1xx| 0 '|2xx| 2 '|3xx| 1 '|4xx| 1 '|5xx| 2))
  (check-equal? (hash-ref (hash-ref js 'queue_time_seconds) 'count) 3)
  (check-equal? (hash-ref (hash-ref js 'request_duration_seconds) 'count) 9)
  (check-equal? (metrics-observed m) 9)
  ;; a negative duration (the clock stepped back) counts as 0
  (check-equal? (second (first (hash-ref (hash-ref js 'request_duration_seconds) 'buckets))) 8)
  (define counts (metrics->counts m))
  (check-true (andmap exact-nonnegative-integer? counts))
  (define back (counts->metrics counts))
  (check-equal? (metrics->jsexpr back) js)
  (check-equal? (metrics->jsexpr (metrics-merge back m))
                (with-metrics (hasheq) (list m m)))
  (check-false (counts->metrics '(1 2)))
  (check-false (counts->metrics (append counts '(1)))))
