#lang racket/base
;; child-process.rkt's readings of /proc, which the manager takes of each worker and loader
;; every few seconds: resident memory (VmRSS of /proc/PID/status) and the part shared with
;; other processes (Shared_Clean + Shared_Dirty of /proc/PID/smaps_rollup), in bytes; #f
;; for a process that is gone. (Its handles on processes are tested through a pool:
;; preload-test, lifecycle-test.)
(require racket/list
         racket/string
         rackunit
         (only-in "../fastcgi/private/os/ffi.rkt" c-getpid)
         "../fastcgi/private/os/child-process.rkt")

;; kb-field : path string -> natural ; the "NAME: N kB" line of a /proc file, in bytes
(define (kb-field file name)
  (define line (findf (λ (l) (string-prefix? l (string-append name ":")))
                      (call-with-input-file file (λ (in) (for/list ([l (in-lines in)]) l)))))
  (* 1024 (string->number (second (string-split line)))))

(define self (c-getpid))

(test-case "resident memory: this process's VmRSS, in bytes"
  (define got (process-rss self))
  (define want (kb-field (format "/proc/~a/status" self) "VmRSS"))
  (check-true (exact-positive-integer? got))
  ;; the two readings are moments apart: the heap may have grown in between
  (check-true (< (abs (- got want)) (* 0.1 want)) (format "~a against ~a" got want))
  (check-true (< (* 10 1024 1024) got) "a Racket process holds more than 10 MiB"))

(test-case "shared memory: clean and dirty pages shared, in bytes"
  (define f (format "/proc/~a/smaps_rollup" self))
  (define got (process-shared self))
  (define want (+ (kb-field f "Shared_Clean") (kb-field f "Shared_Dirty")))
  (check-true (exact-nonnegative-integer? got))
  (check-true (<= (abs (- got want)) (* 1024 1024)) (format "~a against ~a" got want)))

(test-case "a process that is gone: #f, not an error"
  ;; pid_max is at most 2^22 on Linux
  (check-false (process-rss 99999999))
  (check-false (process-shared 99999999)))
