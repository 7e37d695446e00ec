#lang racket/base
;; make bench-profile: where our server's time goes on raw hello world (unix socket,
;; keep-conn, behind nginx), written to bench/PROFILE.md:
;;  - system calls per request, from `strace -c -f` attached to the running backend during
;;    a wrk run, for ours (raco fastcgi serve, one process) and for the C responder;
;;  - Racket's sampler (the profile library) over the same server run in this process.
;; BENCH_DURATION (default 5) sets each wrk run's seconds.
(require profile
         racket/date
         racket/file
         racket/list
         racket/port
         racket/string
         "../tests/integration/lib.rkt"
         "configs.rkt"
         "harness.rkt"
         "measure.rkt")

;; strace-table : string -> (listof (list string natural)) ; syscall and calls, most first
(define (strace-table text)
  (define rows
    (for*/list ([line (in-list (string-split text "\n"))]
                [m (in-value (regexp-match
                              #px"^\\s*[0-9.]+\\s+[0-9.]+\\s+[0-9]+\\s+([0-9]+)\\s+(?:[0-9]+\\s+)?([a-z_0-9]+)$"
                              line))]
                #:when (and m (not (equal? (caddr m) "total"))))
      (list (caddr m) (string->number (cadr m)))))
  (sort rows > #:key cadr))

;; cpu-ticks : natural -> (values natural natural) ; user and system clock ticks (1/100 s)
(define (cpu-ticks pid)
  (define stat (file->string (format "/proc/~a/stat" pid)))
  (define fields (string-split (substring stat (cdr (last (regexp-match-positions* #rx"\\)" stat))))))
  (values (string->number (list-ref fields 11)) (string->number (list-ref fields 12))))

;; A backend's figures: requests/s without strace, CPU µs per request (user, system) of the
;; backend and of nginx, the requests of the strace run and its calls per request.
(struct figures (rps user-us sys-us nginx-user-us nginx-sys-us requests calls) #:transparent)

;; profile-backend : path peer port-number natural natural -> figures
;; The backend is warmed; a wrk run measures CPU time per request from /proc/PID/stat;
;; then strace attaches to all its threads for a second wrk run and detaches.
(define (profile-backend dir p port nginx-pid seconds)
  (call-with-peers
   dir (list p)
   (λ (procs)
     (define url (format "http://127.0.0.1:~a/" port))
     (define pid (proc-pid (car procs)))
     (wait-until 30 "the backend to answer" (λ () (answers? port "/" hello-body)))
     (run-wrk url 25 2)
     (define-values (u0 s0) (cpu-ticks pid))
     (define-values (nu0 ns0) (cpu-ticks nginx-pid))
     (log-command! wrk-path (wrk-args url 25 seconds))
     (define plain (run-wrk url 25 seconds))
     (define-values (u1 s1) (cpu-ticks pid))
     (define-values (nu1 ns1) (cpu-ticks nginx-pid))
     (define (us-per-request ticks) (/ (* ticks 10000.0) (load-requests plain)))
     (define out (build-path dir (format "strace-~a.txt" (peer-name p))))
     (define args (list "-c" "-f" "-o" (path->string out) "-p" (number->string pid)))
     (log-command! strace args)
     (define tracer (start-process "strace" strace args #:dir dir))
     (sleep 1)
     (log-command! wrk-path (wrk-args url 25 seconds))
     (define l (run-wrk url 25 seconds))
     (stop-process! tracer)
     (wait-until 10 "strace's summary" (λ () (and (file-exists? out) (regexp-match? #rx"total" (file->string out)))))
     (figures (load-rps plain) (us-per-request (- u1 u0)) (us-per-request (- s1 s0))
              (us-per-request (- nu1 nu0)) (us-per-request (- ns1 ns0))
              (load-requests l)
              (for/list ([r (in-list (strace-table (file->string out)))])
                (list (car r) (/ (cadr r) (load-requests l) 1.0)))))))

;; sampler-profile : path port-number string natural [boolean] -> string
;; Our raw hello handler (or with servlet?, the servlet of examples/hello.rkt) served in
;; this process, sampled every 2 ms while wrk runs.
(define (sampler-profile dir port address seconds [servlet? #f])
  (define handler
    (if servlet?
        (dynamic-require (build-path repo-dir "examples" "hello.rkt") 'start)
        (dynamic-require (build-path repo-dir "examples" "hello-raw.rkt") 'fastcgi-handler)))
  (define serve (dynamic-require 'fastcgi (if servlet? 'serve/fastcgi 'serve/fastcgi-raw)))
  (with-output-to-string
    (λ ()
      (profile-thunk
       (λ ()
         (define stop (serve handler #:listen address))
         (dynamic-wind
          void
          (λ ()
            (define url (format "http://127.0.0.1:~a/" port))
            (wait-until 30 "the in-process server to answer" (λ () (answers? port "/" hello-body)))
            (run-wrk url 25 2)
            (define before (make-vector 12 0))
            (define after (make-vector 12 0))
            (vector-set-performance-stats! before #f)
            (define l (run-wrk url 25 seconds))
            (vector-set-performance-stats! after #f)
            (define (per-request i) (/ (- (vector-ref after i) (vector-ref before i)) (load-requests l) 1.0))
            (printf "wrk -c25 -d~as while sampling: ~a req/s, ~a requests\n" seconds
                    (round (load-rps l)) (load-requests l))
            (printf (string-append "per request: ~a µs of this process's CPU, ~a µs of it in GC, "
                                   "~a Racket thread switches\n\n")
                    (round (* 1000 (per-request 0))) (round (* 1000 (per-request 2)))
                    (real->decimal-string (per-request 4) 2)))
          (λ () (stop #:timeout 1))))
       #:delay 0.002 #:threads #t #:order 'self))))

;; `racket bench/profile.rkt --sampler-only [--servlet]`: only the sampler, printed.
(define (sampler-only servlet? seconds)
  (call-with-temp-dir
   "fcgis"
   (λ (dir)
     (define port (car (free-ports 1)))
     (define addr (format "unix:~a" (build-path dir "ours.sock")))
     (define nginx-proc
       (start-nginx! dir (hash "ours_unix_keep" (front "ours_unix_keep" port 'fastcgi (list addr) #t))))
     (dynamic-wind
      void
      (λ () (display (sampler-profile dir port addr seconds servlet?)))
      (λ () (stop-process! nginx-proc))))))

(module+ main
  (define seconds (let ([v (getenv "BENCH_DURATION")]) (or (and v (string->number v)) 5)))
  (current-features (serve-features))
  (define args (current-command-line-arguments))
  (when (member "--sampler-only" (vector->list args))
    (sampler-only (and (member "--servlet" (vector->list args)) #t) seconds)
    (exit 0))
  (define-values (c-figures ours-figures sampled)
    (call-with-temp-dir
     "fcgip"
     (λ (dir)
       (define responder (path->string (build-c! dir)))
       (define ports (free-ports 2))
       (define c-addr (format "unix:~a" (build-path dir "c.sock")))
       (define ours-addr (format "unix:~a" (build-path dir "ours.sock")))
       (define fronts
         (for/hash ([f (list (front "c_unix_keep" (car ports) 'fastcgi (list c-addr) #t)
                             (front "ours_unix_keep" (cadr ports) 'fastcgi (list ours-addr) #t))])
           (values (front-name f) f)))
       (define nginx-proc (start-nginx! dir fronts))
       (define nginx-pid (proc-pid nginx-proc))
       (dynamic-wind
        void
        (λ ()
          (define c-figures
            (profile-backend dir (peer "c-responder" responder (list c-addr) (list c-addr))
                             (car ports) nginx-pid seconds))
          (define ours-figures
            (profile-backend dir (ours "examples/hello-raw.rkt" ours-addr) (cadr ports) nginx-pid seconds))
          (define sampled (sampler-profile dir (cadr ports) ours-addr seconds))
          (values c-figures ours-figures sampled))
        (λ () (stop-process! nginx-proc))))))
  (define (cpu-line name f)
    (format "| ~a | ~a | ~a | ~a | ~a | ~a |\n" name (round (figures-rps f))
            (round (figures-user-us f)) (round (figures-sys-us f))
            (round (figures-nginx-user-us f)) (round (figures-nginx-sys-us f))))
  (define (per-request-table table)
    (string-append
     "| system call | calls per request |\n| --- | --- |\n"
     (string-append* (for/list ([r (in-list table)] #:when (>= (cadr r) 0.01))
                       (format "| ~a | ~a |\n" (car r) (real->decimal-string (cadr r) 2))))
     (format "| **total** | **~a** |\n" (real->decimal-string (apply + (map cadr table)) 2))))
  (define text
    (string-append
     "# Profile: raw hello world, unix socket, keep-conn, behind nginx\n\n"
     (format "Written by `make bench-profile` on ~a. Load: wrk -t1 -c25 -d~as through nginx.\n\n"
             (parameterize ([date-display-format 'iso-8601]) (date->string (current-date) #t))
             seconds)
     "## CPU time per request\n\n"
     "From /proc/PID/stat (utime, stime; 10 ms ticks) over a wrk run without strace, "
     "divided by the requests completed.\n\n"
     "| backend | req/s | backend user µs | backend system µs | nginx user µs | nginx system µs |\n"
     "| --- | --- | --- | --- | --- | --- |\n"
     (cpu-line "ours raw, one process" ours-figures)
     (cpu-line "C responder" c-figures)
     "\n## System calls per request\n\n"
     "`strace -c -f -p PID`, attached after a warm-up, for the whole wrk run; calls divided by "
     "the requests wrk completed (strace slows the backend, not the count per request). "
     "Calls below 0.01 per request are left out.\n\n"
     (format "### ours (examples/hello-raw.rkt, one process), ~a requests\n\n"
             (figures-requests ours-figures))
     (per-request-table (figures-calls ours-figures))
     (format "\n### C responder, ~a requests\n\n" (figures-requests c-figures))
     (per-request-table (figures-calls c-figures))
     "\n## Racket's sampler\n\n"
     "The same handler served in the profiling process (`serve/fastcgi-raw`), every thread "
     "sampled every 2 ms (`profile-thunk` with `#:threads #t`), nodes ordered by self "
     "time; the sampler's own cost is in the figures. The sampler attributes only the "
     "\"cpu time observed\" below, mostly threads blocked in accept and in this process's "
     "wait for wrk: a handler thread lives for one request, too short to be caught often. "
     "The first line's figures (from `vector-set-performance-stats!`) are the reliable part.\n\n```\n"
     sampled
     "```\n\n## Commands\n\n```\n"
     (string-join (logged-commands) "\n")
     "\n```\n"))
  (define file (build-path bench-dir "PROFILE.md"))
  (call-with-output-file file #:exists 'truncate (λ (o) (void (write-string text o))))
  (say "~a" (car (string-split text "\n## Racket's sampler")))
  (say "wrote ~a" (simplify-path file)))
