#lang racket/base
;; Opens N keep-alive HTTP/1.1 connections to 127.0.0.1:PORT, sends one GET / on each (all
;; at once), reads each answer whole, prints "ready OK-COUNT", and keeps every connection
;; open until its stdin ends or HOLD seconds pass: the bench's many-idle-connections load.
;;   racket bench/hold-conns.rkt PORT N HOLD
(require racket/port
         racket/string
         racket/tcp)

;; read-http-answer : input-port -> (or/c bytes #f) ; one answer's body, #f unless 200
(define (read-http-answer in)
  (define status (read-line in 'return-linefeed))
  (define headers
    (let loop ([acc '()])
      (define line (read-line in 'return-linefeed))
      (if (or (eof-object? line) (string=? line ""))
          acc
          (loop (cons (string-downcase line) acc)))))
  (define (header name)
    (for/or ([h (in-list headers)])
      (and (string-prefix? h name) (string-trim (substring h (string-length name))))))
  (define body
    (cond
      [(header "content-length:") => (λ (n) (read-bytes (string->number n) in))]
      [(equal? (header "transfer-encoding:") "chunked")
       (let loop ([acc #""])
         (define size (string->number (string-trim (read-line in 'return-linefeed)) 16))
         (define chunk (read-bytes size in))
         (read-line in 'return-linefeed)
         (if (zero? size) acc (loop (bytes-append acc chunk))))]
      [else (port->bytes in)]))
  (and (string? status) (regexp-match? #rx"^HTTP/1\\.1 200 " status) body))

(module+ main
  (define args (current-command-line-arguments))
  (define port (string->number (vector-ref args 0)))
  (define n (string->number (vector-ref args 1)))
  (define hold (string->number (vector-ref args 2)))
  (define request #"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
  (define results (make-vector n #f))
  (define ports (make-vector n #f))
  (define workers
    (for/list ([i (in-range n)])
      (thread
       (λ ()
         (with-handlers ([exn:fail? void])
           (define-values (in out) (tcp-connect "127.0.0.1" port))
           (vector-set! ports i (cons in out))
           (write-bytes request out)
           (flush-output out)
           (vector-set! results i (equal? (read-http-answer in) #"Hello, World!\n")))))))
  (define deadline (alarm-evt (+ (current-inexact-milliseconds) 30000)))
  (for ([t (in-list workers)]) (sync t deadline))
  (printf "ready ~a\n" (for/sum ([ok (in-vector results)]) (if ok 1 0)))
  (flush-output)
  (sync/timeout hold (read-line-evt (current-input-port)))
  (for ([p (in-vector ports)] #:when p)
    (close-input-port (car p))
    (close-output-port (cdr p))))
