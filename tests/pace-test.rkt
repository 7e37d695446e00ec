#lang racket/base
;; bench/pace/pace.c, the benchmark's open-loop client (make bench's latency scenario),
;; against an HTTP server of this test's own on 127.0.0.1: every request is counted once,
;; as answered or as an error; answers with a Content-Length and chunked ones, answers
;; that arrive in pieces, and connections the server ends with `Connection: close` are
;; read right; a status other than 200 is an error; its rate and latencies are what was
;; asked and what the server made them.
(require racket/format
         racket/runtime-path
         racket/tcp
         rackunit
         "integration/lib.rkt"
         (only-in "../bench/measure.rkt" parse-pace paced-due paced-answered paced-errors
                  paced-rate paced-p50 paced-max))

(define-runtime-path pace-source "../bench/pace/pace.c")

(define gcc (require-program! "/usr/bin/gcc" "gcc"))

;; serve : tcp-listener (-> natural) natural #:never (natural -> boolean)
;;         #:busy (natural -> boolean) -> void
;; Answers each request on each connection in turn; next-n numbers the requests of all
;; connections. Request n: 503 when (busy n), by default when n is a multiple of 50;
;; otherwise chunked (in two
;; writes, a millisecond apart) when n is odd, a Content-Length when even; every 7th
;; answer on a connection says `Connection: close` and the connection ends. delay-ms is
;; slept before each answer. A request n for which (never n) holds is never answered
;; (its connection stays open, silent).
(define (serve listener next-n delay-ms #:never [never? (λ (n) #f)]
               #:busy [busy? (λ (n) (zero? (modulo n 50)))])
  (let accept ()
    (define-values (in out) (tcp-accept listener))
    (thread
     (λ ()
       (with-handlers ([exn:fail? void])
         (let loop ([k 1])
           (define head (regexp-match #rx#"\r\n\r\n" in))
           (when head
             (define n (next-n))
             (when (never? n) (sync never-evt))
             (define close? (zero? (modulo k 7)))
             (define conn (if close? "Connection: close\r\n" ""))
             (sleep (/ delay-ms 1000.0))
             (cond
               [(busy? n)
                (write-string (format "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n~a\r\nbusy" conn) out)]
               [(odd? n)
                (write-string (format "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n~a\r\n6\r\nHello,\r\n" conn) out)
                (flush-output out)
                (sleep 0.001)
                (write-string "8\r\n World!\n\r\n0\r\n\r\n" out)]
               [else
                (write-string (format "HTTP/1.1 200 OK\r\nContent-Length: 14\r\n~a\r\nHello, World!\n" conn) out)])
             (flush-output out)
             (unless close? (loop (add1 k))))))
       (close-output-port out)
       (close-input-port in)))
    (accept)))

(call-with-temp-dir
 "pace-test"
 (λ (dir)
   (define exe (build-path dir "pace"))
   (define-values (st out err)
     (run-program gcc (list "-O2" "-Wall" "-Werror" "-o" (path->string exe) (path->string pace-source))
                  #:timeout 120))
   (check-equal? st 0 (format "gcc: ~a" err))
   (define listener (tcp-listen 0 64 #t "127.0.0.1"))
   (define-values (_a port _b _c) (tcp-addresses listener #t))
   (define counter 0)
   (define lock (make-semaphore 1))
   (define (next-n) (call-with-semaphore lock (λ () (set! counter (add1 counter)) counter)))
   (define delay-ms 2)
   (define server (thread (λ () (serve listener next-n delay-ms))))
   (define (pace rate seconds warmup)
     (define-values (st out err)
       (run-program exe (map ~a (list port "/" rate 8 seconds warmup))
                    #:timeout 60))
     (check-equal? st 0 (format "pace: ~a" err))
     (parse-pace rate (bytes->string/utf-8 out)))

   (test-case "each request is answered once or counted as an error, at the rate asked"
     (set! counter 0)
     (define p (pace 400 2 0))
     (check-equal? (paced-due p) 800)
     ;; requests 50, 100, ..., 800 answered 503: errors, the rest answered
     (check-equal? (paced-errors p) 16)
     (check-equal? (paced-answered p) 784)
     (check-equal? counter 800 "the server saw each request once")
     (check-true (<= 380 (paced-rate p) 400) (format "rate ~a" (paced-rate p)))
     ;; the server waits 2 ms before each answer, and the chunked ones take 1 ms more
     (check-true (>= (paced-p50 p) delay-ms) (format "p50 ~a ms" (paced-p50 p)))
     (check-true (< (paced-p50 p) 50) (format "p50 ~a ms" (paced-p50 p))))

   (test-case "the warm-up is sent but not counted"
     (set! counter 0)
     (define p (pace 200 1 1))
     (check-equal? (paced-due p) 200)
     (check-equal? counter 400)
     (check-equal? (+ (paced-answered p) (paced-errors p)) 200))

   (test-case "a server slower than the rate: the wait for a connection counts in the latency"
     ;; 8 connections, 2 ms or more an answer: at most about 4,000 a second would need no
     ;; queue, at 6,000 requests wait for a free connection and their latency grows
     (set! counter 0)
     (define p (pace 6000 1 0))
     (check-equal? (+ (paced-answered p) (paced-errors p)) (paced-due p))
     (check-true (> (paced-max p) 50) (format "max ~a ms" (paced-max p))))

   (test-case "answers that never come: errors only for requests of the measured part"
     ;; a second server whose 10th request (in the warm-up) and 300th (measured) are never
     ;; answered: the client waits 5 s after the last due time, then counts the measured
     ;; one alone (it counted both once)
     (define l2 (tcp-listen 0 64 #t "127.0.0.1"))
     (define-values (_a2 port2 _b2 _c2) (tcp-addresses l2 #t))
     (define n2 0)
     (define (next2) (call-with-semaphore lock (λ () (set! n2 (add1 n2)) n2)))
     (define silent (thread (λ () (serve l2 next2 0 #:never (λ (n) (memv n '(10 300))) #:busy (λ (n) #f)))))
     (define-values (st out err)
       (run-program exe (map ~a (list port2 "/" 200 8 1 1)) #:timeout 60))
     (check-equal? st 0 (format "pace: ~a" err))
     (define p (parse-pace 200 (bytes->string/utf-8 out)))
     (check-equal? (paced-due p) 200)
     (check-equal? (paced-errors p) 1)
     (check-equal? (paced-answered p) 199)
     (kill-thread silent)
     (tcp-close l2))

   (test-case "bad arguments and a refused connection"
     (define-values (st1 out1 err1) (run-program exe (list "0" "/" "10" "8" "1") #:timeout 10))
     (check-equal? st1 1)
     (check-regexp-match #rx"bad arguments" (bytes->string/utf-8 err1))
     (define closed (let ([l (tcp-listen 0 1 #t "127.0.0.1")])
                      (define-values (_a p _b _c) (tcp-addresses l #t))
                      (tcp-close l)
                      p))
     (define-values (st2 out2 err2)
       (run-program exe (map ~a (list closed "/" 10 8 1 0)) #:timeout 10))
     (check-equal? st2 2)
     (check-regexp-match #rx"connect" (bytes->string/utf-8 err2)))

   (kill-thread server)
   (tcp-close listener)))
