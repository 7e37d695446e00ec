#lang racket/base
;; Load and memory figures: wrk's output parsed into numbers, and the memory of a backend
;; with all its processes (a pool manager's children count too), from /proc.
(require racket/file
         racket/list
         racket/string
         "../tests/integration/lib.rkt")
(provide (struct-out load)
         (struct-out paced)
         wrk-path
         wrk-args
         run-wrk
         parse-wrk
         pace-args
         run-pace
         parse-pace
         tree-pids
         tree-memory-kb
         parse-pss
         pss-kb
         reset-tree-peaks!
         tree-socket-count)

(define wrk-path "/usr/bin/wrk")

;; A wrk run: requests/s, latency percentiles and maximum in ms, requests completed, and
;; the requests that went wrong (socket errors plus answers other than 2xx/3xx).
(struct load (rps p50 p99 max requests errors) #:transparent)

;; wrk-args : string natural natural -> (listof string)
;; One thread (nginx and the backend need the other core), a 10 s per-request timeout so
;; a slow large answer is counted as slow rather than as an error.
(define (wrk-args url connections seconds)
  (list "-t1" (format "-c~a" connections) (format "-d~as" seconds) "--timeout" "10s" "--latency" url))

;; run-wrk : string natural natural -> load
(define (run-wrk url connections seconds)
  (define-values (status out err)
    (run-program (string->path wrk-path) (wrk-args url connections seconds)
                 #:timeout (+ seconds 30)))
  (unless (eqv? status 0)
    (error 'bench "wrk ~a exited with ~a: ~a" url status err))
  (parse-wrk (bytes->string/utf-8 out #\?)))

;; A paced run (bench/pace/pace.c): the rate asked (req/s), the requests due in the
;; measured part, those answered 200, the errors (other answers, closed connections,
;; answers that never came), the answered requests per second, and the latency
;; percentiles and maximum in ms, each counted from when its request was due.
(struct paced (asked due answered errors rate p50 p90 p99 p999 max) #:transparent)

;; pace-args : natural string natural natural natural -> (listof string)
;; 25 connections, as many as wrk's at the peak the rates are taken from. With 64, a
;; backlog put up to 64 requests in flight through nginx, whose `keepalive 16` then
;; opened a FastCGI connection for 55-64% of requests (ab.rkt --churn --connections 64,
;; against 12-25% at 25): the peak itself fell by a quarter, and no backend sustained
;; 90% of the one measured at 25 (round 14 of bench/OPTIMISATIONS.md as of c223f0c).
(define pace-connections 25)
(define (pace-args port path rate seconds warmup)
  (list (number->string port) path (number->string rate) (number->string pace-connections)
        (number->string seconds) (number->string warmup)))

;; run-pace : path natural string natural natural natural -> paced
(define (run-pace exe port path rate seconds warmup)
  (define-values (status out err)
    (run-program exe (pace-args port path rate seconds warmup) #:timeout (+ seconds warmup 30)))
  (unless (eqv? status 0)
    (error 'bench "pace at ~a req/s exited with ~a: ~a" rate status err))
  (parse-pace rate (bytes->string/utf-8 out #\?)))

;; parse-pace : natural string -> paced
(define (parse-pace asked text)
  (define m (regexp-match #px"^due (\\d+) answered (\\d+) errors (\\d+) rate (\\d+) p50 ([0-9.]+) p90 ([0-9.]+) p99 ([0-9.]+) p999 ([0-9.]+) max ([0-9.]+)\n$" text))
  (unless m (error 'bench "pace printed no result line:\n~a" text))
  (apply paced asked (map string->number (cdr m))))

;; duration->ms : string string -> real ; "512.00" "us" -> 0.512
(define (duration->ms n unit)
  (* (string->number n)
     (case unit [("us") 1/1000] [("ms") 1] [("s") 1000] [("m") 60000] [("h") 3600000]
       [else (error 'bench "unknown wrk duration unit ~s" unit)])))

;; parse-wrk : string -> load
(define (parse-wrk text)
  (define (grab rx what)
    (define m (regexp-match rx text))
    (unless m (error 'bench "no ~a in wrk's output:\n~a" what text))
    (cdr m))
  (define (latency rx what)
    (define m (grab rx what))
    (exact->inexact (duration->ms (car m) (cadr m))))
  (define dur "([0-9.]+)(us|ms|s|m|h)")
  (define socket-errors
    (cond
      [(regexp-match #px"Socket errors: connect (\\d+), read (\\d+), write (\\d+), timeout (\\d+)" text)
       => (λ (m) (apply + (map string->number (cdr m))))]
      [else 0]))
  (define bad-status
    (cond
      [(regexp-match #px"Non-2xx or 3xx responses: (\\d+)" text) => (λ (m) (string->number (cadr m)))]
      [else 0]))
  (load (string->number (car (grab #px"Requests/sec:\\s+([0-9.]+)" "Requests/sec")))
        (latency (pregexp (string-append "\\s50%\\s+" dur)) "50% latency")
        (latency (pregexp (string-append "\\s99%\\s+" dur)) "99% latency")
        (latency (pregexp (string-append "Latency\\s+[0-9.]+\\w+\\s+[0-9.]+\\w+\\s+" dur)) "max latency")
        (string->number (car (grab #px"(\\d+) requests in" "request count")))
        (+ socket-errors bad-status)))

;; tree-pids : natural -> (listof natural) ; pid and its descendants still alive
(define (tree-pids root)
  (define parents
    (for*/list ([d (in-list (directory-list "/proc"))]
                #:when (regexp-match? #rx"^[0-9]+$" (path->string d))
                [stat (in-value (with-handlers ([exn:fail? (λ (e) #f)])
                                  (file->string (build-path "/proc" d "stat"))))]
                #:when stat)
      ;; the command name, in parentheses, may itself hold spaces and parentheses
      (define fields (string-split (substring stat (cdr (last (regexp-match-positions* #rx"\\)" stat))))))
      (cons (string->number (path->string d)) (string->number (cadr fields)))))
  (let loop ([todo (list root)] [seen '()])
    (cond
      [(null? todo) (reverse seen)]
      [else
       (define kids (for/list ([p (in-list parents)] #:when (= (cdr p) (car todo))) (car p)))
       (loop (append (cdr todo) kids) (cons (car todo) seen))])))

;; tree-memory-kb : natural -> (values natural natural)
;; The sums of VmHWM (each process's peak) and VmRSS over the tree; a process that exits
;; between the listing and the reading counts for nothing.
(define (tree-memory-kb root)
  (for/fold ([hwm 0] [rss 0]) ([pid (in-list (tree-pids root))])
    (with-handlers ([exn:fail? (λ (e) (values hwm rss))])
      (values (+ hwm (status-memory-kb pid 'VmHWM)) (+ rss (status-memory-kb pid 'VmRSS))))))

;; parse-pss : string -> natural
;; The Pss: line of /proc/PID/smaps_rollup in KiB: the process's resident pages, each
;; shared page divided by the number of processes that map it (RSS counts it in each).
(define (parse-pss text)
  (define m (regexp-match #px"(?m:^Pss:\\s+([0-9]+) kB$)" text))
  (unless m (error 'bench "no Pss: line in smaps_rollup: ~s" (substring text 0 (min 200 (string-length text)))))
  (string->number (cadr m)))

;; pss-kb : natural -> natural ; a live process's PSS in KiB (Linux 4.14+)
(define (pss-kb pid)
  (parse-pss (file->string (format "/proc/~a/smaps_rollup" pid))))

;; reset-tree-peaks! : natural -> void ; VmHWM back to VmRSS for each process of the tree
(define (reset-tree-peaks! root)
  (for ([pid (in-list (tree-pids root))])
    (with-handlers ([exn:fail? void]) (reset-peak-memory! pid))))

;; tree-socket-count : natural -> natural ; open sockets (listening one included) in the tree
(define (tree-socket-count root)
  (for/sum ([pid (in-list (tree-pids root))])
    (with-handlers ([exn:fail? (λ (e) 0)])
      (for/sum ([fd (in-list (directory-list (format "/proc/~a/fd" pid)))])
        (define target (with-handlers ([exn:fail? (λ (e) #f)])
                         (resolve-path (build-path (format "/proc/~a/fd" pid) fd))))
        (if (and target (regexp-match? #rx"^socket:" (path->string target))) 1 0)))))

(module+ test
  (require racket/os
           rackunit)
  (define sample #<<END
Running 10s test @ http://127.0.0.1:8080/
  1 threads and 25 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   512.34us  120.00us  12.50ms   91.00%
    Req/Sec    48.00k     2.00k   52.00k    80.00%
  Latency Distribution
     50%  480.00us
     75%  600.00us
     90%  700.00us
     99%    1.20ms
  480000 requests in 10.00s, 60.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  48000.12
Transfer/sec:      6.00MB
END
    )
  (check-equal? (parse-wrk sample) (load 48000.12 0.48 1.2 12.5 480000 7))
  (check-equal? (load-errors (parse-wrk (regexp-replace* #rx"  (Socket|Non)[^\n]*\n" sample ""))) 0)
  (check-exn #rx"no Requests/sec" (λ () (parse-wrk "garbage")))
  (check-equal? (parse-pace 20000 "due 100000 answered 99990 errors 10 rate 19998 p50 0.152 p90 0.213 p99 0.570 p999 2.111 max 4.457\n")
                (paced 20000 100000 99990 10 19998 0.152 0.213 0.570 2.111 4.457))
  (check-exn #rx"no result line" (λ () (parse-pace 1 "pace: connect: refused\n")))
  (check-equal? (parse-pss "55d0-7ffd ---p 00000000 00:00 0  [rollup]\nRss:  99636 kB\nPss:  96619 kB\nPss_Dirty:  72636 kB\n")
                96619)
  (check-exn #rx"no Pss: line" (λ () (parse-pss "Rss: 1 kB\nPss_Anon: 2 kB\n")))
  (check-true (> (pss-kb (getpid)) 1000))
  (check-equal? (car (tree-pids (getpid))) (getpid))
  (define-values (hwm rss) (tree-memory-kb (getpid)))
  (check-true (>= hwm rss 1000)))
