#lang racket/base
;; Out-of-band major collection (--gc-when-idle, fastcgi/private/idle-gc.rkt), measured:
;; the tail latency of a servlet that allocates (bench/apps/alloc-servlet.rkt) with and
;; without the option, side by side behind one nginx, at 50% and 90% of its capacity
;; (issue 27, item 6: the option stays only if it lowers the tail).
;;
;;   racket bench/oob-gc.rkt [--seconds S] [--warmup S] [--rounds N] [--workers W]
;;
;; Both pools run at once (`raco fastcgi serve --workers W --log-level warning`, one with
;; --gc-when-idle), each behind a port of its own on one nginx (keep-conn on, as the main
;; bench). Capacity: wrk -t1 -c25 on each, after a warm-up; the two rates are 50% and 90%
;; of the lower capacity, the same for both pools. Then each round paces every rate on each
;; pool in turn (bench/pace/pace.c: open loop, each latency counted from when its request
;; was due, so a stall shows in full), the pools' order swapped every round so that a
;; noisy machine hurts both alike (capacity too is measured in the order A B B A, and each
;; pool's is the mean of its two). Printed: every point as it is measured, then a table
;; per rate and pool: the median over rounds of p50, p99 and max, every round's p99 and
;; max, and how many collections the pool's workers ran between requests meanwhile (from
;; its status file). Everything runs under /tmp on loopback and unix sockets; every load
;; is bounded in time.
(require json
         racket/cmdline
         racket/format
         racket/list
         racket/string
         "../tests/integration/lib.rkt"
         "configs.rkt"
         "harness.rkt"
         "measure.rkt")

(define app "bench/apps/alloc-servlet.rkt")

