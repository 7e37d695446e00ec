#lang racket/base
;; Log files written by whole lines: the access log, the slow log, and standard error
;; (logging.rkt). Several worker processes append to one file, so every write() carries
;; whole lines only and the file is opened with O_APPEND (lines from different processes
;; never interleave inside a line). Reopening (SIGUSR1, logrotate) closes the file and
;; opens the path again. "-" is standard output.
;;
;; Lines go into a buffer in memory; one writer thread per log takes the buffer whole and
;; writes it (a file log gathers lines for at most 0.2 s, or 16 KiB, so that a busy
;; worker does not pay a system call per request; standard error is written as soon as
;; there is a line). The threads that put lines never write and never wait: a reader that
;; stalls (a pipe nobody reads) blocks only the writer thread. The buffer is bounded
;; (max-bytes): a line that comes while it is full is dropped and counted, and once the
;; writer gets through again the log says how many were dropped. A write that fails (a
;; full disk, a closed pipe) is logged at most once a second, with how many more failed.
;;
;; A line goes into the buffer in atomic mode (a few copies, no lock to take), and an
;; access line is written into it piece by piece, digits included, with nothing
;; allocated for it: a semaphore and a list of lines cost every request far more time and
;; allocation (bench/OPTIMISATIONS.md, The access log written into its buffer).
(require ffi/unsafe/atomic
         ffi/unsafe/port
         (only-in "ffi.rkt" set-cloexec!)
         "../util/log.rkt")
;; racket/math's, which would load racket/contract (jsexpr.rkt says why that matters)
(define (exact-floor x) (inexact->exact (floor x)))
(define (exact-round x) (inexact->exact (round x)))

(provide open-log-file
         open-log-port
         log-file-write!
         log-file-write-access!
         log-file-sync!
         log-file-reopen!
         log-file-close!
         log-lines-dropped
         access-line
         timestamp
         seconds->iso)

