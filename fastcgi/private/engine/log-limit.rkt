#lang racket/base
;; Log lines a peer can cause many of.
;;
;; A line that follows from what a peer sent (a refused request, a protocol error, a
;; denied client) is written for the first few of its kind each second and only counted
;; after that, so a flood of cheap bad input (8-byte records, connections) cannot turn
;; into gigabytes of log. Each kind keeps #(window-start written-in-window not-written)
;; in the server's notes.
(require ffi/unsafe/atomic
         "../util/log.rkt"
         (only-in "wire.rkt" server-notes now-ms))
(provide make-notes warn-limited! warn-once-a-second!)

;; line-burst : lines of one kind written in full each second
(define line-burst 10)

;; note-kinds : every kind; each refusal site logs under its own
(define note-kinds
  '(shed overloaded unknown-role rejected body-over connection-buffer handler-behind
    protocol bad-uri bad-body bad-continuation denied handover))

;; make-notes : -> hasheq
(define (make-notes)
  (for/hasheq ([k (in-list note-kinds)]) (values k (vector -inf.0 0 0))))

;; note-line! : server symbol natural -> (or/c #f natural)
;; Whether a line of this kind is written now: #f when the second's burst is spent (the
;; line is counted), else the count of those not written since the last one written.
(define (note-line! srv kind burst)
  (define v (hash-ref (server-notes srv) kind))
  (define now (now-ms))
  (start-atomic)
  (when (> (- now (vector-ref v 0)) 1000.0)
    (vector-set! v 0 now)
    (vector-set! v 1 0))
  (define skipped (vector-ref v 2))
  (define write? (< (vector-ref v 1) burst))
  (cond
    [write? (vector-set! v 1 (add1 (vector-ref v 1))) (vector-set! v 2 0)]
    [else (vector-set! v 2 (add1 skipped))])
  (end-atomic)
  (and write? skipped))

;; warn-limited! : server symbol (-> string) -> void
;; A warning line (what), written when the kind's burst of line-burst a second allows,
;; with "(N more like it not written)" when some were held back since the last one.
(define (warn-limited! srv kind what)
  (define skipped (note-line! srv kind line-burst))
  (when skipped
    (if (zero? skipped)
        (log-fastcgi-warning "~a" (what))
        (log-fastcgi-warning "~a (~a more like it not written)" (what) skipped))))

;; warn-once-a-second! : server symbol string (-> string) -> void
;; For the floods a peer makes with one cheap record each (OVERLOADED, UNKNOWN_ROLE,
;; shed requests): one line a second, always with how many were not written since the
;; last ("N more <more> since the last such line").
(define (warn-once-a-second! srv kind more what)
  (define skipped (note-line! srv kind 1))
  (when skipped
    (log-fastcgi-warning "~a; ~a more ~a since the last such line" (what) skipped more)))
