#lang racket/base
;; The clock of every deadline and interval: the monotonic one, which a step of the wall
;; clock (NTP, a resumed virtual machine, `date -s`) does not move. A deadline on the wall
;; clock fires at once when it steps forward (healthy requests time out, every kept
;; connection closes) and an hour late when it steps back an hour (no request timeout, no
;; status refresh). The wall clock is read only for a time that is shown: log lines, the
;; status page's start_time, the HTTP Date.
;;
;; Racket CS's `sleep` and `sync/timeout` wait on the monotonic clock; `alarm-evt` takes a
;; wall-clock time unless its second argument is true: use `alarm-at-evt`.
(provide now-ms
         alarm-at-evt
         wall-ms-at)

;; now-ms : -> flonum
;; Milliseconds on the monotonic clock. Its origin is the process's start (Racket CS), so a
;; value means nothing in another process: only durations cross process boundaries.
(define (now-ms) (current-inexact-monotonic-milliseconds))

;; alarm-at-evt : real -> evt ; ready once (now-ms) reaches ms
(define (alarm-at-evt ms) (alarm-evt ms #t))

;; wall-ms-at : real -> flonum
;; The wall-clock time of the moment ms on the monotonic clock, as the wall clock reads now.
(define (wall-ms-at ms) (- (current-inexact-milliseconds) (- (now-ms) ms)))
