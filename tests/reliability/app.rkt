#lang racket/base
;; The application under `make reliability` and `make soak`: a raw handler whose paths
;; are the request kinds the runs mix. Every answer is a CGI answer with Content-Length.
;;   /hello            a few bytes
;;   /cpu/N            N ms of CPU (a fixed amount of work, calibrated at load)
;;   /slow/N           sleeps N ms (a handler waiting on I/O)
;;   /download/N       N bytes, written in 64 KiB pieces
;;   /upload           reads the whole body; answers its length
;;   /raise            the handler raises (the front gets 500)
;;   /hang             never returns (the request timeout ends it with 503)
;;   /leak/N           keeps N KiB for the life of the worker (a leak, for --max-memory)
(require racket/string
         fastcgi)
(provide fastcgi-handler)

;; work! : natural -> natural ; computation the optimizer cannot skip
(define (work! n) (for/fold ([x 0]) ([i (in-range n)]) (bitwise-xor x (* i 7))))

;; iterations of work! per millisecond of this thread's CPU time, measured once at load
;; (CPU time, not the clock: workers start together, and a calibration that shared a core
;; made /cpu/N cheaper and the measured capacity too high)
(define per-ms
  (let loop ([n 100000])
    (define t0 (current-process-milliseconds (current-thread)))
    (work! n)
    (define ms (- (current-process-milliseconds (current-thread)) t0))
    (if (< ms 20) (loop (* n 4)) (/ n ms))))

(define chunk (make-bytes 65536 (char->integer #\x)))

;; what /leak/N keeps (filled, so that the pages are resident)
(define leaked '())

(define (answer out status body)
  (write-string (format "Status: ~a\r\nContent-Type: text/plain\r\nContent-Length: ~a\r\n\r\n"
                        status (bytes-length body))
                out)
  (write-bytes body out))

(define (fastcgi-handler r)
  (define out (fastcgi-request-stdout r))
  (define uri (bytes->string/latin-1 (fastcgi-param r "REQUEST_URI" #"/")))
  (define path (car (string-split (string-append uri "?") "?" #:trim? #f)))
  (define (number-after prefix)
    (string->number (substring path (string-length prefix))))
  (cond
    [(string=? path "/hello") (answer out 200 #"Hello, World!\n")]
    [(and (string-prefix? path "/cpu/") (number-after "/cpu/"))
     => (λ (ms) (work! (inexact->exact (round (* ms per-ms)))) (answer out 200 #"computed\n"))]
    [(and (string-prefix? path "/slow/") (number-after "/slow/"))
     => (λ (ms) (sleep (/ ms 1000.0)) (answer out 200 #"slept\n"))]
    [(and (string-prefix? path "/download/") (number-after "/download/"))
     => (λ (n)
          (write-string (format "Content-Type: application/octet-stream\r\nContent-Length: ~a\r\n\r\n" n) out)
          (let loop ([left n])
            (when (positive? left)
              (write-bytes chunk out 0 (min left (bytes-length chunk)))
              (loop (- left (bytes-length chunk))))))]
    [(string=? path "/upload")
     (define in (fastcgi-request-stdin r))
     (define buf (make-bytes 65536))
     (define total
       (let loop ([total 0])
         (define n (read-bytes-avail! buf in))
         (if (eof-object? n) total (loop (+ total n)))))
     (answer out 200 (string->bytes/utf-8 (format "~a\n" total)))]
    [(and (string-prefix? path "/leak/") (number-after "/leak/"))
     => (λ (kib)
          (set! leaked (cons (make-bytes (* 1024 kib) 1) leaked))
          (answer out 200 #"kept\n"))]
    [(string=? path "/raise") (error 'reliability-app "raised on purpose")]
    [(string=? path "/hang") (let loop () (sleep 1) (loop))]
    [else (answer out 404 #"not found\n")]))