;; A pool measured: its name, the extra serve options, its nginx port, its status file.
(struct pool (name options port status-file) #:transparent)

;; idle-collections : pool -> natural ; its workers' collections between requests so far
(define (idle-collections p)
  (define board (with-handlers ([exn:fail? (λ (e) #f)]) (call-with-input-file (pool-status-file p) read-json)))
  (for/sum ([w (in-list (if (hash? board) (hash-ref board 'workers '()) '()))])
    (define n (hash-ref w 'idle_collections 0))
    (if (exact-integer? n) n 0)))

;; pool-peer : path string string natural (listof string) -> peer
;; `raco fastcgi serve` of the app with workers, options and a pid file of its own in dir
;; (as harness.rkt's ours, whose temporary pid-file names can meet when two pools start in
;; the same millisecond); ready once its status file lists every worker ready.
(define (pool-peer dir name address workers options)
  (define pid-file (path->string (build-path dir (string-append name ".pid"))))
  (peer name raco
        (append (list "fastcgi" "serve" "--listen" address "--log-level" "warning"
                      "--workers" (number->string workers) "--pid-file" pid-file)
                options
                (list (path->string (simplify-path (build-path repo-dir app)))))
        (list address (format "workers:~a:~a.status.json" workers pid-file))))

;; percent : real -> natural ; 0.9 -> 90
(define (percent load) (inexact->exact (round (* 100 load))))

;; median : (listof real) -> real
(define (median xs)
  (define s (sort xs <))
  (define n (length s))
  (if (odd? n) (list-ref s (quotient n 2)) (/ (+ (list-ref s (sub1 (quotient n 2))) (list-ref s (quotient n 2))) 2.0)))

;; A point: the pool's name, the load (0.5 or 0.9), the round, the pace result, and the
;; collections between requests during it.
(struct point (pool load round paced idle-gcs) #:transparent)

;; measure-capacity : pool natural natural -> real ; wrk's req/s after a warm-up
(define (measure-capacity p seconds warmup)
  (define url (format "http://127.0.0.1:~a/" (pool-port p)))
  (run-wrk url 25 warmup)
  (log-command! wrk-path (wrk-args url 25 seconds))
  (define l (run-wrk url 25 seconds))
  (say "~a: capacity ~a req/s (p99 ~a ms, max ~a ms, ~a errors)" (pool-name p)
       (round (load-rps l)) (load-p99 l) (load-max l) (load-errors l))
  (load-rps l))

;; pace-point : path pool real natural natural natural natural -> point
(define (pace-point exe p load rate r seconds warmup)
  (define before (idle-collections p))
  (log-command! (path->string exe) (pace-args (pool-port p) "/" rate seconds warmup))
  (define result (run-pace exe (pool-port p) "/" rate seconds warmup))
  (define gcs (- (idle-collections p) before))
  (say "round ~a, ~a at ~a% (~a req/s): p50 ~a p99 ~a max ~a ms, rate ~a, ~a errors, ~a idle collections"
       r (pool-name p) (percent load) rate (paced-p50 result) (paced-p99 result) (paced-max result)
       (paced-rate result) (paced-errors result) gcs)
  (point (pool-name p) load r result gcs))

;; report : (listof point) (listof pool) (listof real) real -> void ; a Markdown table
(define (report points pools loads capacity)
  (printf "\nCapacity (the lower of the two pools' means): ~a req/s\n\n" (inexact->exact (round capacity)))
  (printf "| load | pool | p50 ms | p99 ms | max ms | p99 by round | max by round | idle collections | errors |\n")
  (printf "|---|---|---|---|---|---|---|---|---|\n")
  (for* ([load (in-list loads)] [p (in-list pools)])
    (define ps (filter (λ (x) (and (equal? (point-pool x) (pool-name p)) (= (point-load x) load))) points))
    (define (med f) (~r (median (map (λ (x) (f (point-paced x))) ps)) #:precision 2))
    (define (each f) (string-join (map (λ (x) (~a (f (point-paced x)))) ps) ", "))
    (printf "| ~a% (~a req/s) | ~a | ~a | ~a | ~a | ~a | ~a | ~a | ~a |\n"
            (percent load) (inexact->exact (round (* load capacity))) (pool-name p)
            (med paced-p50) (med paced-p99) (med paced-max) (each paced-p99) (each paced-max)
            (apply + (map point-idle-gcs ps)) (apply + (map (λ (x) (paced-errors (point-paced x))) ps))))
  (printf "\nCommands:\n")
  (for ([c (in-list (logged-commands))]) (printf "    ~a\n" c)))

(module+ main
  (define seconds 10)
  (define warmup 2)
  (define rounds 3)
  (define workers 2)
  (command-line
   #:once-each
   ["--seconds" s "seconds of each measurement (default 10)" (set! seconds (string->number s))]
   ["--warmup" s "seconds of warm-up before capacity and before each paced point (default 2)"
                (set! warmup (string->number s))]
   ["--rounds" n "rounds of paced points (default 3)" (set! rounds (string->number n))]
   ["--workers" n "workers per pool (default 2)" (set! workers (string->number n))])
  (for ([v (list seconds warmup rounds workers)] [what '("--seconds" "--warmup" "--rounds" "--workers")])
    (unless (exact-positive-integer? v) (raise-user-error 'oob-gc "~a: expected a positive integer" what)))
  (for ([prog+pkg (list (cons wrk-path "wrk") (cons nginx "nginx") (cons gcc "gcc"))])
    (require-program! (car prog+pkg) (cdr prog+pkg)))
  (call-with-temp-dir
   "fcgi-oobgc"
   (λ (dir)
     (define pace-exe (build-pace! dir))
     (define specs `(("default" ()) ("gc-when-idle" ("--gc-when-idle"))))
     (define ports (free-ports (length specs)))
     (define addrs (for/list ([s (in-list specs)] [i (in-naturals)])
                     (format "unix:~a" (build-path dir (format "pool~a.sock" i)))))
     (define peers (for/list ([s (in-list specs)] [a (in-list addrs)])
                     (pool-peer dir (car s) a workers (cadr s))))
     (define pools (for/list ([s (in-list specs)] [port (in-list ports)])
                     (pool (car s) (cadr s) port
                           (path->string (build-path dir (string-append (car s) ".pid.status.json"))))))
     (define fronts (for/hash ([s (in-list specs)] [port (in-list ports)] [a (in-list addrs)] [i (in-naturals)])
                      (values (format "pool~a" i) (front (format "pool~a" i) port 'fastcgi (list a) #t))))
     (define nginx-proc (start-nginx! dir fronts))
     (dynamic-wind
      void
      (λ ()
        (call-with-peers
         dir peers
         (λ (procs)
           (for ([p (in-list pools)])
             (wait-until 60 (format "~a to answer" (pool-name p)) (λ () (answers? (pool-port p) "/" hello-body))))
           ;; each pool twice, in the order A B B A: the one measured first is not favoured
           (define capacities
             (for/fold ([h (hash)]) ([p (in-list (append pools (reverse pools)))])
               (hash-update h (pool-name p) (λ (l) (cons (measure-capacity p seconds warmup) l)) '())))
           (define capacity (apply min (for/list ([l (in-hash-values capacities)]) (/ (apply + l) (length l)))))
           (define loads '(0.5 0.9))
           (define points
             (for*/list ([r (in-range rounds)]
                         [load (in-list loads)]
                         [p (in-list (if (even? r) pools (reverse pools)))])
               (pace-point pace-exe p load (inexact->exact (round (* load capacity))) (add1 r) seconds warmup)))
           (report points pools loads capacity))))
      (λ () (stop-process! nginx-proc))))))
