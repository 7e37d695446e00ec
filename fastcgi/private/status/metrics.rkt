#lang racket/base
;; A process's request metrics: histograms (histogram.rkt) of request duration, queue time
;; (queue-time.rkt) and response size (the CGI output written to FCGI_STDOUT), and the
;; answers counted by status class (1xx to 5xx). A worker records each answered request
;; (serve-app.rkt's observer) and reports them to the manager in a `metrics` line
;; (manager-reports.rkt), which folds those of workers that are gone into the pool's
;; totals and puts them on the board (manager-status.rkt, pool-status.rkt).
(require ffi/unsafe/atomic
         racket/list
         "histogram.rkt")
(provide make-metrics
         metrics?
         metrics-observed
         metrics-record!
         metrics->counts
         counts->metrics
         metrics-merge
         metrics-answers
         metrics->jsexpr
         with-metrics)

;; classes: answers by status class, 1xx at 0; observed: requests recorded.
(struct metrics (duration queue size classes [observed #:mutable]))

;; make-metrics : -> metrics ; nothing recorded
(define (make-metrics)
  (metrics (make-histogram time-bounds) (make-histogram time-bounds) (make-histogram size-bounds)
           (make-vector 5 0) 0))

;; metrics-record! : metrics (or/c natural #f) natural real (or/c real #f) -> void
;; One answered request: its status (#f: none known, no class), the bytes of its answer, its
;; duration and queue time in milliseconds (queue #f: the front said nothing usable).
;; Handler threads record at once: atomic, which allocates nothing.
(define (metrics-record! m status bytes duration-ms queue-ms)
  (define d (ms->us duration-ms))
  (define q (and queue-ms (ms->us queue-ms)))
  (define b (if (fixnum? bytes) bytes big))
  (start-atomic)
  (observe! (metrics-duration m) d)
  (when q (observe! (metrics-queue m) q))
  (observe! (metrics-size m) b)
  (when (and (fixnum? status) (<= 100 status) (<= status 599))
    (define k (- (quotient status 100) 1))
    (vector-set! (metrics-classes m) k (+ 1 (vector-ref (metrics-classes m) k))))
  (set-metrics-observed! m (+ 1 (metrics-observed m)))
  (end-atomic))

;; ms->us : real -> fixnum ; at least 0 (the clock may step back), at most big
(define (ms->us ms)
  (define us (* 1000.0 ms))
  (cond [(not (< 0.0 us)) 0]
        [(< us 1e15) (inexact->exact (floor us))]
        [else big]))
;; past any bucket, and the sum of many such stays a fixnum
(define big 1000000000000000)

;; metrics->counts : metrics -> (listof natural)
;; What a worker's metrics line carries (lines.rkt): the three histograms'
;; histogram->list, then the five class counts.
(define (metrics->counts m)
  (start-atomic)
  (define ns (append (histogram->list (metrics-duration m)) (histogram->list (metrics-queue m))
                     (histogram->list (metrics-size m)) (for/list ([c (in-vector (metrics-classes m))]) c)))
  (end-atomic)
  ns)

;; counts->metrics : (listof natural) -> (or/c metrics #f)
;; The metrics of a list of metrics->counts; #f unless it is one.
(define (counts->metrics ns)
  (define t (+ 2 (vector-length time-bounds)))
  (define s (+ 2 (vector-length size-bounds)))
  (and (= (length ns) (+ t t s 5))
       (andmap exact-nonnegative-integer? ns)
       (andmap fixnum? ns)
       (let ([d (list->histogram time-bounds (take ns t))]
             [q (list->histogram time-bounds (take (drop ns t) t))]
             [z (list->histogram size-bounds (take (drop ns (* 2 t)) s))]
             [c (apply vector (drop ns (+ t t s)))])
         (and d q z (metrics d q z c (histogram-count d))))))

;; metrics-answers : metrics -> (values natural natural) ; all the answers, and the 5xx
(define (metrics-answers m)
  (define classes (metrics-classes m))
  (values (for/sum ([n (in-vector classes)]) n) (vector-ref classes 4)))

;; metrics-merge : metrics metrics -> metrics ; both counted (the pool: live workers and gone)
(define (metrics-merge a b)
  (metrics (histogram-merge (metrics-duration a) (metrics-duration b))
           (histogram-merge (metrics-queue a) (metrics-queue b))
           (histogram-merge (metrics-size a) (metrics-size b))
           (for/vector ([x (in-vector (metrics-classes a))] [y (in-vector (metrics-classes b))]) (+ x y))
           (+ (metrics-observed a) (metrics-observed b))))

;; metrics->jsexpr : metrics -> hash
;; request_duration_seconds, queue_time_seconds, response_size_bytes (histogram->jsexpr),
;; responses: the count per status class, "1xx" to "5xx".
(define (metrics->jsexpr m)
  (hasheq 'request_duration_seconds (histogram->jsexpr (metrics-duration m) 1000000)
          'queue_time_seconds (histogram->jsexpr (metrics-queue m) 1000000)
          'response_size_bytes (histogram->jsexpr (metrics-size m) 1)
          'responses (for/hasheq ([c (in-vector (metrics-classes m))] [k (in-list '(|1xx| |2xx| |3xx| |4xx| |5xx|))])
                       (values k c))))
;; with-metrics : hash (listof metrics) -> hash
;; h with metrics->jsexpr's keys, of all of ms together (nothing recorded when none).
(define (with-metrics h ms)
  (define all (for/fold ([acc (make-metrics)]) ([m (in-list ms)]) (metrics-merge acc m)))
  (for/fold ([h h]) ([(k v) (in-hash (metrics->jsexpr all))]) (hash-set h k v)))
