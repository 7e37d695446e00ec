#lang racket/base
;; Reading what a process or a printer wrote into a pipe, for the logging tests.
(provide pipe-bytes)

;; pipe-bytes : input-port -> bytes
;; What the port holds, read until 0.3 s pass with nothing. It waits on the port, then
;; reads what is there: with read-bytes-avail!-evt, a small pipe stops passing a long write
;; on, part way through, in Racket 8.7 CS.
(define (pipe-bytes in)
  (define got (open-output-bytes))
  (let loop ()
    (define buf (make-bytes 65536))
    (define n (and (sync/timeout 0.3 in) (read-bytes-avail!* buf in)))
    (when (exact-positive-integer? n)
      (write-bytes buf got 0 n)
      (loop)))
  (get-output-bytes got))
