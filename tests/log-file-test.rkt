#lang racket/base
;; fastcgi/private/os/log-file.rkt: the access log's line, against the plain way of making it
;; (strings and a date per line, as it was made before it was made faster); lines from
;; many threads; a log nobody reads and a log whose writes fail.
(require racket/file
         racket/list
         racket/math
         racket/string
         rackunit
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/os/log-file.rkt"
         "lib/pipe.rkt")

;; plain-line : the same arguments as access-line -> bytes
(define (plain-line ms client method uri status bytes duration pid [queue #f])
  (define (field v)
    (cond [(or (not v) (equal? v #"")) "-"]
          [else (regexp-replace* #rx"\"" (log-escape v) "\\\\x22")]))
  (define (decimal x)
    (define hundredths (exact-round (* 100 x)))
    (string-append (number->string (quotient hundredths 100)) "."
                   (if (< (remainder hundredths 100) 10) "0" "")
                   (number->string (remainder hundredths 100))))
  (string->bytes/latin-1
   (string-append (timestamp ms) " " (field client) " \"" (field method) " " (field uri) "\" "
                  (if status (number->string status) "-") " " (number->string bytes) " "
                  (decimal duration) " " (number->string pid) " " (if queue (decimal queue) "-"))))

(test-case "access-line: the same bytes as the plain way, escapes and all"
  (define fields
    (list #f #"" #"127.0.0.1" #"GET" #"/" #"/a?b=1" #"/x\ny\e[31m\"q" #"a\\b" #"sp ace"
          #"\"" #"caf\303\251" #"\177" #"tab\there"))
  (for* ([client (in-list fields)] [uri (in-list fields)])
    (check-equal? (access-line 1763728049123.4 client #"GET" uri 200 14 0.126 1234)
                  (plain-line 1763728049123.4 client #"GET" uri 200 14 0.126 1234)
                  (format "~s ~s" client uri)))
  (check-equal? (access-line 1763728049000.0 #"::1" #"POST" #"/" #f 0 12.5 7)
                (plain-line 1763728049000.0 #"::1" #"POST" #"/" #f 0 12.5 7)))

(test-case "access-line: the queue time (ms, two decimals) as the last field, - without one"
  (for ([q (in-list (list #f 0 0.0 0.004 0.005 3.1 12.345 999.999 1000 86400000.5 -2.0))])
    (check-equal? (access-line 1763728049123.4 #"c" #"GET" #"/" 200 1 0.5 1 q)
                  (plain-line 1763728049123.4 #"c" #"GET" #"/" 200 1 0.5 1 (and q (max 0 q)))
                  (format "~a" q)))
  (check-true (regexp-match? #rx#" 1 3[.]10$" (access-line 1763728049123.4 #"c" #"GET" #"/" 200 1 0.5 1 3.1)))
  (check-true (regexp-match? #rx#" 1 -$" (access-line 1763728049123.4 #"c" #"GET" #"/" 200 1 0.5 1))))

(test-case "access-line: the time, however the milliseconds fall and the seconds change"
  ;; the seconds' text is kept from one line to the next: lines in the same second, a
  ;; second apart, back and forth, and milliseconds of one, two and three digits
  (define base 1763728049000.0)
  (for ([k (in-range 3000)])
    (define ms (+ base (* 1000 (random 5)) (random 1000) (/ (random 10) 10.0)))
    (check-equal? (access-line ms #"c" #"GET" #"/" 200 1 0.5 1) (plain-line ms #"c" #"GET" #"/" 200 1 0.5 1)
                  (format "~a" ms)))
  (for ([ms (in-list (list base (+ base 1) (+ base 9) (+ base 10) (+ base 99) (+ base 100)
                           (+ base 999.9) (+ base 1000) 0.0 951782400000.0))])
    (check-equal? (access-line ms #"c" #"GET" #"/" 200 1 0.5 1) (plain-line ms #"c" #"GET" #"/" 200 1 0.5 1)
                  (format "~a" ms))))

(test-case "log-file: lines from several threads, through flushes and a burst, all written whole and in order"
  ;; 4 threads x 5000 lines, half access lines and half plain ones (some longer than the
  ;; buffer's first 32 KiB, so that it grows), against the flusher thread
  ;; and the flushes a full buffer makes
  (define file (make-temporary-file "fcgi-log-~a"))
  (define lf (open-log-file file))
  (define long (make-bytes 40000 (char->integer #\y)))   ; more than the first buffer
  (define threads
    (for/list ([t (in-range 4)])
      (thread
       (λ ()
         (for ([k (in-range 5000)])
           (if (even? k)
               (log-file-write-access! lf 1763728049123.0 (string->bytes/utf-8 (format "t~a" t)) #"GET"
                                       (string->bytes/utf-8 (format "/~a" k)) 200 k 0.5 t)
               (log-file-write! lf (bytes-append (string->bytes/utf-8 (format "t~a ~a " t k))
                                                 (if (zero? (modulo k 97)) long #"x")))))))))
  (for-each thread-wait threads)
  (log-file-close! lf)
  (define lines (call-with-input-file file (λ (in) (for/list ([l (in-lines in 'linefeed)]) l))))
  (delete-file file)
  (check-equal? (length lines) 20000)
  (for ([t (in-range 4)])
    (define mine
      (for/list ([l (in-list lines)]
                 #:when (or (regexp-match? (pregexp (format "^t~a [0-9]+ " t)) l)
                            (regexp-match? (pregexp (format "Z t~a \"GET " t)) l)))
        (define m (or (regexp-match #px"^t[0-9] ([0-9]+) " l) (regexp-match #px"\"GET /([0-9]+)\"" l)))
        (string->number (cadr m))))
    (check-equal? mine (for/list ([k (in-range 5000)]) k) (format "thread ~a's lines, in order" t)))
  (for ([l (in-list lines)])
    (check-true (or (regexp-match? #px"^t[0-9] [0-9]+ x$" l)
                    (let ([m (regexp-match #px"^t[0-9] [0-9]+ (y+)$" l)])
                      (and m (= (string-length (cadr m)) 40000)))
                    (regexp-match? #px"^2025-11-21T12:27:29[.]123Z t[0-9] \"GET /[0-9]+\" 200 [0-9]+ 0[.]50 [0-9] -$" l))
                l)))

;; pipe-text : input-port -> string ; what the port holds, read until 0.3 s pass with nothing
(define (pipe-text in) (bytes->string/utf-8 (pipe-bytes in) #\?))

(define (notice-line level msg) (string->bytes/utf-8 (format "~a ~a" level msg)))

(test-case "a log nobody reads: writers never wait, the buffer is bounded, drops are counted and told"
  ;; the writer thread blocks on a pipe of 4 KiB; 20000 lines of 100 bytes go to a buffer
  ;; of 64 KiB: the writing thread must finish all the same
  (define-values (in out) (make-pipe 4096))
  (define lf (open-log-port out #:name "a pipe" #:notice notice-line #:max-bytes 65536))
  (define dropped-before (log-lines-dropped))
  (define line (make-bytes 93 (char->integer #\z)))
  (define writer (thread (λ () (for ([k (in-range 20000)])
                                 (log-file-write! lf (bytes-append (string->bytes/utf-8 (format "~a " (+ 10000 k))) line))))))
  (check-not-false (sync/timeout 10 writer) "the writing thread finished")
  (define dropped (- (log-lines-dropped) dropped-before))
  (check-true (< 0 dropped 20000))
  ;; once the pipe is read: every line kept, in order, then the count of the others
  (define done (make-semaphore 0))
  (log-file-sync! lf done)
  (define text (pipe-text in))
  (check-not-false (sync/timeout 5 done))
  (define lines (regexp-split #rx"\n" (string-trim text)))
  (check-equal? (last lines) (format "warning fastcgi: log: ~a lines dropped while the log was not being read" dropped))
  (define kept (for/list ([l (in-list (drop-right lines 1))]) (string->number (car (string-split l)))))
  (check-equal? (+ (length kept) dropped) 20000)
  (check-equal? kept (sort kept <))
  (check-equal? (car kept) 10000 "the first lines are kept, the last dropped"))

(test-case "a log whose writes fail: one error line a second at most"
  ;; a port that fails every write, and records the error lines the log tries to write
  (define tries '())
  (define out (make-output-port 'failing always-evt
                                (λ (bs start end non-block? breakable?)
                                  (define s (bytes->string/utf-8 (subbytes bs start end) #\?))
                                  (when (regexp-match? #rx"cannot write" s) (set! tries (cons s tries)))
                                  (raise (exn:fail:filesystem "no space left" (current-continuation-marks))))
                                void))
  (define lf (open-log-port out #:name "a full disk" #:notice notice-line))
  (define start (current-inexact-milliseconds))
  (for ([k (in-range 150)])
    (log-file-write! lf #"a line")
    (sleep 0.01))
  (define done (make-semaphore 0))
  (log-file-sync! lf done)
  (check-not-false (sync/timeout 5 done))
  (define seconds (/ (- (current-inexact-milliseconds) start) 1000))
  (check-true (pair? tries))
  (check-true (<= (length tries) (add1 (ceiling seconds))) (format "~a error lines in ~a s" (length tries) seconds))
  (check-regexp-match #rx"^error fastcgi: cannot write a full disk: no space left" (last tries))
  (check-regexp-match #rx"more failed writes since the last such line" (car tries))
  (check-true (log-file-close! lf)))
