#lang racket/base
;; fastcgi/private/util/clock.rkt: the monotonic clock of every deadline. now-ms never goes back,
;; alarm-at-evt takes a time on it (not on the wall clock), and wall-ms-at turns one into
;; the wall-clock time shown in logs. (A step of the wall clock under a running server:
;; tests/clock-step-test.rkt.)
(require rackunit
         "../fastcgi/private/util/clock.rkt")

(test-case "now-ms: a flonum that never goes back"
  (define a (now-ms))
  (check-pred flonum? a)
  (check-true (for/and ([i 1000]) (<= a (now-ms)))))

(test-case "alarm-at-evt: ready once now-ms reaches its time, on the monotonic clock"
  (check-not-false (sync/timeout 0 (alarm-at-evt (- (now-ms) 1))) "a time passed: ready at once")
  ;; a monotonic time an hour ahead is not ready; taken as a wall-clock time (the
  ;; monotonic clock's origin is the process's start), it would be long past
  (check-false (sync/timeout 0 (alarm-at-evt (+ (now-ms) 3600000.0))) "an hour ahead: not ready")
  (define at (+ (now-ms) 30))
  (check-not-false (sync/timeout 5 (alarm-at-evt at)))
  (check-true (>= (now-ms) at) "not before its time"))

(test-case "wall-ms-at: a monotonic time as the wall clock reads it"
  (define m (now-ms))
  (define w (current-inexact-milliseconds))
  ;; the two clocks were read a moment apart: the tolerance is that moment, not a figure
  ;; about speed
  (check-true (< (abs (- (wall-ms-at m) w)) 1000.0))
  (check-true (< (abs (- (- (wall-ms-at m) (wall-ms-at (- m 5000.0))) 5000.0)) 1.0)
              "a duration stays a duration"))
