#lang racket/base
;; The answer to a connection past max-connections: accepted on an overflow slot (so the
;; front is told at once instead of waiting unseen in the kernel's backlog), its first
;; request gets the 503 page and the connection closes.
(require "../util/clock.rkt"
         "../util/limits.rkt"
         "../protocol/protocol.rkt"
         (only-in (submod "../protocol/cgi.rkt" private) refusal-page)
         (only-in "../transport/transport.rkt" socket-shutdown-write!)
         "timer.rkt"
         "wire.rkt"
         (only-in "dispatch.rkt" note-shed!))
(provide refuse-overloaded)

;; refuse-overloaded : input-port output-port string server timer -> void
;; The first BEGIN_REQUEST gets the 503 page and END_REQUEST, then the connection is
;; half-closed and drained (so the front reads the answer rather than a reset) and closed.
;; Records before it are skipped (read whole by protocol.rkt's decoder, which holds at most
;; one), and the whole exchange is bounded by first-byte-timeout plus drain-timeout.
(define (refuse-overloaded in out peer srv tm)
  (define lim (server-limits srv))
  (define (close!)
    (with-handlers ([exn:fail? void]) (close-output-port out))
    (close-input-port in))
  ;; unbuffered, so that the timer's close never waits on a flush to a peer not reading
  (when (file-stream-port? out) (file-stream-buffer-mode out 'none))
  (define deadline
    (timer-at! tm (+ (now-ms) (* 1000 (+ (limits-first-byte-timeout lim) (limits-drain-timeout lim))))
               close!))
  (define d (make-decoder))
  (with-handlers ([exn:fail? void])
    (let loop ()
      (define type (decoder-view! d))   ; a record taken whole, or #f, or a protocol error
      (cond
        [(not type) (unless (eof-object? (decoder-read! d in)) (loop))]
        [(string? type) (void)]
        [(and (eq? type 'begin-request) (positive? (decoder-id d)))
         (define id (decoder-id d))
         (note-shed! srv (λ () (format "over ~a connections (max-connections)" (limits-max-connections lim))))
         (write-bytes (bytes-append (record->bytes 'stdout id (refusal-page 'connections-over))
                                    (record->bytes 'stdout id #"")
                                    (record->bytes 'end-request id
                                                   (end-request-content 0 'request-complete)))
                      out)
         (socket-shutdown-write! out)
         (let drain () (unless (eof-object? (read-bytes 4096 in)) (drain)))]
        [else (loop)])))
  (timer-cancel! tm deadline)
  (close!))
