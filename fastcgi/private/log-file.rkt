#lang racket/base
;; Log files written by whole lines: the access log and the slow log. Several worker
;; processes append to one file, so every write() carries whole lines only and the file is
;; opened with O_APPEND (lines from different processes never interleave inside a line).
;; Lines are gathered in memory and written at most every 0.2 s, or at once past 16 KiB,
;; so a busy worker does not pay a system call per request. Reopening (SIGUSR1, logrotate)
;; closes the file and opens the path again. "-" is standard output.
;;
;; A line goes into the file's buffer in atomic mode (a few copies, no lock to take), and
;; an access line is written into it piece by piece, digits included, with nothing
;; allocated for it: through a semaphore and a list of lines, writing an access line took
;; 1.57 µs and 3.7 KB (a loop; 0.66 µs and 0.36 KB now, bench/OPTIMISATIONS.md).
(require ffi/unsafe/atomic
         racket/date
         racket/math
         "log.rkt")
(provide open-log-file
         log-file-write!
         log-file-write-access!
         log-file-flush!
         log-file-reopen!
         log-file-close!
         access-line
         timestamp)

;; buf: the lines not yet written, up to fill; spare: a buffer the flush swaps in (only
;; the holder of flush-lock touches it); flush-lock: one flush at a time, so that lines
;; leave in the order they came
(struct log-file (path [out #:mutable] flush-lock [buf #:mutable] [fill #:mutable] [spare #:mutable]
                       [flusher #:mutable]))

(define flush-bytes 16384)
(define flush-interval 0.2)
(define initial-size 32768)

;; open-log-file : (or/c "-" path-string) -> log-file
;; Raises exn:fail:filesystem when the file cannot be opened (the caller reports it).
(define (open-log-file path)
  (define lf (log-file path (open-port path) (make-semaphore 1)
                       (make-bytes initial-size) 0 (make-bytes initial-size) #f))
  (set-log-file-flusher!
   lf
   (thread (λ () (let loop () (sleep flush-interval) (log-file-flush! lf) (loop)))))
  lf)

;; open-port : (or/c "-" path-string) -> output-port
(define (open-port path)
  (cond
    [(equal? path "-") (current-output-port)]
    [else
     (define out (open-output-file path #:exists 'append))
     (file-stream-buffer-mode out 'none)
     out]))

;; room! : log-file natural -> bytes ; in atomic mode: the buffer, with n bytes free after fill
(define (room! lf n)
  (define buf (log-file-buf lf))
  (define need (+ (log-file-fill lf) n))
  (cond
    [(<= need (bytes-length buf)) buf]
    [else
     (define bigger (make-bytes (max need (* 2 (bytes-length buf)))))
     (bytes-copy! bigger 0 buf 0 (log-file-fill lf))
     (set-log-file-buf! lf bigger)
     bigger]))

;; put! : log-file bytes -> void ; in atomic mode: appends bs
(define (put! lf bs)
  (define buf (room! lf (bytes-length bs)))
  (define i (log-file-fill lf))
  (bytes-copy! buf i bs)
  (set-log-file-fill! lf (+ i (bytes-length bs))))

;; put-byte! : log-file byte -> void ; in atomic mode
(define (put-byte! lf b)
  (define buf (room! lf 1))
  (define i (log-file-fill lf))
  (bytes-set! buf i b)
  (set-log-file-fill! lf (add1 i)))

;; put-decimal! : log-file exact-nonnegative-integer natural -> void
;; In atomic mode: n in decimal, zero-padded to at least width digits.
(define (put-decimal! lf n width)
  (define digits (let count ([n (quotient n 10)] [k 1]) (if (zero? n) k (count (quotient n 10) (add1 k)))))
  (define w (max digits width))
  (define buf (room! lf w))
  (define start (log-file-fill lf))
  (let loop ([n n] [j (+ start w -1)])
    (when (>= j start)
      (bytes-set! buf j (+ 48 (remainder n 10)))
      (loop (quotient n 10) (sub1 j))))
  (set-log-file-fill! lf (+ start w)))

;; log-file-write! : log-file bytes -> void ; line without its newline
(define (log-file-write! lf line)
  (start-atomic)
  (put! lf line)
  (put-byte! lf 10)
  (define fill (log-file-fill lf))
  (end-atomic)
  (when (> fill flush-bytes) (log-file-flush! lf)))

;; log-file-write-access! : log-file real (or/c bytes #f) (or/c bytes #f) (or/c bytes #f)
;;                          any natural real natural -> void
;; The access line of access-line, written into the buffer with its newline.
(define (log-file-write-access! lf ms client method uri status bytes duration pid)
  ;; a field that needs escaping is escaped before, outside atomic mode
  (define c (field client))
  (define m (field method))
  (define u (field uri))
  (define head (second-head ms))
  (start-atomic)
  (put-access! lf ms head c m u status bytes duration pid)
  (put-byte! lf 10)
  (define fill (log-file-fill lf))
  (end-atomic)
  (when (> fill flush-bytes) (log-file-flush! lf)))

;; put-access! : log-file real bytes bytes bytes bytes any natural real natural -> void
;; In atomic mode: TIME CLIENT "METHOD URI" STATUS BYTES DURATION-MS PID, fields escaped.
(define (put-access! lf ms head client method uri status bytes duration pid)
  (put! lf head)
  (put-decimal! lf (exact-floor (- ms (* 1000 (exact-floor (/ ms 1000))))) 3)
  (put! lf #"Z ")
  (put! lf client)
  (put! lf #" \"")
  (put! lf method)
  (put-byte! lf 32)
  (put! lf uri)
  (put! lf #"\" ")
  (if (exact-nonnegative-integer? status) (put-decimal! lf status 1) (put-byte! lf 45))
  (put-byte! lf 32)
  (put-decimal! lf bytes 1)
  (put-byte! lf 32)
  ;; milliseconds with two decimals
  (define hundredths (max 0 (exact-round (* 100 duration))))   ; the wall clock may step back
  (put-decimal! lf (quotient hundredths 100) 1)
  (put-byte! lf 46)
  (put-decimal! lf (remainder hundredths 100) 2)
  (put-byte! lf 32)
  (put-decimal! lf pid 1))

;; log-file-flush! : log-file -> void ; one write of every pending line
;; The buffer is swapped for the spare in atomic mode and written outside it, so writers
;; never wait for the disk; flush-lock keeps the order of lines between two flushes.
(define (log-file-flush! lf)
  (semaphore-wait (log-file-flush-lock lf))
  (start-atomic)
  (define buf (log-file-buf lf))
  (define fill (log-file-fill lf))
  (set-log-file-buf! lf (log-file-spare lf))
  (set-log-file-fill! lf 0)
  (end-atomic)
  (unless (zero? fill)
    (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "cannot write ~a: ~a"
                                                         (log-escape (log-file-path lf))
                                                         (log-escape (exn-message e))))])
      (write-bytes buf (log-file-out lf) 0 fill)
      (flush-output (log-file-out lf))))
  ;; a buffer that grew for a burst goes back to the usual size
  (set-log-file-spare! lf (if (> (bytes-length buf) (* 4 initial-size)) (make-bytes initial-size) buf))
  (semaphore-post (log-file-flush-lock lf)))

;; log-file-reopen! : log-file -> void
;; After logrotate moved the file away: pending lines go to the old file, new ones to a
;; new file at the same path. A failure keeps the old port and is logged.
(define (log-file-reopen! lf)
  (log-file-flush! lf)
  (unless (equal? (log-file-path lf) "-")
    (call-with-semaphore
     (log-file-flush-lock lf)
     (λ ()
       (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "cannot reopen ~a: ~a"
                                                            (log-escape (log-file-path lf))
                                                            (log-escape (exn-message e))))])
         (define new (open-port (log-file-path lf)))
         (close-output-port (log-file-out lf))
         (set-log-file-out! lf new))))))

;; log-file-close! : log-file -> void
(define (log-file-close! lf)
  ;; the flusher is stopped between two flushes, never in one: killed while it held
  ;; flush-lock, it would leave the lock taken and the flush below waiting for ever
  (semaphore-wait (log-file-flush-lock lf))
  (kill-thread (log-file-flusher lf))
  (semaphore-post (log-file-flush-lock lf))
  (log-file-flush! lf)
  (unless (equal? (log-file-path lf) "-")
    (close-output-port (log-file-out lf))))

;; timestamp : real -> string ; 2026-11-20T10:04:05.123Z from milliseconds since the epoch
(define (timestamp ms)
  (define secs (exact-floor (/ ms 1000)))
  (define d (seconds->date secs #f))
  (define (pad n w) (let ([s (number->string n)]) (string-append (make-string (max 0 (- w (string-length s))) #\0) s)))
  (string-append (pad (date-year d) 4) "-" (pad (date-month d) 2) "-" (pad (date-day d) 2)
                 "T" (pad (date-hour d) 2) ":" (pad (date-minute d) 2) ":" (pad (date-second d) 2)
                 "." (pad (exact-floor (- ms (* secs 1000))) 3) "Z"))

;; field : (or/c bytes #f) -> bytes ; escaped, a double quote too, "-" when absent
;; (as is when it has nothing to escape: printable ASCII with no backslash or quote)
(define (field v)
  (cond
    [(or (not v) (equal? v #"")) #"-"]
    [(for/and ([b (in-bytes v)]) (and (<= 32 b 126) (not (eqv? b 92)) (not (eqv? b 34)))) v]
    [else (string->bytes/latin-1 (regexp-replace* #rx"\"" (log-escape v) "\\\\x22"))]))

;; access-line : real (or/c bytes #f) (or/c bytes #f) (or/c bytes #f) any natural real natural
;;               -> bytes
;; TIME CLIENT "METHOD URI" STATUS BYTES DURATION-MS PID
;; e.g. 2026-11-20T10:04:05.123Z 192.0.2.7 "GET /a?b=1" 200 1432 0.84 12345
;; The line log-file-write-access! writes, as bytes (made by the same code).
(define (access-line ms client method uri status bytes duration pid)
  (define scratch (log-file #f #f #f (make-bytes 256) 0 #f #f))
  (define head (second-head ms))
  (define c (field client))
  (define m (field method))
  (define u (field uri))
  (start-atomic)
  (put-access! scratch ms head c m u status bytes duration pid)
  (end-atomic)
  (subbytes (log-file-buf scratch) 0 (log-file-fill scratch)))

;; second-head : real -> bytes ; "2026-11-20T10:04:05." for ms, made once a second (the
;; box holds the last second and its text, replaced whole: threads share it)
(define last-second (box (cons #f #"")))
(define (second-head ms)
  (define secs (exact-floor (/ ms 1000)))
  (define last (unbox last-second))
  (if (eqv? (car last) secs)
      (cdr last)
      (let ([head (string->bytes/latin-1 (substring (timestamp (* secs 1000.0)) 0 20))])
        (set-box! last-second (cons secs head))
        head)))
