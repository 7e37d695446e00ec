#lang racket/base
;; A/B measurement of engine changes (bench/OPTIMISATIONS.md): the same hello-world
;; handler served by two or more copies of the `fastcgi` collection, behind one nginx,
;; measured in alternation so that a noisy machine hurts every variant alike.
;;
;;   racket bench/ab.rkt [--servlet] [--close] [--tcp] [--big] [--rounds N] [--seconds S] [--connections N] [--strace] \
;;                       [--churn] [--perf DIR] [--idle N] [--tree-cpu] NAME=TREE ...
;;
;; TREE is a directory holding a `fastcgi/` collection (e.g. a copy of the tree before a
;; change, and /work/main), `c` for the C responder (bench/c-responder, hello only), or
;; a FILE.rkt run as `racket FILE.rkt ADDRESS` (a stand-alone backend, e.g. an
;; experiment). NAME=TREE@SERVLET.rkt: TREE's serve/fastcgi serving the `start` of that
;; module file (a servlet variant beside the others, with or without --servlet).
;; --tcp: the backends listen on 127.0.0.1 ports instead of unix sockets.
;; --big: the raw handler answers 1 MiB (with a Content-Length, an immutable string built
;; once) instead of hello. Each round measures every variant in
;; turn, the others stopped (SIGSTOP) meanwhile: wrk warms it for 1 s, then measures S
;; seconds (-t1 -c25, or --connections), while the backend's user and system CPU is
;; read from /proc/PID/stat, and so are nginx's (one worker) and how busy the machine's
;; CPUs were (/proc/stat). With --strace, a last run per variant counts system calls
;; per request with `strace -c -f`; with --churn, each measurement also gives the share of
;; requests that came on a new connection (perf stat counting accept4); with --perf DIR, one per variant records where the
;; backend's time goes (perf, named by direct/perf-map.rkt) into DIR/NAME.data. With --idle N, each variant instead gets N connections
;; straight on its unix socket, each carrying one keep-conn request and then left open:
;; the backend's RSS growth per connection is printed. Everything runs under /tmp and on loopback or unix
;; sockets; every wrk run is bounded in time.
(require racket/cmdline
         racket/file
         racket/runtime-path
         racket/system
         racket/format
         racket/list
         racket/port
         racket/string
         racket/unix-socket
         "../fastcgi/private/protocol/protocol.rkt"
         "../tests/integration/lib.rkt"
         "configs.rkt"
         "harness.rkt"
         "measure.rkt")