;; path: #f for a port given by the caller (never reopened or closed here); name: the
;; path, or what the port is, for the log's own messages; out: the port (the writer
;; thread's alone); buf: the lines not yet written, up to fill; spare: the buffer the
;; writer swaps in; dropped: lines dropped since the last swap; max-bytes: no line goes
;; into a buffer that holds this much; wake: posted when the writer should write now;
;; delay: how long the writer gathers lines (0: it writes as soon as there is one);
;; notice: #f (the log's own messages go to the fastcgi logger), or (symbol string ->
;; bytes) that makes a line of this log (standard error: the messages go in it);
;; failed-ms, failures: the last write error logged, and those not logged since.
(struct log-file (path name [out #:mutable] [buf #:mutable] [fill #:mutable] [spare #:mutable]
                       [dropped #:mutable] max-bytes wake delay notice [writer #:mutable]
                       [failed-ms #:mutable] [failures #:mutable]))

;; new-log-file : keyword ... -> log-file ; a log with nothing written yet
(define (new-log-file #:path [path #f] #:name [name #f] #:out [out #f]
                      #:size [size initial-size] #:spare? [spare? #t]
                      #:max-bytes [max-bytes default-max-bytes] #:delay [delay 0]
                      #:notice [notice #f])
  (log-file path name out (make-bytes size) 0 (and spare? (make-bytes size)) 0
            max-bytes (make-semaphore 0) delay notice #f -inf.0 0))

(define flush-bytes 16384)
(define flush-interval 0.2)
(define initial-size 32768)
(define default-max-bytes (* 1024 1024))

;; Lines dropped in this process, every log together (the status shows it): changed in
;; atomic mode only.
(define dropped-total 0)

;; log-lines-dropped : -> natural ; lines dropped in this process since it started
(define (log-lines-dropped) dropped-total)

;; open-log-file : (or/c "-" path-string) #:max-bytes natural -> log-file
;; Raises exn:fail:filesystem when the file cannot be opened (the caller reports it).
(define (open-log-file path #:max-bytes [max-bytes default-max-bytes])
  (start-log (new-log-file #:path path
                            #:name (if (equal? path "-") "standard output" (format "~a" path))
                            #:out (open-port path) #:max-bytes max-bytes #:delay flush-interval)))

;; open-log-port : output-port #:name string #:notice (or/c #f (symbol string -> bytes))
;;                 #:max-bytes natural -> log-file
;; A log on a port that stays the caller's, written as soon as there is a line.
(define (open-log-port out #:name name #:notice [notice #f] #:max-bytes [max-bytes default-max-bytes])
  (start-log (new-log-file #:name name #:out out #:max-bytes max-bytes #:notice notice)))

;; start-log : log-file -> log-file ; with its writer thread running
(define (start-log lf)
  (set-log-file-writer! lf (thread (λ () (write-loop lf))))
  lf)

;; open-port : (or/c "-" path-string) -> output-port
(define (open-port path)
  (cond
    [(equal? path "-") (current-output-port)]
    [else
     (define out (open-output-file path #:exists 'append))
     (file-stream-buffer-mode out 'none)
     ;; no program the application starts keeps the log file open
     (set-cloexec! (unsafe-port->file-descriptor out))
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

;; log-file-write! : log-file (or/c bytes (-> bytes)) -> void
;; line: without its newline, or a procedure that makes it, called only when the line is
;; kept (a full log drops lines without making them).
(define (log-file-write! lf line)
  (cond
    [(full? lf) (start-atomic) (drop! lf) (end-atomic)]
    [else
     (define bs (if (procedure? line) (line) line))
     (start-atomic)
     (define before (log-file-fill lf))
     (put! lf bs)
     (put-byte! lf 10)
     (define after (log-file-fill lf))
     (end-atomic)
     (wake! lf before after)]))

;; full? : log-file -> boolean ; the buffer holds max-bytes: a line now is dropped
(define (full? lf) (>= (log-file-fill lf) (log-file-max-bytes lf)))

;; drop! : log-file -> void ; in atomic mode: one more line dropped
(define (drop! lf)
  (set-log-file-dropped! lf (add1 (log-file-dropped lf)))
  (set! dropped-total (add1 dropped-total)))

;; wake! : log-file natural natural -> void
;; After a line took the buffer from before to after bytes: the writer writes at once
;; when the line is the first (a log with no delay) or passes flush-bytes.
(define (wake! lf before after)
  (when (if (zero? (log-file-delay lf))
            (zero? before)
            (and (<= before flush-bytes) (> after flush-bytes)))
    (semaphore-post (log-file-wake lf))))

;; log-file-write-access! : log-file real (or/c bytes #f) (or/c bytes #f) (or/c bytes #f)
;;                          any natural real natural [(or/c real #f)] -> void
;; The access line of access-line, written into the buffer with its newline.
(define (log-file-write-access! lf ms client method uri status bytes duration pid [queue #f])
  ;; a field that needs escaping is escaped before, outside atomic mode
  (define c (field client))
  (define m (field method))
  (define u (field uri))
  (define head (second-head ms))
  (start-atomic)
  (define before (log-file-fill lf))
  (cond
    [(full? lf) (drop! lf) (end-atomic)]
    [else
     (put-access! lf ms head c m u status bytes duration pid queue)
     (put-byte! lf 10)
     (define after (log-file-fill lf))
     (end-atomic)
     (wake! lf before after)]))

;; put-access! : log-file real bytes bytes bytes bytes any natural real natural (or/c real #f)
;;               -> void
;; In atomic mode: TIME CLIENT "METHOD URI" STATUS BYTES DURATION-MS PID QUEUE-MS, fields
;; escaped; QUEUE-MS is - when the front passed no time (queue-time.rkt).
(define (put-access! lf ms head client method uri status bytes duration pid queue)
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
  (put-ms! lf duration)
  (put-byte! lf 32)
  (put-decimal! lf pid 1)
  (put-byte! lf 32)
  (if queue (put-ms! lf queue) (put-byte! lf 45)))

;; put-ms! : log-file real -> void ; milliseconds with two decimals, in atomic mode
(define (put-ms! lf ms)
  (define hundredths (max 0 (exact-round (* 100 ms))))   ; the wall clock may step back
  (put-decimal! lf (quotient hundredths 100) 1)
  (put-byte! lf 46)
  (put-decimal! lf (remainder hundredths 100) 2))

;; write-loop : log-file -> none
;; The writer thread: it writes the buffer when woken, after the delay, or when asked
;; (log-file-sync!, log-file-reopen!, log-file-close!, as messages). It alone touches the
;; port, so a stalled reader or a slow disk holds back no other thread.
(define (write-loop lf)
  (define delay (log-file-delay lf))
  (define asked (wrap-evt (thread-receive-evt) (λ (_) (thread-receive))))
  (let loop ()
    (define m (if (zero? delay)
                  (sync (log-file-wake lf) asked)
                  (sync/timeout delay (log-file-wake lf) asked)))
    (write-pending! lf)
    (cond
      [(not (pair? m)) (loop)]
      [(eq? (car m) 'sync) (semaphore-post (cdr m)) (loop)]
      [(eq? (car m) 'reopen) (reopen-port! lf) (loop)]
      [(eq? (car m) 'close)
       (when (log-file-path lf) (close-port! lf))
       (semaphore-post (cdr m))])))

;; write-pending! : log-file -> void ; one write of every line in the buffer
;; The buffer is swapped for the spare in atomic mode and written outside it. The lines
;; dropped while it was full came after the lines in it: once those are written, a
;; notice says how many.
(define (write-pending! lf)
  (start-atomic)
  (define buf (log-file-buf lf))
  (define fill (log-file-fill lf))
  (define dropped (log-file-dropped lf))
  (set-log-file-buf! lf (log-file-spare lf))
  (set-log-file-fill! lf 0)
  (set-log-file-dropped! lf 0)
  (end-atomic)
  (define written? (or (zero? fill) (write-out! lf buf fill)))
  (cond
    [(not written?)
     ;; told when a write goes through
     (start-atomic)
     (set-log-file-dropped! lf (+ dropped (log-file-dropped lf)))
     (end-atomic)]
    [(positive? dropped)
     (notice! lf 'warning (format "~a: ~a lines dropped while the log was not being read"
                                  (if (log-file-notice lf) "log" (format "log to ~a" (log-escape (log-file-name lf))))
                                  dropped))])
  ;; a buffer that grew for a burst goes back to the usual size
  (set-log-file-spare! lf (if (> (bytes-length buf) (* 4 initial-size)) (make-bytes initial-size) buf)))

;; write-out! : log-file bytes natural -> boolean ; #f when the write failed (logged)
(define (write-out! lf buf fill)
  (with-handlers ([exn:fail? (λ (e) (write-failed! lf e) #f)])
    (write-bytes buf (log-file-out lf) 0 fill)
    (flush-output (log-file-out lf))
    #t))

;; write-failed! : log-file exn -> void
;; One line a second at most, with how many more writes failed since the last one.
(define (write-failed! lf e)
  (define now (current-inexact-monotonic-milliseconds))
  (cond
    [(< (- now (log-file-failed-ms lf)) 1000.0)
     (set-log-file-failures! lf (add1 (log-file-failures lf)))]
    [else
     (define more (log-file-failures lf))
     (set-log-file-failed-ms! lf now)
     (set-log-file-failures! lf 0)
     (notice! lf 'error (format "cannot write ~a: ~a~a" (log-escape (log-file-name lf))
                                (log-escape (regexp-replace* #rx"\n *" (exn-message e) "; "))
                                (if (zero? more) "" (format " (~a more failed writes since the last such line)" more))))]))

;; notice! : log-file symbol string -> void
;; The log's own message: in the log itself (standard error), else to the fastcgi logger.
(define (notice! lf level msg)
  (define make-line (log-file-notice lf))
  (cond
    [make-line
     (with-handlers ([exn:fail? void])   ; a write that fails again is the one just logged
       (write-bytes (bytes-append (make-line level (string-append "fastcgi: " msg)) #"\n")
                    (log-file-out lf))
       (flush-output (log-file-out lf)))]
    [(eq? level 'error) (log-fastcgi-error "~a" msg)]
    [else (log-fastcgi-warning "~a" msg)]))

;; log-file-sync! : log-file semaphore -> void
;; Posts done once the lines put before the call are written (or their write failed).
;; Does not wait: the caller decides how long it waits on done.
(define (log-file-sync! lf done)
  (unless (thread-send (log-file-writer lf) (cons 'sync done) #f)
    (semaphore-post done)))

;; log-file-reopen! : log-file -> void
;; After logrotate moved the file away: pending lines go to the old file, new ones to a
;; new file at the same path (done by the writer; a failure keeps the old port and is
;; logged). Does not wait.
(define (log-file-reopen! lf)
  (when (and (log-file-path lf) (not (equal? (log-file-path lf) "-")))
    (thread-send (log-file-writer lf) '(reopen) #f)))

;; reopen-port! : log-file -> void ; in the writer thread
(define (reopen-port! lf)
  (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "cannot reopen ~a: ~a"
                                                       (log-escape (log-file-name lf))
                                                       (log-escape (exn-message e))))])
    (define new (open-port (log-file-path lf)))
    (close-port! lf)
    (set-log-file-out! lf new)))

;; close-port! : log-file -> void ; in the writer thread; standard output stays open
(define (close-port! lf)
  (unless (equal? (log-file-path lf) "-")
    (with-handlers ([exn:fail? void]) (close-output-port (log-file-out lf)))))

;; log-file-close! : log-file #:timeout real -> boolean
;; Writes the pending lines and closes the file (a port given to open-log-port stays
;; open). The writer gets timeout seconds: then it is stopped wherever it is (a reader
;; that stalls must not hold a stopping worker). #f when it did not finish in time.
(define (log-file-close! lf #:timeout [timeout 2])
  (define done (make-semaphore 0))
  (define writer (log-file-writer lf))
  (define finished? (and (thread-send writer (cons 'close done) #f)
                         (sync/timeout timeout done)
                         #t))
  (kill-thread writer)
  finished?)

;; timestamp : real -> string ; 2026-11-20T10:04:05.123Z from milliseconds since the epoch
(define (timestamp ms)
  (define secs (exact-floor (/ ms 1000)))
  (string-append (seconds->iso secs) "." (pad (exact-floor (- ms (* secs 1000))) 3) "Z"))

;; seconds->iso : integer -> string ; 2026-11-20T10:04:05, UTC
(define (seconds->iso secs)
  (define d (seconds->date secs #f))
  (string-append (pad (date-year d) 4) "-" (pad (date-month d) 2) "-" (pad (date-day d) 2)
                 "T" (pad (date-hour d) 2) ":" (pad (date-minute d) 2) ":" (pad (date-second d) 2)))

;; pad : natural natural -> string ; zeros on the left up to w digits
(define (pad n w) (let ([s (number->string n)]) (string-append (make-string (max 0 (- w (string-length s))) #\0) s)))

;; field : (or/c bytes #f) -> bytes ; escaped, a double quote too, "-" when absent
;; (as is when it has nothing to escape: printable ASCII with no backslash or quote)
(define (field v)
  (cond
    [(or (not v) (equal? v #"")) #"-"]
    [(for/and ([b (in-bytes v)]) (and (<= 32 b 126) (not (eqv? b 92)) (not (eqv? b 34)))) v]
    [else (string->bytes/latin-1 (regexp-replace* #rx"\"" (log-escape v) "\\\\x22"))]))

;; access-line : real (or/c bytes #f) (or/c bytes #f) (or/c bytes #f) any natural real natural
;;               [(or/c real #f)] -> bytes
;; TIME CLIENT "METHOD URI" STATUS BYTES DURATION-MS PID QUEUE-MS
;; e.g. 2026-11-20T10:04:05.123Z 192.0.2.7 "GET /a?b=1" 200 1432 0.84 12345 3.10
;; The line log-file-write-access! writes, as bytes (made by the same code).
(define (access-line ms client method uri status bytes duration pid [queue #f])
  (define scratch (new-log-file #:size 256 #:spare? #f #:max-bytes +inf.0))
  (define head (second-head ms))
  (define c (field client))
  (define m (field method))
  (define u (field uri))
  (start-atomic)
  (put-access! scratch ms head c m u status bytes duration pid queue)
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
