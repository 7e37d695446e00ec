#lang racket/base
;; racket bench/direct/cost.rkt TREE K [SECONDS] : what our raw hello server costs per
;; request, with no front, measured inside the server's own process. TREE holds a compiled
;; fastcgi/ collection (as for direct.sh); K: each connection is replaced after K requests
;; (0: never; 1: every request on a new connection, so the figures are mostly what a
;; connection costs). CONNS (default 8) connections of bench/direct/load.c, pinned to CPU 0
;; with taskset; run this under `taskset -c 1` to keep the two apart. With SERVLET=1 in
;; the environment, the server is examples/hello.rkt's servlet (serve/fastcgi) instead;
;; with SERVLET=FILE, the servlet `start` of that module file;
;; with TCP=PORT, the server listens on 127.0.0.1:PORT instead of a unix socket;
;; with PERF=FILE, perf records where the server's time goes (see below).
;; Printed per request: user and system CPU (/proc/self/stat), the process's CPU and GC
;; time and thread swaps (vector-set-performance-stats!), and bytes allocated
;; (current-memory-use 'cumulative). The load's own CPU is not in these figures.
;; Everything lives in a temporary directory: a unix socket (or loopback TCP), no network.
(require racket/file
         (only-in racket/os getpid)
         racket/port
         racket/runtime-path
         racket/string
         racket/system
         "perf-map.rkt")

(define-runtime-path load-source "load.c")
(define-runtime-path hello-servlet "../../examples/hello.rkt")

(define args (current-command-line-arguments))
(unless (<= 2 (vector-length args) 3)
  (eprintf "usage: racket bench/direct/cost.rkt TREE K [SECONDS]\n")
  (exit 2))
(define tree (path->complete-path (vector-ref args 0)))
(define k (string->number (vector-ref args 1)))
(define seconds (if (= 3 (vector-length args)) (string->number (vector-ref args 2)) 4))
(define conns (or (getenv "CONNS") "8"))
(define servlet? (getenv "SERVLET"))
;; SERVLET=1: examples/hello.rkt; any other value: a module file that provides start
(define servlet-file
  (and servlet? (if (equal? servlet? "1") hello-servlet (path->complete-path servlet?))))

(define dir (make-temporary-file "fcgi-cost-~a" 'directory))
(define load (path->string (build-path dir "load")))
(define tcp-port (getenv "TCP"))
;; where the server listens, and what the load dials
(define sock-path (path->string (build-path dir "s.sock")))
(define listen (if tcp-port (string-append "127.0.0.1:" tcp-port) (string-append "unix:" sock-path)))
(define sock (if tcp-port (string-append "tcp:" tcp-port) sock-path))
(unless (system* (find-executable-path "gcc") "-O2" "-o" load (path->string load-source))
  (error 'cost "cannot compile ~a" load-source))

(define main `(file ,(path->string (build-path tree "fastcgi" "main.rkt"))))
(define answer #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n")
(cond
  [servlet?
   (define serve (dynamic-require main 'serve/fastcgi))
   (void (serve (dynamic-require servlet-file 'start) #:listen listen))]
  [else
   (define serve (dynamic-require main 'serve/fastcgi-raw))
   (define stdout (dynamic-require main 'fastcgi-request-stdout))
   (void (serve (λ (req) (write-bytes answer (stdout req))) #:listen listen))])

;; run-load : natural -> string ; the load's report ("N requests ...")
(define (run-load secs)
  (with-output-to-string
    (λ () (system* (find-executable-path "taskset") "-c" "0" load sock conns
                   (number->string secs) (number->string k)))))

;; cpu-ticks : -> (values natural natural) ; this process's user and system clock ticks
(define (cpu-ticks)
  (define fields (string-split (cadr (regexp-match #rx"\\) (.*)$" (file->string "/proc/self/stat")))))
  (values (string->number (list-ref fields 11)) (string->number (list-ref fields 12))))

(void (run-load 1))                     ; warm-up

;; With PERF=FILE: perf records this process (cpu-clock samples) into FILE while the load
;; runs, with a map that names Racket's code (perf-map.rkt); `perf report -i FILE
;; --sort sym` then shows where the time goes. The sampling costs a little CPU itself.
(define perf-file (getenv "PERF"))
(define perf
  (and perf-file
       (let ([ns-values
              (λ (ns) (for/list ([s (in-list (namespace-mapped-symbols ns))])
                        (namespace-variable-value s #t (λ () #f) ns)))])
         (define roots
           (append
            (ns-values (make-base-namespace))
            (for*/list ([f (in-directory (build-path tree "fastcgi" "private"))]
                        #:when (regexp-match? #rx"[.]rkt$" (path->string f))
                        [m (in-value `(file ,(path->string f)))]
                        #:when (module-declared? m #f)
                        [v (in-list (ns-values (module->namespace m)))])
              v)))
         (collect-garbage)
         (eprintf "perf map: ~a\n" (write-perf-map! (filter procedure? roots)))
         (process* (find-executable-path "perf") "record" "-q" "-e" "cpu-clock" "-F" "5000"
                   "-p" (number->string (getpid)) "-o" perf-file
                   "--" "sleep" (number->string seconds)))))

(define-values (u0 s0) (cpu-ticks))
(define v0 (make-vector 12 0))
(define v1 (make-vector 12 0))
(vector-set-performance-stats! v0 #f)
(define m0 (current-memory-use 'cumulative))
(define out (run-load seconds))
(vector-set-performance-stats! v1 #f)
(define m1 (current-memory-use 'cumulative))
(define-values (u1 s1) (cpu-ticks))
(when perf ((list-ref perf 4) 'wait))
(define n (string->number (car (regexp-match #px"^[0-9]+" out))))
(define (per i) (/ (* 1000.0 (- (vector-ref v1 i) (vector-ref v0 i))) n))
(define (us ticks) (real->decimal-string (/ (* 10000.0 ticks) n) 2))
(printf "~a~a~a K=~a CONNS=~a: ~a req/s, per request: user ~a us, sys ~a us, GC ~a us, ~a swaps, ~a bytes allocated\n"
        (vector-ref args 0) (cond [(not servlet?) ""] [(equal? servlet? "1") " servlet"] [else (format " servlet ~a" servlet?)]) (if tcp-port " TCP" "") k conns (quotient n seconds) (us (- u1 u0)) (us (- s1 s0))
        (real->decimal-string (per 2) 2) (real->decimal-string (/ (per 4) 1000) 2)
        (quotient (- m1 m0) n))
(delete-directory/files dir)
(exit 0)