;; cpu-ticks : natural -> (values natural natural) ; user and system clock ticks (1/100 s)
(define (cpu-ticks pid)
  (define stat (file->string (format "/proc/~a/stat" pid)))
  (define fields (string-split (substring stat (cdr (last (regexp-match-positions* #rx"\\)" stat))))))
  (values (string->number (list-ref fields 11)) (string->number (list-ref fields 12))))

;; backend-ticks : natural -> (values natural natural) ; cpu-ticks, with --tree-cpu summed
;; over the process and its live descendants (a pool's workers)
(define tree-cpu? (box #f))
(define (backend-ticks pid)
  (for/fold ([u 0] [s 0]) ([p (in-list (if (unbox tree-cpu?) (tree-pids pid) (list pid)))])
    (define-values (pu ps) (with-handlers ([exn:fail? (λ (e) (values 0 0))]) (cpu-ticks p)))
    (values (+ u pu) (+ s ps))))

;; machine-ticks : -> (values natural natural) ; all CPUs' busy and total ticks (/proc/stat)
;; The first eight fields: user nice system idle iowait irq softirq steal (guest time is
;; already counted in user and nice).
(define (machine-ticks)
  (define fields (take (map string->number (cdr (string-split (car (file->lines "/proc/stat"))))) 8))
  (define idle (+ (list-ref fields 3) (list-ref fields 4)))   ; idle and iowait
  (define total (apply + fields))
  (values (- total idle) total))

;; server-source : path boolean string [boolean boolean (or/c path #f)] -> string
;; A server program for one tree: the raw hello handler of examples/hello-raw.rkt (or its
;; 1 MiB answer, built once, with big?), the servlet of examples/hello.rkt, or the `start`
;; of servlet-file, written inline so that it loads that tree's collection.
(define (server-source tree servlet? address [big? #f] [perf-map? #f] [servlet-file #f])
  (define main (path->string (build-path tree "fastcgi" "main.rkt")))
  (string-append
   "#lang racket/base\n"
   (format "(require (file ~s) web-server/http)\n" main)
   (if perf-map?
       ;; with --perf: once serving, /tmp/perf-PID.map names this tree's code for perf
       (string-append
        (format "(require (file ~s))\n" (path->string perf-map-module))
        "(void (thread (λ () (sleep 1)\n"
        "  (define (values-of ns) (for/list ([s (namespace-mapped-symbols ns)]) (namespace-variable-value s #t (λ () #f) ns)))\n"
        (format "  (define dir ~s)\n" (path->string (build-path tree "fastcgi" "private")))
        "  (define roots (append (values-of (make-base-namespace))\n"
        "    (for*/list ([f (in-directory dir)] #:when (regexp-match? #rx\"[.]rkt$\" (path->string f))\n"
        "                [m (in-value `(file ,(path->string f)))] #:when (module-declared? m #f)\n"
        "                [v (values-of (module->namespace m))]) v)))\n"
        "  (write-perf-map! (filter procedure? roots)))))\n")
       "")
   (cond
     [servlet-file
      (format "(serve/fastcgi (dynamic-require (string->path ~s) 'start) #:listen ~s)\n"
              (path->string servlet-file) address)]
     [servlet?
       (string-append
        "(define (start req)\n"
        "  (response/output (λ (out) (write-bytes #\"Hello, World!\\n\" out))\n"
        "                   #:mime-type #\"text/plain\"))\n"
        (format "(serve/fastcgi start #:listen ~s)\n" address))]
     [else
       (string-append
        (if big?
            (string-append
             ;; built once, immutable (as the manual advises): the port sends it uncopied
             "(define answer (bytes->immutable-bytes (bytes-append #\"Status: 200 OK\\r\\nContent-Type: application/octet-stream\\r\\n\"\n"
             "  #\"Content-Length: 1048576\\r\\n\\r\\n\" (make-bytes 1048576 120))))\n")
            "(define answer #\"Status: 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\nHello, World!\\n\")\n")
        "(define (handler req) (write-bytes answer (fastcgi-request-stdout req)))\n"
        (format "(serve/fastcgi-raw handler #:listen ~s)\n" address))])
   "(sync never-evt)\n"))

;; start-accept-count : natural real -> list ; perf counting the backend's accept4 calls
;; for about seconds (the measurement's length); finish-accept-count waits and reads it.
(define (start-accept-count pid seconds)
  (process* (find-executable-path "perf") "stat" "-x," "-e" "syscalls:sys_enter_accept4"
            "-p" (number->string pid) "--" "sleep" (number->string seconds)))
(define (finish-accept-count rec)
  ((list-ref rec 4) 'wait)
  (define err (port->string (list-ref rec 3)))
  (define m (regexp-match #px"(?m:^([0-9]+),)" err))
  (close-input-port (list-ref rec 0)) (close-output-port (list-ref rec 1)) (close-input-port (list-ref rec 3))
  (and m (string->number (cadr m))))

;; signal-backend! : proc string -> void ; `kill SIGNAL` to the backend's process
(define (signal-backend! pr sig)
  (void (system* (find-executable-path "kill") sig (number->string (proc-pid pr)))))

;; strace-calls : path natural -> (listof (cons string real)) ; calls per request, most first
(define-runtime-path perf-map-module "direct/perf-map.rkt")

(define (strace-calls file requests)
  (define rows
    (for*/list ([line (in-list (file->lines file))]
                [m (in-value (regexp-match
                              #px"^\\s*[0-9.]+\\s+[0-9.]+\\s+[0-9]+\\s+([0-9]+)\\s+(?:[0-9]+\\s+)?([a-z_0-9]+)$"
                              line))]
                #:when (and m (not (equal? (caddr m) "total"))))
      (cons (caddr m) (/ (string->number (cadr m)) requests 1.0))))
  (sort rows > #:key cdr))

;; one-request : -> bytes ; a keep-conn GET / with the params nginx sends, as records
(define one-request
  (bytes-append
   (record->bytes 'begin-request 1 (begin-request-content 'responder #t))
   (record->bytes 'params 1 (pairs->bytes '(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . "/")
                                            ("SCRIPT_NAME" . "/") ("QUERY_STRING" . "")
                                            ("SERVER_PROTOCOL" . "HTTP/1.1")
                                            ("HTTP_HOST" . "127.0.0.1"))))
   (record->bytes 'params 1 #"")
   (record->bytes 'stdin 1 #"")))

;; idle-growth : string natural natural -> real
;; KiB of RSS per connection after n connections each served one request and left open.
(define (idle-growth address pid n)
  (define path (substring address 5))
  (define before (status-memory-kb pid 'VmRSS))
  (define conns
    (for/list ([i (in-range n)])
      (define-values (in out) (unix-socket-connect path))
      (write-bytes one-request out)
      (flush-output out)
      (define d (make-decoder))
      (let loop ()
        (define r (decoder-next! d))
        (cond
          [(and r (eq? (record-type r) 'end-request)) (void)]
          [r (loop)]
          [(not (sync/timeout 10 in)) (error 'ab "no answer on connection ~a in 10 s" i)]
          [(eof-object? (decoder-read! d in)) (error 'ab "connection ~a closed before END_REQUEST" i)]
          [else (loop)]))
      (cons in out)))
  (sleep 1)
  (define after (status-memory-kb pid 'VmRSS))
  (for ([c (in-list conns)]) (close-input-port (car c)) (close-output-port (cdr c)))
  (/ (- after before) n 1.0))

(module+ main
  (define servlet? #f)
  (define big? #f)
  (define keep? #t)
  (define tcp? #f)
  (define rounds 2)
  (define seconds 5)
  (define strace? #f)
  (define churn? #f)
  (define perf-dir #f)
  (define idle #f)
  (define conns 25)
  (define specs
    (command-line
     #:once-each
     ["--servlet" "serve examples/hello.rkt's servlet instead of the raw handler" (set! servlet? #t)]
     ["--big" "the raw handler answers 1 MiB instead of hello" (set! big? #t)]
     ["--close" "nginx without keep-conn (a FastCGI connection per request)" (set! keep? #f)]
     ["--tcp" "backends listen on 127.0.0.1 (TCP) instead of unix sockets" (set! tcp? #t)]
     ["--rounds" n "rounds of measurements (default 2)" (set! rounds (string->number n))]
     ["--seconds" s "seconds of each wrk measurement (default 5)" (set! seconds (string->number s))]
     ["--connections" n "wrk's connections (default 25)" (set! conns (string->number n))]
     ["--strace" "also count system calls per request" (set! strace? #t)]
     ["--churn" "also count connections accepted per request (perf stat, accept4)" (set! churn? #t)]
     ["--perf" dir "also record each backend with perf (cpu-clock) into DIR/NAME.data" (set! perf-dir dir)]
     ["--idle" n "RSS per idle keep-alive connection, over N connections" (set! idle (string->number n))]
     ["--tree-cpu" "count the CPU of each backend's whole process tree (a pool: manager and workers)" (set-box! tree-cpu? #t)]
     #:args specs
     specs))
  (define variants
    (for/list ([s (in-list specs)])
      (define m (regexp-match #rx"^([^=]+)=([^@]+)(?:@(.+))?$" s))
      (unless m (error 'ab "expected NAME=TREE or NAME=TREE@SERVLET.rkt, got ~s" s))
      (when (and (cadddr m) (or (equal? (caddr m) "c") (regexp-match? #rx"[.]rkt$" (caddr m))))
        (error 'ab "@SERVLET.rkt needs a tree, not the C responder or a stand-alone FILE.rkt: ~s" s))
      (list (cadr m) (and (not (equal? (caddr m) "c")) (path->complete-path (caddr m)))
            (and (cadddr m) (path->complete-path (cadddr m))))))
  (call-with-temp-dir
   "fcgiab"
   (λ (dir)
     ;; nginx's ports, then (with --tcp) the backends'
     (define all-ports (free-ports (* (if tcp? 2 1) (length variants))))
     (define ports (take all-ports (length variants)))
     (define addrs
       (if tcp?
           (for/list ([p (in-list (drop all-ports (length variants)))]) (format "127.0.0.1:~a" p))
           (for/list ([v (in-list variants)] [i (in-naturals)])
             (format "unix:~a" (build-path dir (format "v~a.sock" i))))))
     (define fronts
       (for/hash ([p (in-list ports)] [a (in-list addrs)] [i (in-naturals)])
         (values (format "v~a" i) (front (format "v~a" i) p 'fastcgi (list a) keep?))))
     (define nginx-proc (start-nginx! dir fronts))
     (define peers
       (for/list ([v (in-list variants)] [a (in-list addrs)] [i (in-naturals)])
         (cond
           [(not (cadr v))
            (define exe (build-c! dir))
            (peer (car v) (path->string exe) (list a) (list a))]
           [(regexp-match? #rx"[.]rkt$" (path->string (cadr v)))
            (peer (car v) (path->string (find-executable-path "racket")) (list (path->string (cadr v)) a) (list a))]
           [else
            (define file (build-path dir (format "serve-~a.rkt" i)))
            (call-with-output-file file (λ (o) (write-string (server-source (cadr v) servlet? a big? (and perf-dir #t) (caddr v)) o)))
            (peer (car v) (path->string (find-executable-path "racket")) (list (path->string file)) (list a))])))
     (dynamic-wind
      void
      (λ ()
        (call-with-peers
         dir peers
         (λ (procs)
           (for ([p (in-list ports)])
             (wait-until 60 "a backend to answer" (λ () (answers? p "/" (if big? #px#"^x{1048576}$" hello-body)))))
           (when idle
             (for* ([r (in-range rounds)]
                    [(v a pr) (in-parallel variants addrs procs)])
               (printf "~a: ~a KiB of RSS per idle connection (~a connections)\n" (car v)
                       (~r (idle-growth a (proc-pid pr) idle) #:precision 1) idle)
               (flush-output)))
           (unless idle
             (printf "~a, keep-conn ~a, wrk -t1 -c~a -d~as, ~a rounds\n"
                     (cond [servlet? "servlet"] [big? "raw 1 MiB"] [else "raw"]) (if keep? "on" "off") conns seconds rounds)
             (printf "~a\n" (string-join (list (~a "variant" #:width 12) (~a "req/s" #:width 8)
                                               (~a "user us/req" #:width 12) (~a "sys us/req" #:width 10)
                                               "  nginx user + sys us/req, all CPUs busy"))))
           (for* ([r (in-range (if idle 0 rounds))]
                  [(v p pr) (in-parallel variants ports procs)])
             (define url (format "http://127.0.0.1:~a/" p))
             ;; the others are stopped meanwhile: an idle Racket server still takes a few
             ;; per cent of a core (its scheduler's polling), which the measured one would pay
             (for ([o (in-list procs)])
               (signal-backend! o (if (eq? o pr) "-CONT" "-STOP")))
             (run-wrk url conns 1)
             (define-values (u0 s0) (backend-ticks (proc-pid pr)))
             (define-values (nu0 ns0) (cpu-ticks (proc-pid nginx-proc)))
             (define-values (busy0 all0) (machine-ticks))
             (define counter (and churn? (start-accept-count (proc-pid pr) seconds)))
             (define l (run-wrk url conns seconds))
             (define-values (u1 s1) (backend-ticks (proc-pid pr)))
             (define-values (nu1 ns1) (cpu-ticks (proc-pid nginx-proc)))
             (define-values (busy1 all1) (machine-ticks))
             (define accepts (and counter (finish-accept-count counter)))
             (define (us ticks) (~r (/ (* ticks 10000.0) (load-requests l)) #:precision 1))
             (printf "~a ~a ~a ~a~a\n" (~a (car v) #:width 12) (~a (round (load-rps l)) #:width 8)
                     (~a (us (- u1 u0)) #:width 12) (~a (us (- s1 s0)) #:width 10)
                     (string-append
                      (format "  nginx ~a + ~a, machine ~a% busy" (us (- nu1 nu0)) (us (- ns1 ns0))
                              (~r (* 100.0 (/ (- busy1 busy0) (max 1 (- all1 all0)))) #:precision 0))
                      (if accepts (format "  ~a% of requests on a new connection" (~r (* 100.0 (/ accepts (max 1 (load-requests l)))) #:precision 1)) "")
                      (if (zero? (load-errors l)) "" (format "  (~a errors)" (load-errors l)))))
             (flush-output))
           (for ([o (in-list procs)]) (signal-backend! o "-CONT"))
           (when perf-dir
             (make-directory* perf-dir)
             (for ([v (in-list variants)] [p (in-list ports)] [pr (in-list procs)])
               (define out (path->string (path->complete-path (build-path perf-dir (format "~a.data" (car v))))))
               (define url (format "http://127.0.0.1:~a/" p))
               (run-wrk url conns 1)
               (define rec
                 (process* (find-executable-path "perf") "record" "-q" "-e" "cpu-clock" "-F" "5000"
                           "-p" (number->string (proc-pid pr)) "-o" out "--" "sleep" (number->string seconds)))
               (define l (run-wrk url conns seconds))
               ((list-ref rec 4) 'wait)
               (printf "~a: perf record of ~a requests in ~a (perf report -i ~a --no-children --sort sym)\n"
                       (car v) (load-requests l) out out)))
           (when strace?
             (for ([v (in-list variants)] [p (in-list ports)] [pr (in-list procs)] [i (in-naturals)])
               (define out (build-path dir (format "strace-~a.txt" i)))
               (define tracer
                 (start-process "strace" "/usr/bin/strace"
                                (list "-c" "-f" "-o" (path->string out) "-p" (number->string (proc-pid pr)))
                                #:dir dir))
               (sleep 1)
               (define l (run-wrk (format "http://127.0.0.1:~a/" p) conns seconds))
               (stop-process! tracer)
               (wait-until 10 "strace's summary"
                           (λ () (and (file-exists? out) (regexp-match? #rx"total" (file->string out)))))
               (define calls (strace-calls out (load-requests l)))
               (printf "~a syscalls/request: ~a total; ~a\n" (car v)
                       (~r (apply + (map cdr calls)) #:precision 2)
                       (string-join (for/list ([c (in-list calls)] #:when (>= (cdr c) 0.01))
                                      (format "~a ~a" (car c) (~r (cdr c) #:precision 2)))
                                    ", "))))))
        (void))
      (λ () (stop-process! nginx-proc))))))
