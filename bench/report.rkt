#lang racket/base
;; What a run found, and how it is shown: RESULTS.md (the latest run only: the targets as
;; measured ratios with PASS or MISS, a table per scenario, the versions), beside it
;; RESULTS-commands.md (every command run, the configuration files), and results.png (hello
;; world req/s of every backend relative to the C responder, readable at a glance).
(require racket/format
         racket/list
         racket/string
         plot/no-gui
         "measure.rkt")
(provide (struct-out row)
         measured?
         rps
         (struct-out pace-row)
         (struct-out upload-row)
         (struct-out many-result)
         (struct-out outcome)
         evaluate-targets
         write-results!
         plot-results!)

;; A measured (or skipped) line of a table: a key the targets refer to, a label, the load
;; (#f when not measured), the backend's summed VmHWM and VmRSS in KiB (#f when there is
;; no backend), and a note ("" or why it was not measured).
(struct row (key label load hwm rss note) #:transparent)

;; An upload backend: the times of its 100 MiB uploads in seconds, and the growth of its
;; peak memory over its RSS before the first one, in KiB.
(struct upload-row (key label seconds growth-kb note) #:transparent)

;; A backend in the many-connections scenario: connections asked and answered, the
;; backend's RSS before and with them open (KiB, #f when not measured), its open sockets
;; before and with them.
(struct many-result (key label conns answered rss0 rss1 sockets0 sockets1 note) #:transparent)

;; A backend paced at one rate (the latency scenario): its key and label, its peak
;; (req/s, #f when unknown), which rate this is ('common: the run's common rate; 'half and
;; 'high: 50% and 90% of its own peak), the paced result (#f when not measured), and a note.
(struct pace-row (key label peak kind result note) #:transparent)

;; A run: when and where, the mode ("full" or "quick"), wrk's duration and warm-up, the
;; number of rounds of the hello-world rows, the
;; tables (hello25 hello100 large cpu: rows; upload: upload-rows; many: many-results;
;; latency: pace-rows; relay: rows; any of them '() when not run), the memory section's
;; markdown (bench/memory.rkt) or #f when not run, whether --workers existed, the
;; commands run (a list of strings), the configuration files (an alist of title and
;; text), the versions (an alist), and the sections of the benchmarks run on their own
;; (bench/trampoline-results.md, bench/canary-results.md, bench/side-by-side-results.md), each with its comment, or #f.
(struct outcome (date cores mode duration warmup rounds
                 hello25 hello100 large upload cpu many latency relay memory
                 workers? commands configs versions trampoline)
  #:transparent)

(define MiB (* 1024 1024))

;; measured? : row -> boolean ; measured, with answers, none of them wrong
(define (measured? r)
  (and (row-load r) (zero? (load-errors (row-load r))) (positive? (load-requests (row-load r)))))

;; find-row : (listof row) symbol -> (or/c row #f) ; a row that was measured
(define (find-row rows key)
  (define r (findf (λ (r) (eq? (row-key r) key)) rows))
  (and r (measured? r) r))

;; rps : (listof row) symbol -> (or/c real #f)
(define (rps rows key)
  (define r (find-row rows key))
  (and r (load-rps (row-load r))))

;; A target's line: what, measured (text), required (text), verdict ('pass 'miss 'n/a).
(struct target (what measured required verdict) #:transparent)

;; ratio-target : string (or/c real #f) (or/c real #f) string (real -> boolean) -> target
(define (ratio-target what num den required ok?)
  (if (and num den (positive? den))
      (let ([q (/ num den)])
        (target what (format "~a (~a / ~a)" (~r q #:precision 2) (fmt-num num) (fmt-num den))
                required (if (ok? q) 'pass 'miss)))
      (target what "not measured" required 'n/a)))

;; evaluate-targets : outcome -> (listof target)
(define (evaluate-targets o)
  (define h25 (outcome-hello25 o))
  (define h100 (outcome-hello100 o))
  (define (p99 key)
    (define r (find-row h100 key))
    (and r (load-p99 (row-load r))))
  (define ours-up (findf (λ (u) (eq? (upload-row-key u) 'ours)) (outcome-upload o)))
  (define many (findf (λ (m) (eq? (many-result-key m) 'ours)) (outcome-many o)))
  (list
   (ratio-target "hello, raw, unix, keep-conn / C responder (25 conns)"
                 (rps h25 'ours-raw-keep) (rps h25 'c-unix-keep) ">= 0.90" (λ (q) (>= q 0.90)))
   (ratio-target "hello, servlet, unix, keep-conn / C responder (25 conns)"
                 (rps h25 'ours-servlet-keep) (rps h25 'c-unix-keep) ">= 0.75" (λ (q) (>= q 0.75)))
   (ratio-target "hello, raw, keep-conn off / C responder keep-conn off (25 conns)"
                 (rps h25 'ours-raw-close) (rps h25 'c-unix-close) ">= 0.85" (λ (q) (>= q 0.85)))
   (ratio-target "1 MiB response, raw / nginx static file"
                 (rps (outcome-large o) 'ours-1m) (rps (outcome-large o) 'static-1m)
                 ">= 0.5" (λ (q) (>= q 0.5)))
   (if (and ours-up (upload-row-growth-kb ours-up))
       (let ([g (/ (upload-row-growth-kb ours-up) 1024.0)])
         (target "100 MiB upload, raw: growth of the worker's peak memory"
                 (format "~a MiB" (~r g #:precision 1)) "< 32 MiB" (if (< g 32) 'pass 'miss)))
       (target "100 MiB upload, raw: growth of the worker's peak memory" "not measured"
               "< 32 MiB" 'n/a))
   (ratio-target "CPU-bound handler, 2 workers / 1 worker"
                 (rps (outcome-cpu o) 'workers-2) (rps (outcome-cpu o) 'workers-1)
                 ">= 1.7" (λ (q) (>= q 1.7)))
   (if (and many (many-result-rss1 many) (= (many-result-answered many) (many-result-conns many)))
       (let ([per (/ (- (many-result-rss1 many) (many-result-rss0 many)) (many-result-conns many))])
         (target (format "~a keep-alive connections via HAProxy: backend memory per connection"
                         (many-result-conns many))
                 (format "~a KiB" (~r per #:precision 1)) "< 64 KiB" (if (< per 64) 'pass 'miss)))
       (target "1000 keep-alive connections via HAProxy: backend memory per connection"
               "not measured" "< 64 KiB" 'n/a))
   (let ([ours (p99 'ours-raw-keep)] [c (p99 'c-unix-keep)])
     (if (and ours c (positive? c))
         (let ([q (/ ours c)])
           (target "p99 latency at 100 conns, raw / C responder"
                   (format "~a (~a ms / ~a ms)" (~r q #:precision 2) (fmt-ms ours) (fmt-ms c))
                   "<= 2" (if (<= q 2) 'pass 'miss)))
         (target "p99 latency at 100 conns, raw / C responder" "not measured" "<= 2" 'n/a)))))

;; ---------------------------------------------------------------------------------------
;; Markdown.

;; fmt-num : real -> string ; 48213.5 -> "48,214"
(define (fmt-num x)
  (define s (number->string (inexact->exact (round x))))
  (let loop ([s s] [acc '()])
    (if (<= (string-length s) 3)
        (string-join (cons s acc) ",")
        (loop (substring s 0 (- (string-length s) 3))
              (cons (substring s (- (string-length s) 3)) acc)))))

;; fmt-ms : real -> string
(define (fmt-ms x)
  (~r x #:precision (if (< x 10) 2 1)))

;; fmt-mib : (or/c natural #f) -> string ; KiB shown in MiB
(define (fmt-mib kb)
  (if kb (~r (/ kb 1024.0) #:precision 1) "-"))

;; table : (listof string) (listof (listof string)) -> string
(define (table header rows)
  (define (line cells) (string-append "| " (string-join cells " | ") " |\n"))
  (string-append (line header)
                 (line (for/list ([_ (in-list header)]) "---"))
                 (string-append* (map line rows))))

;; load-table : (listof row) (or/c symbol #f) -> string
;; One line per row; the ratio column divides by the row keyed base, when given.
(define (load-table rows base [extra-header #f] [extra #f])
  (define base-rps (and base (rps rows base)))
  (table
   (append (list "backend" "req/s")
           (if base-rps (list (format "× ~a" (row-label (find-row rows base)))) '())
           (if extra-header (list extra-header) '())
           (list "p50 ms" "p99 ms" "max ms" "peak MiB (VmHWM)" "RSS MiB" "errors" "note"))
   (for/list ([r (in-list rows)])
     (define l (row-load r))
     (append
      (list (row-label r) (if l (fmt-num (load-rps l)) "-"))
      (if base-rps (list (if l (~r (/ (load-rps l) base-rps) #:precision 2) "-")) '())
      (if extra-header (list (if l (extra r) "-")) '())
      (if l
          (list (fmt-ms (load-p50 l)) (fmt-ms (load-p99 l)) (fmt-ms (load-max l)))
          (list "-" "-" "-"))
      (list (fmt-mib (row-hwm r)) (fmt-mib (row-rss r))
            (if l (number->string (load-errors l)) "-")
            (row-note r))))))

;; relay-note : (listof row) -> string ; what a passed-on request adds, per request
(define (relay-note rows)
  (define direct (rps rows 'continuation-direct))
  (define relayed (rps rows 'continuation-relayed))
  (if (and direct relayed)
      (format "\nA passed-on request: ~a req/s against ~a for the owner alone (× ~a), about ~a µs more of wall time per request at 25 connections.\n"
              (fmt-num relayed) (fmt-num direct) (~r (/ relayed direct) #:precision 2)
              (~r (- (/ 1e6 relayed) (/ 1e6 direct)) #:precision 1))
      ""))

;; ceiling-notes : outcome -> string
;; php-fpm is a peer the targets no longer name: the C responder, which does no work at
;; all, bounds what any FastCGI backend can reach through this nginx, and on this machine
;; it is not far enough ahead of php-fpm for a ratio to php-fpm to be a fair target. The
;; ratios to php-fpm are still reported, with the figures of this run; and when even the
;; C responder is under the 1 MiB target, the note says so.
(define (ceiling-notes o)
  (define h25 (outcome-hello25 o))
  (define php (rps h25 'php-keep))
  (define c-1m (rps (outcome-large o) 'c-1m))
  (define static-1m (rps (outcome-large o) 'static-1m))
  (define against-php
    (for*/list ([kl (in-list '((ours-raw-keep . "ours raw") (ours-servlet-keep . "ours servlet")
                               (c-unix-keep . "the C responder itself")))]
                [n (in-value (rps h25 (car kl)))]
                #:when (and n php (positive? php)))
      (format "~a ~a x (~a / ~a)" (cdr kl) (~r (/ n php) #:precision 2) (fmt-num n) (fmt-num php))))
  (string-append
   (if (null? against-php)
       ""
       (format (string-append
                "\nphp-fpm's requests/s, reported but not a target: ~a. The targets are ratios "
                "to the C responder, which does no work at all and so bounds what any FastCGI "
                "backend can reach through this nginx (bench/README.md, Targets).\n")
               (string-join against-php ", ")))
   (if (and c-1m static-1m (positive? static-1m) (< (/ c-1m static-1m) 0.5))
       (format (string-append
                "\nFor 1 MiB answers the C responder reached ~a x nginx's static file (~a / ~a): "
                "under the 0.5 x target too; read ours against the C responder as well.\n")
               (~r (/ c-1m static-1m) #:precision 2) (fmt-num c-1m) (fmt-num static-1m))
       "")))

;; The last version of RESULTS.md that also held earlier runs and the optimisation rounds
;; (bench/OPTIMISATIONS.md, included whole until then).
(define history-commit "c223f0c")

;; run-commit : outcome -> string ; " at commit X" when the run recorded its tree's commit
(define (run-commit o)
  (define v (assoc "fastcgi" (outcome-versions o)))
  (if (and v (not (equal? (cdr v) "unknown"))) (format " at commit ~a" (cdr v)) ""))

;; write-results! : path outcome -> path
;; Writes RESULTS.md to file and RESULTS-commands.md beside it; returns the latter's path.
(define (write-results! file o)
  (define targets (evaluate-targets o))
  (define out (open-output-string))
  (define (say . parts) (for ([p (in-list parts)]) (write-string p out)))
  (say "# Benchmark results\n\n"
       (format "Run of `make bench~a` on ~a~a, ~a cores. Each backend is started alone, warmed "
               (if (equal? (outcome-mode o) "quick") "-quick" "") (outcome-date o) (run-commit o)
               (outcome-cores o))
       (format "for ~a s, measured with wrk for ~a s (one wrk thread), then stopped, so that "
               (outcome-warmup o) (outcome-duration o))
       "backends do not compete. "
       (if (> (outcome-rounds o) 1)
           (format (string-append
                    "The hello-world rows are measured in ~a rounds, each round going through "
                    "every backend in turn, and a row shows its median round (its note lists "
                    "every round): the machine is shared, and a backend measured once can land "
                    "in a slow minute that another missed. ")
                   (outcome-rounds o))
           "")
       "Read the "
       "ratios, which compare peers measured through the same nginx in the same run, not the "
       "absolute numbers. Memory is summed over the backend's processes (php-fpm's master "
       "and children; a manager and its workers).\n\n"
       "![hello world, req/s relative to the C responder](results.png)\n\n"
       "## Targets\n\n"
       (table (list "target" "measured" "required" "result")
              (for/list ([t (in-list targets)])
                (list (target-what t) (target-measured t) (target-required t)
                      (case (target-verdict t) [(pass) "PASS"] [(miss) "**MISS**"] [else "not available"]))))
       "\nA MISS is a finding about the server, not a failure of the harness.\n"
       (ceiling-notes o))
  (unless (outcome-workers? o)
    (say "\n`raco fastcgi serve --help` lists no `--workers` in this tree: the rows that need "
         "it are marked not available.\n"))
  (for ([section (list (list "Hello world, 25 connections" (outcome-hello25 o))
                       (list "Hello world, 100 connections" (outcome-hello100 o)))]
        #:unless (null? (cadr section)))
    (say (format "\n## ~a\n\n" (car section))
         "Through nginx (`worker_processes 1`); `GET /` answers `Hello, World!\\n` as "
         "text/plain. Rows of ours without `--workers` run one process (`--single-process` "
         "once the manager exists); all run with `--log-level warning`.\n\n"
         (load-table (cadr section) 'c-unix-keep)))
  (unless (null? (outcome-large o))
    (say "\n## Large responses\n\n"
         "`GET /1m` and `GET /16m`: that many bytes of `x` with a Content-Length, from the "
         "backend through nginx (`fastcgi_max_temp_file_size 0`: streamed through nginx's "
         "memory buffers, and with `fastcgi_buffer_size 64k` and `fastcgi_buffers 16 64k` in "
         "the location of `/1m` and `/16m`, the same for every FastCGI backend of the run; "
         "the hello-world rows keep nginx's default), or nginx serving the same bytes as a static file "
         "(`sendfile on`). The rows marked \"nginx's default buffers\" go through a front "
         "without the two buffer settings (8 buffers of 4 KiB): nginx then reads a 1 MiB "
         "answer in 4 KiB pieces, which bounds any FastCGI backend.\n\n"
         (load-table (outcome-large o) #f "MiB/s"
                     (λ (r) (~r (/ (* (load-rps (row-load r))
                                      (if (regexp-match? #rx"16m$" (symbol->string (row-key r))) 16 1))
                                   1.0)
                                #:precision 0)))))
  (unless (null? (outcome-upload o))
    (say "\n## 100 MiB upload\n\n"
         "`curl -X POST -T` of a 100 MiB file to `/upload` through nginx "
         "(`fastcgi_request_buffering off`: streamed to the backend as it arrives); the "
         "backend reads the body and answers its length. Peak-memory growth is VmHWM after "
         "the uploads minus VmRSS before them (VmHWM reset through /proc/PID/clear_refs "
         "after a 4 MiB warm-up upload).\n\n"
         (table (list "backend" "seconds (each upload)" "MiB/s (best)" "peak memory growth MiB" "note")
                (for/list ([u (in-list (outcome-upload o))])
                  (define secs (upload-row-seconds u))
                  (list (upload-row-label u)
                        (if (null? secs) "-" (string-join (map (λ (s) (~r s #:precision 2)) secs) ", "))
                        (if (null? secs) "-" (~r (/ 100 (apply min secs)) #:precision 0))
                        (fmt-mib (upload-row-growth-kb u))
                        (upload-row-note u))))))
  (unless (null? (outcome-cpu o))
    (say "\n## CPU-bound handler\n\n"
         "`GET /cpu`: about 3 ms of fixnum arithmetic in the handler (bench/apps/bench-raw.rkt), "
         "25 connections.\n\n"
         (load-table (outcome-cpu o) #f)))
  (unless (null? (outcome-relay o))
    (say "\n## Continuations across workers: a passed-on request\n\n"
         "bench/apps/bench-continuation.rkt under `raco fastcgi serve --workers 1`, 25 "
         "connections: wrk requests one continuation URL (made by `GET /`), which the one "
         "worker owns and resumes itself; then, after a reload (SIGHUP), the same URL reaches "
         "the new worker, which passes each request on to the retiring owner over its "
         "private socket and relays the answer (bench/run.rkt, relay-rows). Both rows are "
         "the same process tree measured a few seconds apart.\n\n"
         (load-table (outcome-relay o) 'continuation-direct)
         (relay-note (outcome-relay o))))
  (unless (null? (outcome-many o))
    (say "\n## Many idle keep-alive connections through HAProxy\n\n"
         "HAProxy 2.6 (`fcgi-app` with `option keep-conn`, `http-reuse never`, so each "
         "client connection holds its own FastCGI connection) in front of a hello-world "
         "backend on a unix socket (ours: examples/hello-raw.rkt, one process). "
         "bench/hold-conns.rkt opens the connections, sends one `GET /` on each, reads the "
         "answers, and keeps them open; the backend's RSS is read 2 s later.\n\n"
         (table (list "backend" "connections" "answered" "RSS before MiB" "with them open MiB"
                      "per connection KiB" "sockets before" "with them open" "note")
                (for/list ([m (in-list (outcome-many o))])
                  (list (many-result-label m)
                        (number->string (many-result-conns m))
                        (number->string (many-result-answered m))
                        (fmt-mib (many-result-rss0 m)) (fmt-mib (many-result-rss1 m))
                        (if (many-result-rss1 m)
                            (~r (/ (- (many-result-rss1 m) (many-result-rss0 m)) (many-result-conns m))
                                #:precision 1)
                            "-")
                        (~a (or (many-result-sockets0 m) "-"))
                        (~a (or (many-result-sockets1 m) "-"))
                        (many-result-note m))))))
  (unless (null? (outcome-latency o))
    (say "\n## Latency at a fixed rate\n\n"
         "The closed-loop rows above measure latency at full load, where it is mostly queueing. "
         "Here bench/pace/pace.c sends `GET /` through nginx on 25 keep-alive connections (as many as wrk's) at a "
         "fixed rate, open loop: request k is due at k / rate seconds whatever happened to "
         "the ones before it, and its latency counts from then, so a stall of the backend "
         "shows in full (a closed-loop client stops sending during a stall and never times "
         "the requests it would have sent). Each backend is paced at one rate common to all "
         "(half the lowest peak below, so every backend can sustain it), then at 50% and 90% "
         "of its own peak: the req/s of its row at 25 connections in this run. 1 s of "
         "warm-up, then the measured seconds; a request not answered 200 (or not at all, 5 s "
         "after the last one was due) is an error.\n\n"
         (latency-notes (outcome-latency o))
         (table (list "backend" "rate" "asked req/s" "answered req/s" "p50 ms" "p90 ms" "p99 ms"
                      "p99.9 ms" "max ms" "errors" "note")
                (for/list ([r (in-list (sort-latency (outcome-latency o)))])
                  (define p (pace-row-result r))
                  (append
                   (list (pace-row-label r)
                         (case (pace-row-kind r)
                           [(common) "common"]
                           [(half) "50% of its peak"]
                           [(high) "90% of its peak"]))
                   (if p
                       (list (fmt-num (paced-asked p)) (fmt-num (paced-rate p))
                             (fmt-ms (paced-p50 p)) (fmt-ms (paced-p90 p)) (fmt-ms (paced-p99 p))
                             (fmt-ms (paced-p999 p)) (fmt-ms (paced-max p))
                             (number->string (paced-errors p)))
                       (list "-" "-" "-" "-" "-" "-" "-" "-"))
                   (list (pace-row-note r)))))))
  (when (outcome-memory o)
    (say "\n" (outcome-memory o)))
  (when (outcome-trampoline o)
    (say (outcome-trampoline o)))
  (say "\n## Versions\n\n"
       (string-append* (for/list ([v (in-list (outcome-versions o))])
                         (format "- ~a: ~a\n" (car v) (cdr v))))
       "\nEvery command this run executed, in order, and the configuration files it wrote: "
       "[RESULTS-commands.md](RESULTS-commands.md). What each of the engine's optimisations "
       "bought: [OPTIMISATIONS.md](OPTIMISATIONS.md). Earlier runs are in git history "
       "(`git log -p -- bench/RESULTS.md`); commit " history-commit "'s version is the last "
       "that also held the optimisation rounds and their runs.\n")
  (write-file! file (get-output-string out))
  (define commands-file (let-values ([(dir name dir?) (split-path file)])
                          (build-path dir "RESULTS-commands.md")))
  (write-commands! commands-file o)
  commands-file)

;; write-commands! : path outcome -> void
;; Every command the run executed, in order, and the configuration files it wrote.
(define (write-commands! file o)
  (define out (open-output-string))
  (define (say . parts) (for ([p (in-list parts)]) (write-string p out)))
  (say "# Commands of the benchmark run\n\n"
       (format "The run of `make bench~a` on ~a~a (its figures: [RESULTS.md](RESULTS.md)).\n"
               (if (equal? (outcome-mode o) "quick") "-quick" "") (outcome-date o) (run-commit o))
       "\n## Commands\n\n```\n"
       (string-join (outcome-commands o) "\n")
       "\n```\n")
  (for ([c (in-list (outcome-configs o))])
    (say (format "\n### ~a\n\n```\n~a```\n" (car c) (cdr c))))
  (write-file! file (get-output-string out)))

;; write-file! : path string -> void
(define (write-file! file text)
  (call-with-output-file file #:exists 'truncate
    (λ (port) (write-string text port)))
  (void))

;; sort-latency : (listof pace-row) -> (listof pace-row) ; the common rate first
(define (sort-latency rows)
  (append (filter (λ (r) (eq? (pace-row-kind r) 'common)) rows)
          (filter (λ (r) (not (eq? (pace-row-kind r) 'common))) rows)))

;; latency-notes : (listof pace-row) -> string
;; The common rate, and p99 of ours raw against the C responder's there, when both ran.
(define (latency-notes rows)
  (define (common key)
    (define r (findf (λ (r) (and (eq? (pace-row-key r) key) (eq? (pace-row-kind r) 'common))) rows))
    (and r (pace-row-result r) (zero? (paced-errors (pace-row-result r))) (pace-row-result r)))
  (define c (common 'c-unix-keep))
  (define ours (common 'ours-raw-keep))
  (define any (for/first ([r (in-list rows)] #:when (and (eq? (pace-row-kind r) 'common) (pace-row-result r)))
                (pace-row-result r)))
  (string-append
   (if any (format "The common rate of this run: ~a req/s. " (fmt-num (paced-asked any))) "")
   (if (and c ours (positive? (paced-p99 c)))
       (format "At that rate, p99 of ours raw / the C responder's: ~a (~a ms / ~a ms).\n\n"
               (~r (/ (paced-p99 ours) (paced-p99 c)) #:precision 2)
               (fmt-ms (paced-p99 ours)) (fmt-ms (paced-p99 c)))
       (if any "\n\n" ""))))

;; ---------------------------------------------------------------------------------------
;; The chart.

;; plot-results! : path outcome -> void
;; Horizontal bars, one per hello-world backend, of req/s divided by the C responder's
;; (keep-conn, unix) at the same concurrency: 1.0 is the FastCGI limit on this machine.
(define (plot-results! file o)
  (define (bars rows)
    (define base (rps rows 'c-unix-keep))
    (reverse   ; plot draws the first bar at the bottom; the table's first row goes on top
     (for/list ([r (in-list rows)])
       (define l (and (find-row rows (row-key r)) (row-load r)))
       (vector (row-label r) (if (and l base) (/ (load-rps l) base) 0)))))
  (define sets
    (filter (λ (s) (pair? (cadr s)))
            (list (list "25 connections" (outcome-hello25 o))
                  (list "100 connections" (outcome-hello100 o)))))
  ;; a run without the hello-world rows (BENCH_ONLY=cpu) has nothing to chart: the old
  ;; chart stays
  (unless (null? sets) (plot-sets! file sets bars)))

;; plot-sets! : path (listof (list string rows)) (rows -> (listof vector)) -> void
(define (plot-sets! file sets bars)
  (define n (length sets))
  (define labels (if (null? sets) 0 (length (cadr (car sets)))))
  (define skip (+ n 0.5))
  (parameterize ([plot-font-size 11]
                 [plot-legend-anchor 'bottom-right]
                 [plot-y-ticks no-ticks]
                 [plot-y-far-ticks no-ticks]
                 [plot-x-far-ticks (plot-x-ticks)])
    (plot-file
     (list*
      (vrule 1 #:style 'long-dash #:color "gray" #:label "C responder = 1.0")
      (append*
       ;; within a backend's group, the 25-connection bar above the 100-connection one
       (for/list ([s (in-list sets)] [i (in-naturals)])
         (define data (bars (cadr s)))
         (define x-min (- n 1 i))
         (cons
          (discrete-histogram data #:invert? #t #:skip skip #:x-min x-min
                              #:color (add1 i) #:line-color (add1 i)
                              #:label (car s) #:add-ticks? (zero? i))
          ;; each bar's ratio written at its end (bar j is centred at x-min + j*skip + 1/2)
          (for/list ([d (in-list data)] [j (in-naturals)])
            (point-label (vector (vector-ref d 1) (+ x-min (* j skip) 0.5))
                         (if (positive? (vector-ref d 1)) (~r (vector-ref d 1) #:precision 2) "not measured")
                         #:point-size 0 #:anchor 'left #:size 9))))))
     file 'png
     #:width 1000 #:height (+ 160 (* labels (+ 14 (* n 14))))
     #:title "Hello world through nginx: req/s relative to the C epoll responder"
     #:x-min 0 #:x-max (* 1.12 (max 1 (for*/fold ([m 0]) ([s (in-list sets)] [d (in-list (bars (cadr s)))])
                                          (max m (vector-ref d 1)))))
     #:x-label "× C responder (keep-conn, unix socket)"
     ;; a blank y label widens the left margin, which the bar names otherwise overrun
     #:y-label "   "))
  (void))

(module+ test
  (require racket/file
           rackunit)
  ;; RESULTS.md is the run only: targets against the C responder (php-fpm's ratios as a
  ;; note), the commit, no optimisation history; the commands and configurations go to
  ;; RESULTS-commands.md beside it.
  (define (r key n) (row key (symbol->string key) (load n 1.0 2.0 3.0 1000 0) 1000 1000 ""))
  (define o
    (outcome "2026-11-25T19:26:08" 2 "full" 5 2 3
             (list (r 'c-unix-keep 27658) (r 'php-keep 12775) (r 'ours-raw-keep 20142)
                   (r 'ours-servlet-keep 16471))
             '() '() '() '() '() '() '() "## Memory per process (PSS)\n\n| a | b |\n" #t '("wrk -t1 -c25 URL")
             (list (cons "nginx.conf" "events { worker_connections 7; }\n"))
             (list (cons "fastcgi" "a033f0e") (cons "Racket" "8.7")) #f))
  (define dir (make-temporary-file "report-test-~a" 'directory))
  (define results (build-path dir "RESULTS.md"))
  (define commands (write-results! results o))
  (define text (file->string results))
  (define ctext (file->string commands))
  (check-equal? commands (build-path dir "RESULTS-commands.md"))
  (check-true (regexp-match? #rx"on 2026-11-25T19:26:08 at commit a033f0e, 2 cores" text))
  (check-true (regexp-match? #rx"\\| hello, raw, unix, keep-conn / C responder \\(25 conns\\) \\| 0.73 " text))
  (check-false (regexp-match? #rx"/ php-fpm \\(25 conns\\)" text) "no target against php-fpm")
  (check-true (regexp-match? #rx"ours raw 1.58 x \\(20,142 / 12,775\\)" text))
  (check-true (regexp-match? #rx"the C responder itself 2.17 x \\(27,658 / 12,775\\)" text))
  (check-false (regexp-match? #rx"OPTIMISATIONS.md, included" text))
  (check-true (regexp-match? #rx"\n## Memory per process \\(PSS\\)\n\n\\| a \\| b \\|\n\n## Versions" text))
  (check-false (regexp-match? #rx"## Commands|worker_connections" text))
  (check-true (regexp-match? #rx"\n## Versions\n" text))
  (check-true (regexp-match? #rx"```\nwrk -t1 -c25 URL\n```" ctext))
  (check-true (regexp-match? #rx"### nginx.conf\n\n```\nevents { worker_connections 7; }\n```" ctext))
  (delete-directory/files dir))
