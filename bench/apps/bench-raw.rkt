#lang racket/base
;; The bench's raw app, with the C responder's routes (on DOCUMENT_URI):
;;   /1m, /16m  1 MiB or 16 MiB of "x" with a Content-Length, built once (immutable),
;;              written at once
;;   /upload    reads the whole body in 64 KiB pieces, keeping none, and answers its length
;;   /cpu       a few ms of pure Racket work (cpu-iterations rounds of fixnum arithmetic)
;;   anything   "Hello, World!\n" as text/plain
;;   raco fastcgi serve bench/apps/bench-raw.rkt --listen unix:/tmp/bench.sock
(require racket/fixnum
         fastcgi)
(provide fastcgi-handler
         cpu-work)

(define hello #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n")

;; large-answer : natural -> bytes ; head and n bytes of "x", as the C responder sends.
;; Immutable, as the manual advises for an answer built once: the stdout port then sends
;; it as it is, where it would copy a mutable one on each write (the C responder too sends
;; one buffer it built once).
(define (large-answer n)
  (bytes->immutable-bytes
   (bytes-append
    (string->bytes/latin-1
     (format "Status: 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: ~a\r\n\r\n" n))
    (make-bytes n (char->integer #\x)))))

(define answer-1m (large-answer (* 1024 1024)))
(define answer-16m (large-answer (* 16 1024 1024)))

;; drain : input-port -> natural ; the body's length, read in 64 KiB pieces
(define (drain in)
  (define piece (make-bytes 65536))
  (let loop ([n 0])
    (define k (read-bytes! piece in))
    (if (eof-object? k) n (loop (+ n k)))))

;; About 3 ms on the 2-core bench machine (Racket CS 8.7); the same work in every run.
(define cpu-iterations 2250000)

;; cpu-work : natural -> fixnum ; a hash-like fold the compiler cannot skip
(define (cpu-work n)
  (for/fold ([h 17]) ([i (in-range n)])
    (fxand (fx+ (fx* h 31) i) #xFFFFFF)))

(define (fastcgi-handler r)
  (define out (fastcgi-request-stdout r))
  (define path (fastcgi-param r "DOCUMENT_URI" #"/"))
  (cond
    [(equal? path #"/1m") (write-bytes answer-1m out)]
    [(equal? path #"/16m") (write-bytes answer-16m out)]
    [(equal? path #"/upload")
     (define n (drain (fastcgi-request-stdin r)))
     (write-string (format "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nlength=~a\n" n) out)]
    [(equal? path #"/cpu")
     (write-string (format "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nwork=~a\n"
                           (cpu-work cpu-iterations))
                   out)]
    [else (write-bytes hello out)]))
