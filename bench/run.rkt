#lang racket/base
;; The side-by-side benchmark: `make bench` (racket bench/run.rkt) runs every scenario and
;; `make bench-quick` (racket bench/run.rkt --quick) the hello-world rows only; both write
;; bench/RESULTS.md and bench/results.png. One nginx fronts every backend; each backend is
;; started alone, checked, warmed, measured and stopped. The hello-world rows are measured
;; in BENCH_ROUNDS rounds (default 3, quick 1), each round going through every row once,
;; and a row shows its median round: on a shared machine a peer measured once can land in
;; a slow minute that another peer missed. Knobs: BENCH_DURATION (seconds of each
;; measurement, default 5), BENCH_WARMUP (default 2), BENCH_ROUNDS, and
;; BENCH_ONLY (comma-separated hello-row keys and scenario names, to re-measure a few).
;; Load goes to 127.0.0.1 and unix sockets only; every process dies with the run.
(require json
         racket/cmdline
         racket/date
         racket/file
         racket/format
         racket/future
         racket/list
         racket/string
         racket/system
         "../tests/integration/lib.rkt"
         "configs.rkt"
         "harness.rkt"
         "measure.rkt"
         "memory.rkt"
         "report.rkt")

(define MiB (* 1024 1024))

;; ---------------------------------------------------------------------------------------
;; Settings.

