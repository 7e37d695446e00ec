#lang racket/base
;; fastcgi/private/os/logging.rkt: flush-logging returns once the lines logged before it are
;; printed, and a flush that timed out does not answer a later one; while nobody reads,
;; lines are dropped and counted, and the count is printed once they are read again.
(require racket/port
         racket/string
         rackunit
         (only-in "../fastcgi/private/os/log-file.rkt" log-lines-dropped)
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/os/logging.rkt"
         "lib/pipe.rkt")

;; The printer writes into a pipe that holds 64 bytes: while nobody reads it, a longer line
;; blocks the printer, as a stderr nobody reads would.
(define-values (in out) (make-pipe 64))
(parameterize ([current-error-port out])
  (start-stderr-logging! 'info))

(define line-1 (string-append "first " (make-string 200 #\a)))
(define line-2 (string-append "second " (make-string 200 #\b)))
(define line-3 "third")

;; drain! : -> string ; what the printer wrote, read until it has written nothing for 0.3 s
(define (drain!) (bytes->string/utf-8 (pipe-bytes in) #\uFFFD))

(test-case "a flush that cannot finish in 2 s says so"
  (log-fastcgi-warning "~a" line-1)
  ;; the printer is blocked on the full pipe: the flush cannot finish, and says so
  (check-false (flush-logging))
  (define printed (drain!))
  (check-true (string-contains? printed line-1)))

(test-case "a flush that timed out does not answer the next one"
  ;; the first flush's printer went on once the pipe was read, and signalled that flush
  ;; after its caller had given up. Block the printer again: the next flush must time out
  ;; as well, not return on the earlier signal.
  (log-fastcgi-warning "~a" line-2)
  (check-false (flush-logging))
  (define printed (drain!))
  (check-true (string-contains? printed line-2)))

(test-case "with the printer free, a flush returns once its lines are out"
  ;; a short line: it fits in the pipe, so the printer does not block
  (log-fastcgi-warning "~a" line-3)
  (check-not-false (flush-logging))
  (check-true (string-contains? (drain!) line-3)))

(test-case "while nobody reads, lines past the bound are dropped, counted, then told"
  ;; 3000 lines of 1 KB: more than the printer's buffer holds (1 MiB) while the pipe is
  ;; not read; the printer keeps up with the logger all the same (it drops lines), so
  ;; nothing piles up in the receiver
  (define before (log-lines-dropped))
  (define filler (make-string 1000 #\c))
  (for ([k (in-range 3000)]) (log-fastcgi-warning "~a ~a" k filler))
  (check-false (flush-logging))
  (define dropped (- (log-lines-dropped) before))
  (check-true (< 0 dropped 3000))
  (define printed (drain!))
  (check-true (string-contains? printed (format "fastcgi: log: ~a lines dropped while the log was not being read" dropped)))
  (check-equal? (+ dropped (length (regexp-match* #rx" cccc" printed))) 3000))
