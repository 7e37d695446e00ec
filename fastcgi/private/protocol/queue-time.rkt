#lang racket/base
;; Queue time: how long a request waited between the front receiving it and a worker
;; taking it, from the time the front passes in the param HTTP_X_REQUEST_START (nginx
;; `fastcgi_param HTTP_X_REQUEST_START "t=${msec}";`, HAProxy, Apache's
;; `RequestHeader set X-Request-Start "%t"`). It compares two wall clocks, the front's and
;; this host's: on one host they are the same clock; across hosts their offset is in it.
;; Pure: the caller gives the wall-clock time the worker took the request.
(provide request-start-ms
         queue-time-ms
         future-tolerance-ms)

;; request-start-ms : (or/c bytes #f) -> (or/c real #f)
;; The wall-clock milliseconds of the value: "t=" or nothing, then decimal digits, as seconds
;; with a fraction ("t=1700000000.123", nginx's ${msec}) or as an integer of seconds,
;; milliseconds, microseconds (Apache's %t) or nanoseconds, told apart by its size. #f when
;; malformed, or before the year 2000 (no front sends that: a unit misread).
(define (request-start-ms v)
  (define m (and v (regexp-match #px#"^\\s*(?:t=)?([0-9]{1,19})(?:\\.([0-9]{1,9}))?\\s*$" v)))
  (define ms
    (and m
         (let ([n (string->number (bytes->string/latin-1 (cadr m)))])
           (cond
             [(caddr m)
              (* 1000 (+ n (/ (string->number (bytes->string/latin-1 (caddr m)))
                              (expt 10 (bytes-length (caddr m))))))]
             [(< n #e1e11) (* n 1000)]
             [(< n #e1e14) n]
             [(< n #e1e17) (/ n 1000)]
             [else (/ n 1000000)]))))
  (and ms (>= ms 946684800000) (exact->inexact ms)))

;; A front's time up to this far ahead of ours counts as no wait (the two clocks' rounding,
;; a small offset); further ahead it is ignored.
(define future-tolerance-ms 1000)

;; queue-time-ms : (or/c bytes #f) real -> (or/c real #f)
;; The wait, in milliseconds, of a request whose HTTP_X_REQUEST_START is v and that a
;; worker took at wall-clock time taken-ms: at least 0; #f when v says nothing usable.
(define (queue-time-ms v taken-ms)
  (define start (request-start-ms v))
  (define wait (and start (- taken-ms start)))
  (and wait (>= wait (- future-tolerance-ms)) (max 0.0 wait)))
