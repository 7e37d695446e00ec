#lang racket/base
;; Histograms with fixed buckets (metrics.rkt keeps three per process: request duration,
;; queue time, response size). The bucket bounds are stated here, once. Values are exact
;; natural numbers in the histogram's unit: microseconds for the times, bytes for sizes; a
;; bucket counts the values at most its bound (OpenMetrics' `le`), the last one every value.
;; Recording is a vector increment found by a short walk of the bounds, with nothing
;; allocated. Pure; the caller makes concurrent records atomic.
(provide time-bounds
         size-bounds
         make-histogram
         histogram?
         histogram-bounds
         histogram-count
         histogram-sum
         observe!
         histogram-merge
         histogram->list
         list->histogram
         histogram->jsexpr)

;; The bounds, microseconds: 1 ms to 10 s, and bytes: 256 B to 16 MiB.
(define time-bounds
  (vector 1000 2500 5000 10000 25000 50000 100000 250000 500000
            1000000 2500000 5000000 10000000))
(define size-bounds
  (vector 256 1024 4096 16384 65536 262144 1048576 4194304 16777216))

;; bounds: a vector, increasing; counts: one slot per bound, one for the values above
;; the last bound, then the sum of the values.
(struct histogram (bounds counts))

;; make-histogram : vector -> histogram ; empty
(define (make-histogram bounds)
  (histogram bounds (make-vector (+ 2 (vector-length bounds)) 0)))

;; observe! : histogram natural -> void ; v a fixnum in the histogram's unit
(define (observe! h v)
  (define bounds (histogram-bounds h))
  (define counts (histogram-counts h))
  (define n (vector-length bounds))
  (define i (let loop ([i 0])
              (if (or (= i n) (<= v (vector-ref bounds i))) i (loop (+ i 1)))))
  (vector-set! counts i (+ 1 (vector-ref counts i)))
  (vector-set! counts (+ n 1) (+ v (vector-ref counts (+ n 1)))))

;; histogram-count : histogram -> natural ; the values recorded
(define (histogram-count h)
  (define counts (histogram-counts h))
  (for/sum ([i (in-range (sub1 (vector-length counts)))]) (vector-ref counts i)))

;; histogram-sum : histogram -> natural ; their sum, in the unit
(define (histogram-sum h)
  (define counts (histogram-counts h))
  (vector-ref counts (sub1 (vector-length counts))))

;; histogram-merge : histogram histogram -> histogram ; the same bounds, counts added
(define (histogram-merge a b)
  (define ca (histogram-counts a))
  (define cb (histogram-counts b))
  (define c (make-vector (vector-length ca)))
  (for ([i (in-range (vector-length ca))]) (vector-set! c i (+ (vector-ref ca i) (vector-ref cb i))))
  (histogram (histogram-bounds a) c))

;; histogram->list : histogram -> (listof natural) ; the counts per bucket, then the sum
(define (histogram->list h) (for/list ([c (in-vector (histogram-counts h))]) c))

;; list->histogram : vector (listof any) -> (or/c histogram #f)
;; From histogram->list with these bounds; #f unless it has the right length of naturals.
(define (list->histogram bounds l)
  (and (= (length l) (+ 2 (vector-length bounds)))
       (andmap fixnum? l)
       (andmap (λ (n) (>= n 0)) l)
       (histogram bounds (apply vector l))))

;; histogram->jsexpr : histogram real -> hash
;; buckets: (bound count) pairs, the counts cumulative and the bounds divided by scale (a
;; histogram of microseconds with scale 1e6 is in seconds), the last bound "+Inf"; count;
;; sum, divided by scale.
(define (histogram->jsexpr h scale)
  (define bounds (histogram-bounds h))
  (define counts (histogram-counts h))
  (define n (vector-length bounds))
  (define (in-unit v) (if (= scale 1) v (/ v (exact->inexact scale))))
  (define buckets
    (for/fold ([acc '()] [total 0] #:result (reverse acc)) ([i (in-range (add1 n))])
      (define t (+ total (vector-ref counts i)))
      (values (cons (list (if (< i n) (in-unit (vector-ref bounds i)) "+Inf") t) acc) t)))
  (hasheq 'buckets buckets
          'count (histogram-count h)
          'sum (in-unit (histogram-sum h))))