(define quick? (make-parameter #f))

;; env-seconds : string natural -> natural
(define (env-seconds name default)
  (define v (getenv name))
  (define n (and v (string->number v)))
  (cond
    [(not v) default]
    [(exact-positive-integer? n) n]
    [else (error 'bench "~a must be a positive whole number of seconds, not ~s" name v)]))

(define duration (make-parameter 5))
(define warmup (make-parameter 2))
(define rounds (make-parameter 3))

;; only : (or/c #f (listof symbol)) ; BENCH_ONLY, e.g. "c-unix-keep,ours-raw-keep,large"
(define only
  (let ([v (getenv "BENCH_ONLY")])
    (and v (map string->symbol (string-split v ",")))))

;; selected? : symbol -> boolean ; a hello row's key, or large, upload, cpu, many, latency,
;; relay, memory
(define (selected? name)
  (or (not only) (and (memq name only) #t)))

;; A row to measure: its key, its label, the nginx front it goes through, the peers to
;; start (none for nginx alone), the path to request and the body the path must answer
;; (bytes, or a byte regexp; checked before measuring), and #f or why it cannot run.
(struct spec (key label front peers path expected unavailable) #:transparent)

;; measure-spec : path (hash string front) spec (listof natural) -> (listof row)
;; One row per concurrency: started, checked, warmed at the first concurrency, measured
;; at each, its memory read, stopped. A failure becomes the rows' note.
(define (measure-spec dir fronts s concurrencies)
  (define (rows-with note)
    (for/list ([_ (in-list concurrencies)]) (row (spec-key s) (spec-label s) #f #f #f note)))
  (cond
    [(spec-unavailable s)
     (say "~a: ~a" (spec-label s) (spec-unavailable s))
     (rows-with (spec-unavailable s))]
    [else
     (with-handlers ([exn:fail? (λ (e)
                                  (say "~a: FAILED: ~a" (spec-label s) (exn-message e))
                                  (rows-with (format "failed: ~a"
                                                     (string-replace (exn-message e) "\n" " "))))])
       (call-with-peers
        dir (spec-peers s)
        (λ (procs)
          (define port (front-port (hash-ref fronts (spec-front s))))
          (define url (format "http://127.0.0.1:~a~a" port (spec-path s)))
          (wait-until 30 (format "~a to answer ~a" (spec-label s) url)
                      (λ () (answers? port (spec-path s) (spec-expected s))))
          (run-wrk url (car concurrencies) (warmup))
          ;; each load with the backend's CPU per request over it (µs; #f without a backend)
          (define loads+cpu
            (for/list ([c (in-list concurrencies)])
              (log-command! wrk-path (wrk-args url c (duration)))
              (define before (procs-cpu-ticks procs))
              (define l (run-wrk url c (duration)))
              (cons l (cpu-per-request before (procs-cpu-ticks procs) l))))
          (define loads (map car loads+cpu))
          (define died (findf (λ (p) (not (eq? (subprocess-status (proc-subprocess p)) 'running))) procs))
          (define-values (hwm rss) (if died (values #f #f) (backend-memory procs)))
          (say "~a: ~a req/s" (spec-label s)
               (string-join (for/list ([l (in-list loads)]) (~r (load-rps l) #:precision 0)) ", "))
          (when died
            (say "~a: ~a exited during the run; its stderr ends with:\n~a"
                 (spec-label s) (proc-name died) (tail-of (proc-stderr-file died))))
          (for/list ([l+cpu (in-list loads+cpu)])
            (define l (car l+cpu))
            (define cpu (cdr l+cpu))
            (define r
              (row (spec-key s) (spec-label s) l hwm rss
                   (cond
                     [died (format "the backend exited during the run (status ~a): ~a"
                                   (subprocess-status (proc-subprocess died))
                                   (first-line (tail-of (proc-stderr-file died))))]
                     [(positive? (load-errors l)) "answers went wrong: the ratio is not used"]
                     [(zero? (load-requests l)) "no request completed within the run"]
                     [cpu (format "backend CPU ~a µs/request" (fmt-cpu cpu))]
                     [else ""])))
            (when cpu (hash-set! row-cpu r cpu))
            r))))]))

;; The backend's CPU per request (µs) of each measured row, for median-rows' note.
(define row-cpu (make-weak-hasheq))

;; fmt-cpu : real -> string
(define (fmt-cpu us) (~r us #:precision '(= 1)))

;; procs-cpu-ticks : (listof proc) -> (hash natural natural)
;; User plus system clock ticks (1/100 s) of every process of each proc's tree, by pid:
;; a manager's loader and workers count (BENCH.md: the backend's whole process tree).
(define (procs-cpu-ticks procs)
  (for*/hash ([p (in-list procs)]
              [pid (in-list (tree-pids (proc-pid p)))]
              [t (in-value (with-handlers ([exn:fail? (λ (e) #f)])
                             (define stat (file->string (format "/proc/~a/stat" pid)))
                             (define fields (string-split (substring stat (cdr (last (regexp-match-positions* #rx"\\)" stat))))))
                             (+ (string->number (list-ref fields 11)) (string->number (list-ref fields 12)))))]
              #:when t)
    (values pid t)))

;; cpu-per-request : (hash natural natural) (hash natural natural) load -> (or/c real #f)
;; µs of the tree's CPU per completed request between the two readings (a process that
;; appeared meanwhile counts whole; one that exited meanwhile is lost); #f without
;; processes or requests.
(define (cpu-per-request before after l)
  (and (positive? (hash-count after)) (positive? (load-requests l))
       (let ([ticks (for/sum ([(pid t) (in-hash after)]) (- t (hash-ref before pid 0)))])
         (/ (* ticks 10000.0) (load-requests l)))))

;; median-rows : (listof (listof row)) -> (listof row)
;; One spec's rows from each round (a row per concurrency in each) -> a row per
;; concurrency: the round with the median req/s among those measured without error (the
;; lower middle one of an even count), its note saying every round's req/s. A row no
;; round measured is the first round's (its note says why).
(define (median-rows per-round)
  (for/list ([i (in-range (length (car per-round)))])
    (define all (for/list ([rows (in-list per-round)]) (list-ref rows i)))
    (define good (filter measured? all))
    (cond
      [(null? good) (car all)]
      [(null? (cdr all)) (car all)]
      [else
       (define sorted (sort good < #:key (λ (r) (load-rps (row-load r)))))
       (define m (list-ref sorted (quotient (sub1 (length sorted)) 2)))
       (define seen
         (string-join (for/list ([r (in-list all)])
                        (if (memq r good) (~r (load-rps (row-load r)) #:precision 0) "failed"))
                      " / "))
       (define cpus (for/list ([r (in-list all)]) (hash-ref row-cpu r #f)))
       (define cpu-seen
         (if (ormap values cpus)
             (format "; backend CPU ~a µs/request"
                     (string-join (for/list ([c (in-list cpus)]) (if c (fmt-cpu c) "-")) " / "))
             ""))
       (define own (if (hash-ref row-cpu m #f) "" (row-note m)))
       (struct-copy row m
                    [note (string-append
                           (format "median of ~a rounds (~a req/s~a)" (length good) seen cpu-seen)
                           (if (string=? own "") "" (string-append "; " own)))])])))

;; first-line : string -> string ; the first non-empty line, for a table cell
(define (first-line text)
  (define lines (filter (λ (l) (regexp-match? #rx"[^ ]" l)) (string-split text "\n")))
  (string-replace (if (null? lines) "(no stderr)" (car lines)) "|" "/"))

;; ---------------------------------------------------------------------------------------
;; The run's set-up: programs, fronts, peers.

;; build! : path -> void ; the C responder, and the Go peer in a full run
(define (build! dir)
  (build-c! dir)
  (unless (quick?)
    (define go-args (list "build" "-o" (path->string (build-path dir "go-fcgi")) "."))
    (log-command! "cd bench/go-fcgi && GOFLAGS=-mod=mod GOPROXY=off GOCACHE=$TMP/gocache go" go-args)
    (define-values (st out err)
      (parameterize ([current-directory (build-path bench-dir "go-fcgi")])
        (run-program (string->path go) go-args #:timeout 300
                     #:env (list (cons "GOFLAGS" "-mod=mod") (cons "GOPROXY" "off")
                                 (cons "GOCACHE" (path->string (build-path dir "gocache")))
                                 (cons "GOPATH" (path->string (build-path dir "gopath")))))))
    (unless (eqv? st 0) (error 'bench "go build failed:\n~a" err))))

;; write-files! : path -> void ; the static files nginx serves
(define (write-files! dir)
  (make-directory* (build-path dir "static"))
  (for ([name '("1m" "16m")] [n (list MiB (* 16 MiB))])
    (call-with-output-file (build-path dir "static" name)
      (λ (o) (write-bytes (make-bytes n (char->integer #\x)) o)))))

;; version-of : string (listof string) -> string ; the first line a program prints
(define (version-of program args)
  (with-handlers ([exn:fail? (λ (e) "unknown")])
    (define-values (st out err) (run-program (string->path program) args #:timeout 30))
    (define text (string-append (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))
    (string-trim (car (append (filter (λ (l) (regexp-match? #rx"[0-9]" l)) (string-split text "\n"))
                              '("unknown"))))))

;; tree-commit : -> string
;; The commit of the tree measured (git rev-parse --short HEAD), "with uncommitted changes"
;; when a tracked file other than the run's own reports differs from it; "unknown" without
;; git or outside a repository.
(define (tree-commit)
  (with-handlers ([exn:fail? (λ (e) "unknown")])
    (define git (find-executable-path "git"))
    (define root (path->string (simplify-path (build-path bench-dir 'up))))
    (define (git-out . args)
      (define-values (st out err) (run-program git (list* "-C" root args) #:timeout 30))
      (and (zero? st) (string-trim (bytes->string/utf-8 out #\?))))
    (define head (git-out "rev-parse" "--short" "HEAD"))
    (define changes (git-out "status" "--porcelain" "--untracked-files=no" "--" "."
                             ":(exclude)bench/RESULTS.md" ":(exclude)bench/RESULTS-commands.md"
                             ":(exclude)bench/results.png"))
    (cond [(not head) "unknown"]
          [(and changes (positive? (string-length changes)))
           (string-append head " with uncommitted changes")]
          [else head])))

;; versions : -> (listof (cons string string)) ; of the tree and the programs a run used
(define (versions)
  (list (cons "fastcgi" (tree-commit))
        (cons "kernel" (version-of "/bin/uname" '("-sr")))
        (cons "Racket" (version))
        (cons "nginx" (version-of nginx '("-v")))
        (cons "wrk" (version-of wrk-path '("-v")))
        (cons "php-fpm" (version-of php-fpm '("-v")))
        (cons "Go" (if (quick?) "not used" (version-of go '("version"))))
        (cons "HAProxy" (if (quick?) "not used" (version-of haproxy '("-v"))))
        (cons "gcc" (version-of gcc '("--version")))))

;; The addresses of the run: the backends' sockets live in dir.
(struct addrs (c-unix c-tcp php go naive ours ours2 ours-tcp ws-port) #:transparent)

;; make-fronts : addrs path (listof port-number) -> (hash string front)
(define (make-fronts a dir ports)
  (define ws (format "127.0.0.1:~a" (addrs-ws-port a)))
  (define fronts
    (for/list ([f (in-list
                   `(("ceiling" return #f #f)
                     ("static" static ,(path->string (build-path dir "static")) #f)
                     ("c_unix_keep" fastcgi (,(addrs-c-unix a)) #t)
                     ("c_unix_close" fastcgi (,(addrs-c-unix a)) #f)
                     ("c_tcp_keep" fastcgi (,(addrs-c-tcp a)) #t)
                     ("c_tcp_close" fastcgi (,(addrs-c-tcp a)) #f)
                     ("php_keep" fastcgi (,(addrs-php a)) #t)
                     ("php_close" fastcgi (,(addrs-php a)) #f)
                     ("go_keep" fastcgi (,(addrs-go a)) #t)
                     ("naive_close" fastcgi (,(addrs-naive a)) #f)
                     ("ours_unix_keep" fastcgi (,(addrs-ours a)) #t)
                     ("ours_unix_close" fastcgi (,(addrs-ours a)) #f)
                     ("ours_tcp_keep" fastcgi (,(addrs-ours-tcp a)) #t)
                     ("ours_tcp_close" fastcgi (,(addrs-ours-tcp a)) #f)
                     ("ours_pair_keep" fastcgi (,(addrs-ours a) ,(addrs-ours2 a)) #t)
                     ("web_server" proxy (,ws) #t)
                     ("c_unix_keep_small" fastcgi-small (,(addrs-c-unix a)) #t)
                     ("ours_unix_keep_small" fastcgi-small (,(addrs-ours a)) #t)))]
               [port (in-list ports)])
      (front (car f) port (cadr f) (caddr f) (cadddr f))))
  (for/hash ([f (in-list fronts)]) (values (front-name f) f)))

(define hello-raw "examples/hello-raw.rkt")
(define hello-servlet "examples/hello.rkt")
(define bench-raw "bench/apps/bench-raw.rkt")
(define bench-continuation "bench/apps/bench-continuation.rkt")

;; hello-specs : path addrs -> (listof spec) ; the rows this run measures
(define (hello-specs dir a)
  (filter (λ (s) (and (selected? (spec-key s))
                      (or (not (quick?))
                          (memq (spec-key s) '(ceiling c-unix-keep c-unix-close php-keep ours-raw-keep
                                               ours-raw-close ours-servlet-keep)))))
          (all-hello-specs dir a)))

;; all-hello-specs : path addrs -> (listof spec)
(define (all-hello-specs dir a)
  (define workers? (features-workers? (current-features)))
  (define php (php-peer dir (addrs-php a)))
  (define no-workers (and (not workers?) "not available: raco fastcgi serve has no --workers yet"))
  (define (hello key label front peers [unavailable #f])
    (spec key label front peers "/" hello-body unavailable))
  (define all
    (list
     (hello 'ceiling "nginx return 200 (no backend)" "ceiling" '())
     (hello 'c-unix-keep "C responder, unix, keep-conn" "c_unix_keep" (list (c-peer dir (addrs-c-unix a))))
     (hello 'c-unix-close "C responder, unix, keep-conn off" "c_unix_close" (list (c-peer dir (addrs-c-unix a))))
     (hello 'c-tcp-keep "C responder, TCP, keep-conn" "c_tcp_keep" (list (c-peer dir (addrs-c-tcp a))))
     (hello 'c-tcp-close "C responder, TCP, keep-conn off" "c_tcp_close" (list (c-peer dir (addrs-c-tcp a))))
     (hello 'php-keep "php-fpm static 4, unix, keep-conn" "php_keep" (list php))
     (hello 'php-close "php-fpm static 4, unix, keep-conn off" "php_close" (list php))
     (hello 'go-keep "Go net/http/fcgi, unix, keep-conn" "go_keep"
            (list (peer "go-fcgi" (path->string (build-path dir "go-fcgi"))
                        (list (strip-unix (addrs-go a))) (list (addrs-go a)))))
     (hello 'web-server "Racket web-server via proxy_pass" "web_server"
            (list (peer "web-server" racket
                        (list (path->string (build-path bench-dir "web-server-hello.rkt"))
                              (number->string (addrs-ws-port a)))
                        (list (format "127.0.0.1:~a" (addrs-ws-port a))))))
     (hello 'naive "naive Racket: thread per connection, one request each" "naive_close"
            (list (peer "naive" racket
                        (list (path->string (build-path bench-dir "naive.rkt")) (addrs-naive a))
                        (list (addrs-naive a)))))
     (hello 'ours-raw-keep "ours raw, unix, keep-conn" "ours_unix_keep" (list (ours hello-raw (addrs-ours a))))
     (hello 'ours-raw-close "ours raw, unix, keep-conn off" "ours_unix_close" (list (ours hello-raw (addrs-ours a))))
     (hello 'ours-raw-tcp-keep "ours raw, TCP, keep-conn" "ours_tcp_keep" (list (ours hello-raw (addrs-ours-tcp a))))
     (hello 'ours-raw-tcp-close "ours raw, TCP, keep-conn off" "ours_tcp_close" (list (ours hello-raw (addrs-ours-tcp a))))
     (hello 'ours-servlet-keep "ours servlet, unix, keep-conn" "ours_unix_keep" (list (ours hello-servlet (addrs-ours a))))
     (hello 'ours-servlet-close "ours servlet, unix, keep-conn off" "ours_unix_close" (list (ours hello-servlet (addrs-ours a))))
     (if (features-access-log? (current-features))
         (hello 'ours-raw-access-log "ours raw, unix, keep-conn, --access-log to a file" "ours_unix_keep"
                (list (ours hello-raw (addrs-ours a)
                            (list "--access-log" (path->string (build-path dir "access.log"))))))
         (hello 'ours-raw-access-log "ours raw, unix, keep-conn, default log level" "ours_unix_keep"
                (list (peer "ours" raco (list "fastcgi" "serve" "--listen" (addrs-ours a)
                                              (path->string (simplify-path (build-path repo-dir hello-raw))))
                            (list (addrs-ours a))))))
     (hello 'ours-raw-workers-1 "ours raw, unix, keep-conn, --workers 1" "ours_unix_keep"
            (list (ours hello-raw (addrs-ours a) '("--workers" "1"))) no-workers)
     (hello 'ours-raw-workers-2 "ours raw, unix, keep-conn, --workers 2" "ours_unix_keep"
            (list (ours hello-raw (addrs-ours a) '("--workers" "2"))) no-workers)
     ;; preload (the default: a loader loads the app once and forks the workers) and its
     ;; twin without, side by side in each round
     (hello 'ours-servlet-workers-2 "ours servlet, unix, keep-conn, --workers 2 (preload)" "ours_unix_keep"
            (list (ours hello-servlet (addrs-ours a) '("--workers" "2"))) no-workers)
     (hello 'ours-servlet-workers-2-no-preload "ours servlet, unix, keep-conn, --workers 2 --no-preload" "ours_unix_keep"
            (list (ours hello-servlet (addrs-ours a) '("--workers" "2" "--no-preload")))
            (or no-workers (and (not (no-preload-option?)) "not available: raco fastcgi serve has no --no-preload")))))
  all)

;; ---------------------------------------------------------------------------------------
;; Scenarios beyond hello world.

;; large-rows : path (hash string front) addrs -> (listof row)
(define (large-rows dir fronts a)
  (define raw-peers (list (ours bench-raw (addrs-ours a))))
  (define c-peers (list (c-peer dir (addrs-c-unix a))))
  (append
   (append*
    (for*/list ([who (list (list "nginx static file" "static" '() 'static)
                          (list "C responder, unix, keep-conn" "c_unix_keep" c-peers 'c)
                          (list "ours raw, unix, keep-conn" "ours_unix_keep" raw-peers 'ours))]
               [size (list 1 16)])
     (define key (string->symbol (format "~a-~am" (cadddr who) size)))
     (measure-spec dir fronts
                   (spec key (format "~a, ~a MiB" (car who) size) (cadr who) (caddr who)
                         (format "/~am" size) (make-bytes (* size MiB) (char->integer #\x)) #f)
                   '(25))))
   ;; the same 1 MiB through nginx's default FastCGI buffers (configs.rkt)
   (append* (for/list ([who (list (list "C responder, unix, keep-conn, nginx's default buffers" "c_unix_keep_small" c-peers 'c)
                         (list "ours raw, unix, keep-conn, nginx's default buffers" "ours_unix_keep_small" raw-peers 'ours))])
     (measure-spec dir fronts
                   (spec (string->symbol (format "~a-1m-small" (cadddr who)))
                         (format "~a, 1 MiB" (car who)) (cadr who) (caddr who)
                         "/1m" (make-bytes MiB (char->integer #\x)) #f)
                   '(25))))))

;; upload-once : port-number path -> real ; seconds for one upload, its answer checked
(define (upload-once port file size)
  (define args (list "-sS" "-X" "POST" "-T" (path->string file) "-H" "Expect:"
                     "-H" "Content-Type: application/octet-stream"
                     "-w" "\n%{http_code} %{time_total}\n"
                     (format "http://127.0.0.1:~a/upload" port)))
  (define-values (st out err) (run-program (string->path curl) args #:timeout 120))
  (define text (bytes->string/utf-8 out #\?))
  (define m (regexp-match #rx"length=([0-9]+)\n\n200 ([0-9.]+)\n$" text))
  (unless (and (eqv? st 0) m (= (string->number (cadr m)) size))
    (error 'bench "upload of ~a bytes: curl said ~s ~s" size text err))
  (string->number (caddr m)))

;; upload-rows : path (hash string front) addrs -> (listof upload-row)
(define (upload-rows dir fronts a)
  (define big (build-path dir "upload-100m.bin"))
  (define small (build-path dir "upload-4m.bin"))
  (call-with-output-file big (λ (o) (for ([_ (in-range 100)]) (write-bytes (make-bytes MiB 97) o))))
  (call-with-output-file small (λ (o) (write-bytes (make-bytes (* 4 MiB) 97) o)))
  (begin0
    (for/list ([who (list (list 'c "C responder, unix, keep-conn" "c_unix_keep"
                                (list (c-peer dir (addrs-c-unix a))))
                          (list 'ours "ours raw, unix, keep-conn (--max-body 200m)" "ours_unix_keep"
                                (list (ours bench-raw (addrs-ours a) '("--max-body" "200m")))))])
      (define port (front-port (hash-ref fronts (caddr who))))
      (with-handlers ([exn:fail? (λ (e)
                                   (say "~a upload: FAILED: ~a" (cadr who) (exn-message e))
                                   (upload-row (car who) (cadr who) '() #f
                                               (format "failed: ~a" (string-replace (exn-message e) "\n" " "))))])
        (call-with-peers
         dir (cadddr who)
         (λ (procs)
           (wait-until 30 (format "~a to answer" (cadr who)) (λ () (answers? port "/" hello-body)))
           (upload-once port small (* 4 MiB))
           (define pid (proc-pid (car procs)))
           (define-values (hwm0 rss0) (tree-memory-kb pid))
           (reset-tree-peaks! pid)
           (log-command! curl (list "-sS" "-X" "POST" "-T" "upload-100m.bin" "-H" "Expect:"
                                    (format "http://127.0.0.1:~a/upload" port)))
           (define secs (for/list ([_ (in-range 3)]) (upload-once port big (* 100 MiB))))
           (define-values (hwm1 rss1) (tree-memory-kb pid))
           (say "~a upload: ~a s, peak growth ~a KiB" (cadr who) secs (- hwm1 rss0))
           (upload-row (car who) (cadr who) secs (- hwm1 rss0) "")))))
    (delete-file big)
    (delete-file small)))

;; cpu-specs : addrs boolean -> (listof spec)
(define (cpu-specs a)
  (define workers? (features-workers? (current-features)))
  (define no-workers (and (not workers?) "not available: raco fastcgi serve has no --workers yet"))
  (define expected #rx#"^work=[0-9]+\n$")
  (list
   (spec 'single "ours raw, one process (no manager)" "ours_unix_keep"
         (list (ours bench-raw (addrs-ours a))) "/cpu" expected #f)
   (spec 'workers-1 "ours raw, --workers 1" "ours_unix_keep"
         (list (ours bench-raw (addrs-ours a) '("--workers" "1"))) "/cpu" expected no-workers)
   (spec 'workers-2 "ours raw, --workers 2" "ours_unix_keep"
         (list (ours bench-raw (addrs-ours a) '("--workers" "2"))) "/cpu" expected no-workers)
   (spec 'pair "two single processes, nginx round robin (no manager)" "ours_pair_keep"
         (list (ours bench-raw (addrs-ours a)) (ours bench-raw (addrs-ours2 a))) "/cpu" expected #f)))

;; many-connections : path addrs natural symbol string peer -> many-result
;; HAProxy in front of backend; conns idle keep-alive clients; the backend's memory and
;; sockets before and with them open.
(define (many-connections dir a conns key label backend)
  (define hport (car (free-ports 1)))
  (define conf (build-path dir "haproxy.cfg"))
  (define address (car (peer-addresses backend)))
  (call-with-output-file conf #:exists 'truncate
    (λ (o) (write-string (haproxy-conf hport (strip-unix address) (path->string dir)) o)))
  (define (result answered rss0 rss1 sockets0 sockets1 note)
    (many-result key label conns answered rss0 rss1 sockets0 sockets1 note))
  (with-handlers ([exn:fail? (λ (e)
                               (say "~a, many connections: FAILED: ~a" label (exn-message e))
                               (result 0 #f #f #f #f
                                       (format "failed: ~a" (string-replace (exn-message e) "\n" " "))))])
    (call-with-peers
     dir (list backend
               (peer "haproxy" haproxy (list "-f" (path->string conf) "-db")
                     (list (format "127.0.0.1:~a" hport))))
     (λ (procs)
       (define pid (proc-pid (car procs)))
       (wait-until 30 "HAProxy to answer" (λ () (answers? hport "/" hello-body)))
       (for ([_ (in-range 50)]) (answers? hport "/" hello-body))
       (sleep 1)
       (define-values (hwm0 rss0) (tree-memory-kb pid))
       (define sockets0 (tree-socket-count pid))
       (define args (list (path->string (build-path bench-dir "hold-conns.rkt"))
                          (number->string hport) (number->string conns) "120"))
       (log-command! racket args)
       (call-with-process
        "hold-conns" (string->path racket) args #:dir dir #:stdout-pipe? #t
        (λ (holder)
          (define line (read-line/timeout (proc-stdout holder) 90 "hold-conns to open its connections"))
          (define answered (string->number (cadr (regexp-match #rx"^ready ([0-9]+)$" line))))
          (sleep 2)
          (define-values (hwm1 rss1) (tree-memory-kb pid))
          (define sockets1 (tree-socket-count pid))
          (say "~a, many connections: ~a answered, RSS ~a -> ~a KiB, sockets ~a -> ~a"
               label answered rss0 rss1 sockets0 sockets1)
          (result answered rss0 rss1 sockets0 sockets1
                  (cond
                    [(not (= answered conns)) "not every connection was answered"]
                    ;; RSS moves in the heap's steps: a process with room to spare shows
                    ;; none of what its connections take
                    [(< (- rss1 rss0) conns)
                     "RSS grew less than 1 KiB a connection: they fit in memory the process already held"]
                    [else ""]))))))))

;; relay-rows : path (hash string front) addrs -> (listof row)
;; A continuation URL resumed by its owner, then passed on to it: `--workers 1` serving
;; bench-continuation.rkt; wrk on the URL `GET /` made (the one worker owns it); then a
;; reload, after which the new worker passes the URL's requests on to the retiring owner.
(define (relay-rows dir fronts a)
  (define label-direct "ours servlet, continuation URL resumed by its owner (--workers 1)")
  (define label-relayed "ours servlet, the same URL after a reload: passed on to the retiring owner")
  (define port (front-port (hash-ref fronts "ours_unix_keep")))
  (define (measure key label url)
    (run-wrk url 25 (warmup))
    (log-command! wrk-path (wrk-args url 25 (duration)))
    (define l (run-wrk url 25 (duration)))
    (say "~a: ~a req/s" label (~r (load-rps l) #:precision 0))
    (row key label l #f #f (if (positive? (load-errors l)) "answers went wrong: the ratio is not used" "")))
  (with-handlers ([exn:fail? (λ (e)
                               (say "continuations across workers: FAILED: ~a" (exn-message e))
                               (for/list ([k '(continuation-direct continuation-relayed)]
                                          [label (list label-direct label-relayed)])
                                 (row k label #f #f #f (format "failed: ~a" (string-replace (exn-message e) "\n" " ")))))])
    (call-with-peers
     dir (list (ours bench-continuation (addrs-ours a) (list "--workers" "1" "--status-path" "/status")))
     (λ (procs)
       (define (status)
         (with-handlers ([exn:fail? (λ (e) #f)])
           (bytes->jsexpr (http-response-body (http-request port "/status?json" #:timeout 10)))))
       (define (get-url)
         (define r (http-request port "/" #:timeout 10))
         (and (= (http-response-status r) 200) (regexp-match? #rx#"^/" (http-response-body r))
              (bytes->string/utf-8 (http-response-body r))))
       (define path (let loop ([n 0])
                      (or (with-handlers ([exn:fail? (λ (e) #f)]) (get-url))
                          (if (< n 300) (begin (sleep 0.1) (loop (add1 n))) (error 'bench "no continuation URL from GET /")))))
       (define url (format "http://127.0.0.1:~a~a" port path))
       (wait-until 30 "the continuation to answer" (λ () (answers? port path hello-body)))
       (define direct (measure 'continuation-direct label-direct url))
       ;; the peer is the manager (raco runs it in its own process)
       (log-command! "kill" (list "-HUP" "MANAGER-PID"))
       (unless (system* "/bin/kill" "-HUP" (number->string (proc-pid (car procs))))
         (error 'bench "kill -HUP of the manager failed"))
       (wait-until 60 "the reload, with the old worker retiring and holding the session"
                   (λ ()
                     (define s (status))
                     (and s (= (hash-ref s 'generation 0) 2)
                          (for/or ([w (in-list (hash-ref s 'workers '()))])
                            (and (equal? (hash-ref w 'state #f) "draining") (positive? (hash-ref w 'sessions 0)))))))
       (wait-until 30 "the passed-on continuation to answer" (λ () (answers? port path hello-body)))
       (list direct (measure 'continuation-relayed label-relayed url))))))

;; latency-keys : the backends of the latency scenario, by their hello-world row
(define latency-keys '(c-unix-keep php-keep ours-raw-keep ours-servlet-keep))

;; latency-rows : path (hash string front) addrs (listof row) path -> (listof pace-row)
;; BENCH.md's tail latency below the peak: each backend paced open loop (pace.c) at the
;; run's common rate, half the lowest peak, then at 50% and 90% of its own peak. A peak is
;; the req/s of the backend's hello row at 25 connections in this run; a backend whose row
;; was not measured (BENCH_ONLY) gets its peak from a wrk run here first.
(define (latency-rows dir fronts a hello25 pace-exe)
  (define specs (filter (λ (s) (memq (spec-key s) latency-keys)) (all-hello-specs dir a)))
  (define (url-port s) (front-port (hash-ref fronts (spec-front s))))
  (define peaks
    (for/list ([s (in-list specs)])
      (or (rps hello25 (spec-key s))
          (with-handlers ([exn:fail? (λ (e) (say "~a, peak: FAILED: ~a" (spec-label s) (exn-message e)) #f)])
            (call-with-peers
             dir (spec-peers s)
             (λ (procs)
               (wait-until 30 (format "~a to answer" (spec-label s))
                           (λ () (answers? (url-port s) "/" hello-body)))
               (define url (format "http://127.0.0.1:~a/" (url-port s)))
               (run-wrk url 25 (warmup))
               (log-command! wrk-path (wrk-args url 25 (duration)))
               (define l (run-wrk url 25 (duration)))
               (and (zero? (load-errors l)) (load-rps l))))))))
  (define known (filter values peaks))
  (define common (and (pair? known) (inexact->exact (round (* 0.5 (apply min known))))))
  (append*
   (for/list ([s (in-list specs)] [peak (in-list peaks)])
     (define kinds
       (filter values
               (list (and common (cons 'common common))
                     (and peak (cons 'half (inexact->exact (round (* 0.5 peak)))))
                     (and peak (cons 'high (inexact->exact (round (* 0.9 peak))))))))
     (define (rows-with note)
       (for/list ([k (in-list (if (null? kinds) '((half . 0)) kinds))])
         (pace-row (spec-key s) (spec-label s) peak (car k) #f note)))
     (cond
       [(null? kinds) (rows-with "no peak measured")]
       [else
        (with-handlers ([exn:fail? (λ (e)
                                     (say "~a, latency: FAILED: ~a" (spec-label s) (exn-message e))
                                     (rows-with (format "failed: ~a" (string-replace (exn-message e) "\n" " "))))])
          (call-with-peers
           dir (spec-peers s)
           (λ (procs)
             (define port (url-port s))
             (wait-until 30 (format "~a to answer" (spec-label s)) (λ () (answers? port "/" hello-body)))
             (run-wrk (format "http://127.0.0.1:~a/" port) 25 (warmup))
             (for/list ([k (in-list kinds)])
               (log-command! (path->string pace-exe) (pace-args port "/" (cdr k) (duration) 1))
               (define p (run-pace pace-exe port "/" (cdr k) (duration) 1))
               (say "~a at ~a req/s: p50 ~a p99 ~a max ~a ms, ~a errors"
                    (spec-label s) (cdr k) (paced-p50 p) (paced-p99 p) (paced-max p) (paced-errors p))
               (pace-row (spec-key s) (spec-label s) peak (car k) p
                         (cond
                           [(positive? (paced-errors p)) "some requests went wrong"]
                           [(< (paced-rate p) (* 0.98 (cdr k))) "the rate asked was not sustained"]
                           [else ""]))))))]))))

;; ---------------------------------------------------------------------------------------
;; The run.

;; no-preload-option? : whether `raco fastcgi serve --help` lists --no-preload
(define no-preload-option? (make-parameter #f))

;; serve-has-option? : string -> boolean
(define (serve-has-option? option)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define-values (st out err)
      (run-program (string->path raco) '("fastcgi" "serve" "--help") #:timeout 60))
    (and (eqv? st 0) (regexp-match? (regexp (regexp-quote option)) out))))

;; run! : -> outcome
(define (run!)
  (for ([prog+pkg (append (list (cons nginx "nginx") (cons wrk-path "wrk") (cons gcc "gcc")
                                (cons php-fpm "php8.2-fpm"))
                          (if (quick?)
                              '()
                              (list (cons go "golang-go") (cons haproxy "haproxy") (cons curl "curl"))))])
    (require-program! (car prog+pkg) (cdr prog+pkg)))
  (current-features (serve-features))
  (no-preload-option? (serve-has-option? "--no-preload"))
  (call-with-temp-dir
   "fcgib"
   (λ (dir)
     (build! dir)
     (define pace-exe (build-pace! dir))
     (write-files! dir)
     (define ports (free-ports 21))
     (define a (addrs (format "unix:~a" (build-path dir "c.sock"))
                      (format "127.0.0.1:~a" (list-ref ports 18))
                      (format "unix:~a" (build-path dir "php.sock"))
                      (format "unix:~a" (build-path dir "go.sock"))
                      (format "unix:~a" (build-path dir "naive.sock"))
                      (format "unix:~a" (build-path dir "ours.sock"))
                      (format "unix:~a" (build-path dir "ours2.sock"))
                      (format "127.0.0.1:~a" (list-ref ports 19))
                      (list-ref ports 20)))
     (define fronts (make-fronts a dir (take ports 18)))
     (define php-conf (write-php-files! dir (strip-unix (addrs-php a))))
     (define nginx-proc (start-nginx! dir fronts))
     (dynamic-wind
      void
      (λ ()
        (define concurrencies (if (quick?) '(25) '(25 100)))
        (define specs (hello-specs dir a))
        (define by-round
          (for/list ([k (in-range (rounds))])
            (when (> (rounds) 1) (say "hello world, round ~a of ~a" (add1 k) (rounds)))
            (for/list ([s (in-list specs)])
              (measure-spec dir fronts s concurrencies))))
        (define hello
          (for/list ([i (in-range (length specs))])
            (median-rows (for/list ([rows (in-list by-round)]) (list-ref rows i)))))
        (define (at i) (for/list ([rows (in-list hello)] #:when (> (length rows) i)) (list-ref rows i)))
        (define (scenario? name) (and (not (quick?)) (selected? name)))
        (define large (if (scenario? 'large) (large-rows dir fronts a) '()))
        (define upload (if (scenario? 'upload) (upload-rows dir fronts a) '()))
        (define cpu (if (not (scenario? 'cpu))
                        '()
                        (append* (for/list ([s (in-list (cpu-specs a))])
                                   (measure-spec dir fronts s '(25))))))
        (define many
          (if (scenario? 'many)
              (list (many-connections dir a 1000 'c "C responder" (c-peer dir (addrs-c-unix a)))
                    (many-connections dir a 1000 'ours "ours raw, one process" (ours hello-raw (addrs-ours a))))
              '()))
        (define latency (if (scenario? 'latency) (latency-rows dir fronts a (at 0) pace-exe) '()))
        (define relay (if (scenario? 'relay) (relay-rows dir fronts a) '()))
        (define memory (and (scenario? 'memory)
                            (memory-markdown (memory-rows dir #:c-address (addrs-c-unix a)
                                                          #:php-address (addrs-php a)
                                                          #:ours-address (addrs-ours a)))))
        ;; the results of the benchmarks run on their own, included verbatim
        (define included
          (for/list ([name (in-list '("trampoline-results.md" "canary-results.md" "side-by-side-results.md"))]
                     #:when (file-exists? (build-path bench-dir name)))
            (format "\n<!-- bench/~a, included verbatim -->\n\n~a\n" name (file->string (build-path bench-dir name)))))
        (outcome (parameterize ([date-display-format 'iso-8601]) (date->string (current-date) #t))
                 (processor-count) (if (quick?) "quick" "full") (duration) (warmup) (rounds)
                 (at 0) (at 1) large upload cpu many latency relay memory
                 (features-workers? (current-features)) (logged-commands)
                 (append
                  (list (cons "nginx.conf" (file->string (build-path dir "nginx.conf")))
                        (cons "php-fpm.conf" php-conf))
                  (if (file-exists? (build-path dir "haproxy.cfg"))
                      (list (cons "haproxy.cfg" (file->string (build-path dir "haproxy.cfg"))))
                      '()))
                 (versions)
                 (and (pair? included) (apply string-append included))))
      (λ () (stop-process! nginx-proc))))))

(module+ main
  (command-line
   #:once-each
   [("--quick") "hello world at 25 connections only: C responder, php-fpm, ours (under 2 minutes)"
                (quick? #t)])
  (duration (env-seconds "BENCH_DURATION" 5))
  (warmup (env-seconds "BENCH_WARMUP" 2))
  (rounds (env-seconds "BENCH_ROUNDS" (if (quick?) 1 3)))
  (define started (current-inexact-milliseconds))
  (define o (run!))
  (define results (build-path bench-dir "RESULTS.md"))
  (define chart (build-path bench-dir "results.png"))
  (define commands (write-results! results o))
  (plot-results! chart o)
  (define text (file->string results))
  (say "\n~a" (car (string-split text "\n## Versions")))
  (say "wrote ~a, ~a and ~a in ~a s" (simplify-path results) (simplify-path commands)
       (simplify-path chart) (round (/ (- (current-inexact-milliseconds) started) 1000))))
