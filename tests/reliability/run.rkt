#lang racket/base
;; `make reliability` and `make soak`: load, overload and faults through a real nginx in
;; front of `raco fastcgi serve` (2 workers, unix socket, upstream keepalive), with the
;; fixed-rate load of loadgen/ (open loop: latency counted from when each request was due).
;;
;;   racket tests/reliability/run.rkt [--scale F] [--only NAME,...] [--results FILE]
;;   racket tests/reliability/run.rkt --soak SECONDS [--results FILE]
;;
;; Every run prints a table and rewrites its part of tests/reliability/RESULTS.md (the
;; soak its own section). It exits 1 when a request was lost that did not have to be: a
;; failure is unavoidable only when the process holding it was killed (nginx logged the
;; exchange cut) or when nothing was listening (nginx logged the connect refused, or the
;; client could not reach the front while it restarted).
;;
;; Traffic goes to 127.0.0.1 and a unix socket in a temporary folder only; every load is
;; bounded by its rate and duration, every wait by a deadline.
(require json
         racket/cmdline
         racket/file
         racket/format
         (only-in racket/future processor-count)
         racket/list
         racket/math
         racket/port
         racket/runtime-path
         racket/string
         racket/system
         racket/tcp
         "../../fastcgi/private/os/signals.rkt"
         "../integration/lib.rkt"
         "loadgen.rkt")

(define-runtime-path app-file "app.rkt")
(define-runtime-path default-results "RESULTS.md")

(define raco (path->string (find-executable-path "raco")))
;; looked up when used, so that loading this module (raco test does) needs neither
(define (nginx) (require-program! "/usr/sbin/nginx" "nginx"))
(define (wrk) (require-program! "/usr/bin/wrk" "wrk"))

;; ---------------------------------------------------------------------------------------
;; The pool and its front.

;; dir: the run's folder; sock: the app's socket; pid-file: the manager's; manager: its
;; process; port: nginx's; front: nginx's process (replaced when the front restarts).
(struct ctx (dir sock pid-file manager port front bin) #:mutable)

(define workers 2)
(define serve-options
  (list "--workers" (number->string workers) "--request-timeout" "2" "--max-queue-delay" "1"
        "--graceful-timeout" "20" "--status-path" "/status"))

(define nginx-params
  '(("REQUEST_METHOD" . "$request_method") ("REQUEST_URI" . "$request_uri")
    ("QUERY_STRING" . "$query_string") ("SCRIPT_NAME" . "$fastcgi_script_name")
    ("CONTENT_TYPE" . "$content_type") ("CONTENT_LENGTH" . "$content_length")
    ("SERVER_PROTOCOL" . "$server_protocol") ("REMOTE_ADDR" . "$remote_addr")))

;; nginx-conf : ctx -> string
;; /upload streams the body to the app as it arrives, and /download/ passes the answer on
;; as the client takes it, so that a client that goes away mid-way reaches the app.
(define (nginx-conf c)
  (define (in-dir name) (path->string (build-path (ctx-dir c) name)))
  (define (location path . extra)
    (string-append
     (format "    location ~a {\n" path)
     (string-append* (for/list ([p (in-list nginx-params)])
                       (format "      fastcgi_param ~a ~a;\n" (car p) (cdr p))))
     "      fastcgi_pass app;\n      fastcgi_keep_conn on;\n      fastcgi_read_timeout 60s;\n"
     (string-append* (map (λ (e) (string-append "      " e "\n")) extra))
     "    }\n"))
  (string-append
   "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\n"
   "worker_rlimit_nofile 20000;\n"
   (format "pid ~a;\nerror_log ~a warn;\n" (in-dir "nginx.pid") (in-dir "nginx-error.log"))
   "events { worker_connections 8192; }\nhttp {\n  access_log off;\n"
   (string-append* (for/list ([t '("client_body" "fastcgi" "proxy" "uwsgi" "scgi")])
                     (format "  ~a_temp_path ~a;\n" t (in-dir (string-append t "_temp")))))
   ;; idle kept connections to the app close after 2 s, so that the descriptors counted
   ;; after a scenario's settling time are the ones still in use
   (format "  upstream app { server unix:~a; keepalive 64; keepalive_timeout 2s; }\n" (ctx-sock c))
   (format "  server {\n    listen 127.0.0.1:~a backlog=4096;\n    client_max_body_size 0;\n"
           (ctx-port c))
   (location "/")
   (location "/upload" "fastcgi_request_buffering off;")
   (location "/download/" "fastcgi_buffering off;")
   "  }\n}\n"))

;; start-front! : ctx -> void
(define (start-front! c)
  (define conf (build-path (ctx-dir c) "nginx.conf"))
  (display-to-file (nginx-conf c) conf #:exists 'truncate)
  (set-ctx-front! c (start-process "nginx" (nginx) (list "-c" (path->string conf) "-p" (path->string (ctx-dir c)))
                                   #:dir (ctx-dir c)))
  (wait-for-tcp (ctx-port c) 10))

;; start-pool! : ctx [(listof string)] -> void ; the manager, with serve-options and extra,
;; until every worker serves
(define (start-pool! c [extra '()])
  (set-ctx-manager! c (start-process "manager" raco
                                     (append (list "fastcgi" "serve" (path->string app-file)
                                                   "--listen" (string-append "unix:" (ctx-sock c))
                                                   "--pid-file" (ctx-pid-file c))
                                             serve-options extra)
                                     #:dir (ctx-dir c)))
  (wait-until 60 "the workers to be ready"
              (λ () (= workers (length (ready-workers c))))))

;; restart-pool! : ctx (listof string) -> void
;; Stops the pool (if it still runs) and starts a new one with extra options, then warms
;; it as call-with-ctx does. The old board is removed first: its workers are no proof of
;; the new ones; the old log is kept as manager.stderr.N.
(define (restart-pool! c extra)
  (when (ctx-manager c) (stop-process! (ctx-manager c) #:timeout 30))
  (define status-file (string-append (ctx-pid-file c) ".status.json"))
  (when (file-exists? status-file) (delete-file status-file))
  (define log (build-path (ctx-dir c) "manager.stderr"))
  (when (file-exists? log)
    (rename-file-or-directory log (build-path (ctx-dir c) (format "manager.stderr.~a" (length (old-manager-logs c))))))
  (start-pool! c extra)
  (run-loadgen (ctx-bin c) #:url (url c "/hello") #:rate 200 #:seconds 2))

;; old-manager-logs : ctx -> (listof path) ; the logs of the pools restart-pool! replaced
(define (old-manager-logs c)
  (for/list ([f (in-list (directory-list (ctx-dir c)))]
             #:when (regexp-match? #rx"^manager[.]stderr[.][0-9]+$" (path->string f)))
    f))

;; pool-running? : ctx -> boolean
(define (pool-running? c)
  (and (ctx-manager c) (eq? 'running (subprocess-status (proc-subprocess (ctx-manager c))))))

;; board : ctx -> (or/c hash #f) ; the status the manager publishes
(define (board c)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (call-with-input-file (string-append (ctx-pid-file c) ".status.json") read-json)))

(define (ready-workers c)
  (for/list ([w (in-list (hash-ref (or (board c) (hasheq)) 'workers '()))]
             #:when (member (hash-ref w 'state) '("idle" "busy")))
    w))

;; pool-pids : ctx -> (listof natural) ; the manager and every live worker
(define (pool-pids c)
  (define m (proc-pid (ctx-manager c)))
  (cons m (for/list ([w (in-list (hash-ref (or (board c) (hasheq)) 'workers '()))]
                     #:when (process-alive? (hash-ref w 'pid)))
            (hash-ref w 'pid))))

;; snapshot : ctx -> (cons kB fds) ; resident memory and open descriptors of the pool
(define (snapshot c)
  (for/fold ([kb 0] [fds 0] #:result (cons kb fds)) ([pid (in-list (pool-pids c))])
    (with-handlers ([exn:fail? (λ (e) (values kb fds))])
      (values (+ kb (status-memory-kb pid 'VmRSS))
              (+ fds (length (directory-list (format "/proc/~a/fd" pid))))))))

(define (url c path) (format "http://127.0.0.1:~a~a" (ctx-port c) path))

;; error-log-mark / error-log-since : what nginx logged during a scenario
(define (error-log-file c) (build-path (ctx-dir c) "nginx-error.log"))
(define (error-log-mark c)
  (if (file-exists? (error-log-file c)) (file-size (error-log-file c)) 0))
(define (error-log-since c mark)
  (define f (error-log-file c))
  (if (file-exists? f)
      (call-with-input-file f (λ (in) (file-position in mark) (port->lines in)))
      '()))
(define (count-lines lines rx) (for/sum ([l (in-list lines)]) (if (regexp-match? rx l) 1 0)))

;; nginx's words for an exchange cut by the app's side (the process holding it died) and
;; for a connect that found nothing listening
(define cut-rx #rx"upstream prematurely closed|recv\\(\\) failed \\(104|readv\\(\\) failed \\(104")
(define refused-rx #rx"connect\\(\\) to unix:.* failed \\((2|111):")

;; ---------------------------------------------------------------------------------------
;; Results.

;; A row of the table. failed: requests not answered as they should have been;
;; unavoidable: of those, the ones the fault itself took; extra: (listof string) notes.
(struct row (name sent expected failed unavoidable p50 p99 max mem0 mem1 fds0 fds1 notes)
  #:transparent)

(define (lat res key [status #f])
  (define l (if status
                (hash-ref (hash-ref (hash-ref res 'latency) 'by_status (hasheq)) status #f)
                (hash-ref (hash-ref res 'latency) 'all #f)))
  (and l (positive? (hash-ref l 'n 0)) (hash-ref l key)))

(define (status-count res code) (hash-ref (hash-ref res 'by_status) code 0))
(define (error-count res [kind #f])
  (define es (hash-ref res 'errors))
  (if kind (hash-ref es kind 0) (for/sum ([v (in-hash-values es)]) v)))
(define (non-200 res) (- (hash-ref res 'sent) (status-count res '|200|)))

(define (fmt-ms v) (if (real? v) (~r v #:precision 1) "-"))   ; JSON null is the symbol null
(define (fmt-mb kb) (~r (/ kb 1024.0) #:precision 1))

;; nines : natural natural -> string ; the share answered as expected, as "nines"
(define (nines ok sent)
  (cond
    [(zero? sent) "-"]
    [(= ok sent) "100%"]
    [else (format "~a%" (~r (* 100.0 (/ ok sent)) #:precision 4))]))

(define rows '())
(define checks '())   ; (listof (cons boolean string)) : every pass/fail decision, for the file

(define (add-row! r) (set! rows (append rows (list r))) (print-row r))
(define (check! ok? what)
  (set! checks (append checks (list (cons ok? what))))
  (printf "  ~a ~a\n" (if ok? "ok  " "FAIL") what)
  (flush-output))

(define (print-row r)
  (printf "~a: sent ~a, failed ~a (unavoidable ~a), p50 ~a p99 ~a max ~a ms, memory ~a -> ~a MiB, fds ~a -> ~a\n"
          (row-name r) (row-sent r) (row-failed r) (row-unavoidable r)
          (fmt-ms (row-p50 r)) (fmt-ms (row-p99 r)) (fmt-ms (row-max r))
          (fmt-mb (row-mem0 r)) (fmt-mb (row-mem1 r)) (row-fds0 r) (row-fds1 r))
  (for ([n (in-list (row-notes r))]) (printf "    ~a\n" n))
  (flush-output))

;; settle : ctx -> (cons kB fds) ; the pool's figures once the run's connections are gone
;; (nginx closes its idle connections to the app after 2 s)
(define (settle c)
  (sleep 3.5)
  (snapshot c))

;; ---------------------------------------------------------------------------------------
;; Scenarios.

(define scale (make-parameter 1.0))
(define (secs s) (max 3.0 (* s (scale))))

(define steady-mix "/hello=80,/cpu/1=10,/slow/20=10")

;; steady : ctx real -> void ; a fixed rate for 60 s: every request must be a 200
(define (steady c rate)
  (define s0 (snapshot c))
  (define mark (error-log-mark c))
  (define res (run-loadgen (ctx-bin c) #:url (url c "/") #:mix steady-mix #:rate rate
                           #:seconds (secs 60) #:timeout 30))
  (define s1 (settle c))
  (define failed (non-200 res))
  (add-row! (row (format "steady ~a req/s, ~a s" rate (secs 60)) (hash-ref res 'sent) "200"
                 failed 0 (lat res 'p50) (lat res 'p99) (lat res 'max)
                 (car s0) (car s1) (cdr s0) (cdr s1)
                 (list (format "mix ~a; answered 200: ~a (~a); achieved ~a req/s; generator dropped ~a"
                               steady-mix (status-count res '|200|)
                               (nines (status-count res '|200|) (hash-ref res 'sent))
                               (~r (hash-ref res 'achieved_rate) #:precision 1)
                               (hash-ref res 'gen_dropped))
                       (format "p99.9 ~a ms; nginx error lines: ~a"
                               (fmt-ms (lat res 'p999)) (length (error-log-since c mark))))))
  (check! (zero? failed) (format "steady ~a req/s: every request answered 200" rate)))

;; capacity : ctx string -> (values real natural)
;; Closed-loop requests/s of path answered 2xx (wrk, 32 connections), and how many of
;; wrk's answers were not: with shedding on, 32 requests at once can get fast 503s,
;; which wrk's own Requests/sec counts. Counted with them, capacity came out too high
;; (335 req/s against 230 answered 200, in a run where both were printed), so the
;; overload below offered more than 3x, and in one CI run its "half the capacity" and
;; recovery checks failed (a capacity of 726 req/s).
(define (capacity c path)
  (define-values (st out err)
    (run-program (wrk) (list "-t1" "-c32" "-d5s" (url c path)) #:timeout 30))
  (define m (regexp-match #rx#"Requests/sec: *([0-9.]+)" out))
  (unless m (error 'reliability "wrk gave no rate: ~a ~a" out err))
  (define rate (string->number (bytes->string/latin-1 (cadr m))))
  (define total (let ([t (regexp-match #rx#"([0-9]+) requests in" out)])
                  (if t (string->number (bytes->string/latin-1 (cadr t))) 0)))
  (define bad (let ([b (regexp-match #rx#"Non-2xx or 3xx responses: *([0-9]+)" out)])
                (if b (string->number (bytes->string/latin-1 (cadr b))) 0)))
  (values (if (positive? total) (* rate (/ (- total bad) total 1.0)) rate) bad))

;; overload : ctx -> void
;; 3 x capacity of a 5 ms handler for 30 s, then half of capacity for 10 s.
(define (overload c)
  (define path "/cpu/5")
  (define-values (cap cap-bad) (capacity c path))
  (sleep 2)
  (define restarts0 (hash-ref (or (board c) (hasheq)) 'restarts 0))
  (define shed0 (hash-ref (or (board c) (hasheq)) 'shed_requests 0))
  (define s0 (snapshot c))
  (define peak (box (car s0)))
  (define sampler (thread (λ () (let loop ()
                                  (sleep 0.5)
                                  (set-box! peak (max (unbox peak) (car (snapshot c))))
                                  (loop)))))
  (define over-secs (secs 30))
  ;; 3 x what the pool can serve at best: the measured capacity, or, when it came out
  ;; lower, a core per worker at the handler's 5 ms (a measure that comes out low, as it
  ;; did when one worker took every connection nginx kept, would make 3 x no overload)
  (define rate (* 3 (max cap (* (min workers (processor-count)) (/ 1000 5)))))
  (define h1 (start-loadgen (ctx-bin c) #:url (url c path) #:rate rate #:seconds over-secs
                            #:timeout 30 #:max-inflight 6000))
  (sleep over-secs)
  (define h2 (start-loadgen (ctx-bin c) #:url (url c path) #:rate (* 0.5 cap) #:seconds (secs 10)
                            #:timeout 30 #:seed 2))
  (define r1 (loadgen-wait h1))
  (define r2 (loadgen-wait h2))
  (kill-thread sampler)
  (define s1 (settle c))
  (define b (or (board c) (hasheq)))
  (define restarts (- (hash-ref b 'restarts 0) restarts0))
  (define ok1 (status-count r1 '|200|))
  (define shed1 (status-count r1 '|503|))
  (define other1 (- (hash-ref r1 'sent) ok1 shed1))
  (add-row! (row (format "overload 3x (~a req/s) for ~a s" (~r rate #:precision 0) over-secs)
                 (hash-ref r1 'sent) "200 or fast 503" other1 0
                 (lat r1 'p50 '|200|) (lat r1 'p99 '|200|) (lat r1 'max '|200|)
                 (car s0) (car s1) (cdr s0) (cdr s1)
                 (list (format "capacity of ~a measured first: ~a req/s answered 200 (wrk, 32 connections, 5 s; ~a other answers not counted)"
                               path (~r cap #:precision 0) cap-bad)
                       (format "served 200: ~a (~a req/s); shed 503: ~a (p50 ~a, p99 ~a, max ~a ms); other: ~a; errors ~a"
                               ok1 (~r (/ ok1 over-secs) #:precision 0) shed1
                               (fmt-ms (lat r1 'p50 '|503|)) (fmt-ms (lat r1 'p99 '|503|))
                               (fmt-ms (lat r1 'max '|503|)) other1 (hash-ref r1 'errors))
                       (format "latency above is of the served requests; pool peak memory ~a MiB; shed counted by the pool: ~a; workers restarted: ~a"
                               (fmt-mb (unbox peak))
                               (- (hash-ref b 'shed_requests 0) shed0) restarts))))
  (define ok2 (status-count r2 '|200|))
  (define first-second (let ([ss (hash-ref r2 'seconds '())]) (and (pair? ss) (car ss))))
  (add-row! (row (format "recovery: 0.5x (~a req/s) right after, ~a s" (~r (* 0.5 cap) #:precision 0) (secs 10))
                 (hash-ref r2 'sent) "200" (non-200 r2) 0
                 (lat r2 'p50) (lat r2 'p99) (lat r2 'max)
                 (car s0) (car s1) (cdr s0) (cdr s1)
                 (list (format "answered 200: ~a of ~a; first second (the work admitted under overload still draining): ~a sent, ~a answered 200, p99 ~a ms"
                               ok2 (hash-ref r2 'sent)
                               (if first-second (hash-ref first-second 'sent) "-")
                               (if first-second (hash-ref first-second 's200) "-")
                               (if first-second (fmt-ms (hash-ref first-second 'p99)) "-")))))
  (check! (zero? other1) "overload: every request got a 200 or a 503, nothing else (no timeout, no 502)")
  (check! (> shed1 0) "overload: the excess was shed")
  (check! (>= ok1 (* 0.5 cap over-secs)) "overload: the pool still served at least half its capacity")
  (check! (let ([p99 (lat r1 'p99 '|503|)]) (and p99 (< p99 1000))) "overload: the 503s were fast (p99 under 1 s)")
  (check! (let ([mx (lat r1 'max '|200|)]) (and mx (< mx 10000))) "overload: served requests kept a bounded latency (max under 10 s)")
  (check! (zero? restarts) "overload: no worker died")
  (define late-failed
    (for/sum ([b (in-list (hash-ref r2 'seconds '()))] #:when (>= (hash-ref b 't) 1))
      (- (hash-ref b 'sent) (hash-ref b 's200))))
  (check! (zero? late-failed)
          (format "recovery: from the second second on, every request answered 200 (the first second drains the queue admitted under overload: ~a of ~a answered 200)"
                  (if first-second (hash-ref first-second 's200) "-")
                  (if first-second (hash-ref first-second 'sent) "-"))))

;; under-load : ctx (-> any) #:rate #:seconds #:mix #:posts? #:at -> (values res lines info)
;; Runs the background load, calls fault at the fraction at of it (a third), waits, and
;; returns the load's result with the nginx error lines of the scenario. With posts?,
;; post-share of the requests are POSTs to /upload (see post-bytes), the others GETs of mix.
(define (under-load c fault #:rate [rate 200] #:seconds [seconds 12] #:mix [mix "/hello=90,/slow/50=10"]
                    #:posts? [posts? #f] #:at [at 1/3])
  (define mark (error-log-mark c))
  (define s (secs seconds))
  (define h (start-loadgen (ctx-bin c) #:url (url c "/") #:mix mix #:rate rate #:seconds s #:timeout 30
                           #:post-share (if posts? post-share 0) #:post-path "/upload"
                           #:post-bytes post-bytes #:post-echo? #t))
  (sleep (* s at))
  (define info (fault))
  (define res (loadgen-wait h))
  (values res (error-log-since c mark) info))

;; The POST-heavy load of the -post scenarios: a front retries a GET that met a closed kept
;; connection, but never a POST it has sent, so only POSTs show such a close (as a 502).
;; Half the requests POST a body of 2 to 16 KiB to /upload (answered with its length, which
;; the generator checks), half GET /hello and some /slow/50 (so that nginx keeps tens of
;; connections busy). The rate: high enough that the code before the handover lost POSTs
;; in every one of these scenarios; low enough that while new workers start (both cores
;; busy for a moment) the pool does not shed load (a higher rate got 503s from
;; --max-queue-delay during the reloads).
(define post-share 1/2)
(define post-bytes (cons 2048 16384))
(define post-rate 2000)
(define post-mix "/hello=90,/slow/50=10")

;; method-notes : jsexpr -> string ; what each method got
(define (method-notes res)
  (define by-method (hash-ref res 'by_method (hasheq)))
  (string-join
   (for/list ([m (in-list (sort (hash-keys by-method) symbol<?))])
     (define v (hash-ref by-method m))
     (format "~a: ~a sent, ~a not 200 (statuses ~a, errors ~a)"
             m (hash-ref v 'sent) (- (hash-ref v 'sent) (hash-ref (hash-ref v 'by_status) '|200| 0))
             (jsexpr->string (hash-ref v 'by_status))
             (jsexpr->string (for/hasheq ([(k n) (in-hash (hash-ref v 'errors))] #:when (positive? n))
                               (values k n)))))
   "; "))

(define (fault-row! name c s0 res lines unavoidable notes)
  (define s1 (settle c))
  (define failed (non-200 res))
  (define r (row name (hash-ref res 'sent) "200" failed (min failed unavoidable)
                 (lat res 'p50) (lat res 'p99) (lat res 'max)
                 (car s0) (car s1) (cdr s0) (cdr s1)
                 (append notes
                         (list (format "statuses ~a, errors ~a; nginx: ~a exchanges cut by the app side, ~a connects refused"
                                       (jsexpr->string (hash-ref res 'by_status))
                                       (jsexpr->string (hash-ref res 'errors))
                                       (count-lines lines cut-rx) (count-lines lines refused-rx))))))
  (add-row! r)
  (check! (<= failed unavoidable) (format "~a: no request lost that the fault did not take" name))
  r)

(define (fault-kill c)
  (define s0 (snapshot c))
  (define victim #f)
  (define-values (res lines info)
    (under-load c (λ ()
                    (define ws (ready-workers c))
                    (define w (argmax (λ (w) (hash-ref w 'active 0)) ws))
                    (set! victim w)
                    (send-signal! (hash-ref w 'pid) SIGKILL))))
  (wait-until 30 "a replacement worker" (λ () (= workers (length (ready-workers c)))))
  (define cut (count-lines lines cut-rx))
  (fault-row! "worker SIGKILLed" c s0 res lines cut
              (list (format "killed pid ~a, which had ~a requests in flight by its last report"
                            (hash-ref victim 'pid) (hash-ref victim 'active 0))
                    "unavoidable: the exchanges nginx saw cut (held by the killed worker)")))

(define (fault-side c name path rate expect-status)
  (define s0 (snapshot c))
  (define side #f)
  (define-values (res lines info)
    (under-load c (λ ()
                    (set! side (start-loadgen (ctx-bin c) #:url (url c path) #:rate rate
                                              #:seconds (secs 4) #:timeout 30 #:seed 3)))))
  (define side-res (loadgen-wait side))
  (define wrong (- (hash-ref side-res 'sent) (status-count side-res expect-status)))
  (fault-row! name c s0 res lines 0
              (list (format "~a at ~a req/s alongside: ~a sent, ~a answered ~a (p50 ~a ms), ~a otherwise"
                            path rate (hash-ref side-res 'sent) (status-count side-res expect-status)
                            expect-status (fmt-ms (lat side-res 'p50)) wrong)))
  (check! (zero? wrong) (format "~a: every ~a answered ~a" name path expect-status)))

;; abandon-upload : ctx natural natural -> void ; declares total bytes, sends some, leaves
(define (abandon-upload c total sent)
  (define-values (in out) (tcp-connect "127.0.0.1" (ctx-port c)))
  (with-handlers ([exn:fail? void])
    (write-string (format "POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: ~a\r\nContent-Type: application/octet-stream\r\n\r\n" total) out)
    (define piece (make-bytes 65536 65))
    (for ([_ (in-range (quotient sent 65536))]) (write-bytes piece out))
    (flush-output out)
    (sleep 0.2))
  (close-output-port out)
  (close-input-port in))

;; abandon-download : ctx natural natural -> void ; asks for total bytes, reads some, leaves
(define (abandon-download c total taken)
  (define-values (in out) (tcp-connect "127.0.0.1" (ctx-port c)))
  (with-handlers ([exn:fail? void])
    (write-string (format "GET /download/~a HTTP/1.1\r\nHost: localhost\r\n\r\n" total) out)
    (flush-output out)
    (let loop ([left taken])
      (when (positive? left)
        (define bs (sync/timeout 10 (read-bytes-evt (min left 65536) in)))
        (when (bytes? bs) (loop (- left (bytes-length bs)))))))
  (close-output-port out)
  (close-input-port in))

(define (fault-disconnect c name abandon! count what)
  (define s0 (snapshot c))
  (define-values (res lines info)
    (under-load c (λ ()
                    (define ths (for/list ([i (in-range 4)])
                                  (thread (λ () (for ([_ (in-range (quotient count 4))]) (abandon! c))))))
                    (for-each thread-wait ths))))
  ;; the app still takes a whole upload and gives a whole download afterwards
  (define up (http-request (ctx-port c) "/upload" #:method "POST" #:data (make-bytes (* 2 1024 1024) 66)
                           #:timeout 30))
  (define down (http-request (ctx-port c) "/download/3000000" #:timeout 30))
  (define r (fault-row! name c s0 res lines 0
                        (list (format "~a clients ~a; then a 2 MiB upload answered ~a ~s, a 3 MB download gave ~a bytes"
                                      count what (http-response-status up)
                                      (string-trim (bytes->string/latin-1 (http-response-body up)))
                                      (bytes-length (http-response-body down))))))
  (check! (and (= 200 (http-response-status up)) (equal? (http-response-body up) #"2097152\n")
               (= 3000000 (bytes-length (http-response-body down))))
          (format "~a: a whole upload and download work afterwards" name))
  (check! (<= (row-fds1 r) (+ (row-fds0 r) 4)) (format "~a: no descriptor left open" name)))

(define (fault-front-restart c)
  (define s0 (snapshot c))
  (define down-ms #f)
  (define-values (res lines info)
    (under-load c (λ ()
                    (define t0 (current-inexact-milliseconds))
                    (define old (ctx-front c))
                    (send-signal! (proc-pid old) SIGQUIT)   ; graceful: finishes what it holds
                    (unless (sync/timeout 20 (proc-subprocess old))
                      (error 'reliability "nginx did not quit within 20 s"))
                    (stop-process! old)
                    (start-front! c)
                    (set! down-ms (- (current-inexact-milliseconds) t0)))))
  (define refused (error-count res 'connect))
  (fault-row! "front restarted (nginx quit gracefully, started again)" c s0 res lines refused
              (list (format "the front was away for ~a ms; unavoidable: the requests that found no front (connect refused: ~a)"
                            (~r down-ms #:precision 0) refused))))

(define (generation c) (hash-ref (or (board c) (hasheq)) 'generation 1))

;; wait-reloaded : ctx natural -> void ; until a generation after gen0 serves alone
(define (wait-reloaded c gen0)
  (wait-until 60 "the new generation" (λ () (> (generation c) gen0)))
  (wait-until 60 "the old generation gone"
              (λ () (for/and ([w (in-list (hash-ref (or (board c) (hasheq)) 'workers '()))])
                      (> (hash-ref w 'generation) gen0)))))

(define (fault-reload c)
  (define s0 (snapshot c))
  (define gen0 (generation c))
  (define-values (res lines info)
    (under-load c (λ () (send-signal! (proc-pid (ctx-manager c)) SIGHUP))))
  (wait-reloaded c gen0)
  (fault-row! "reload (SIGHUP to the manager)" c s0 res lines 0
              (list (format "generation ~a -> ~a" gen0 (generation c)))))

;; The manager's log (its workers' lines too), to count the kept connections that retiring
;; workers handed over to the others.
(define (manager-log c) (build-path (ctx-dir c) "manager.stderr"))
(define (manager-log-mark c) (if (file-exists? (manager-log c)) (file-size (manager-log c)) 0))
(define (handed-over-since c mark)
  (for/sum ([l (in-list (if (file-exists? (manager-log c))
                            (call-with-input-file (manager-log c) (λ (in) (file-position in mark) (port->lines in)))
                            '()))])
    (define m (regexp-match #rx"handed ([0-9]+) kept connection" l))
    (if m (string->number (cadr m)) 0)))

(define (post-load-text res get-mix)
  (format "load: ~a req/s for ~a s, ~a% of them POSTs of ~a to ~a bytes to /upload (each answer checked to be the body's length), the others GETs of ~a"
          post-rate (~r (hash-ref res 'duration) #:precision 1) (~r (* 100 post-share) #:precision 0)
          (car post-bytes) (cdr post-bytes) get-mix))

(define (post-load-notes c res log-mark)
  (list (post-load-text res post-mix)
        (method-notes res)
        (format "kept connections handed over by retiring workers (their log): ~a" (handed-over-since c log-mark))))

;; worker-rss-mib : ctx -> natural ; the most private memory of one ready worker, MiB
(define (worker-rss-mib c)
  ;; what --max-memory compares: the status's private memory (resident less shared: a
  ;; forked worker shares its loader's image)
  (quotient (for/fold ([m 0]) ([w (in-list (ready-workers c))])
              (max m (let ([p (hash-ref w 'private_memory #f)]) (if (exact-integer? p) (quotient p 1024) 0))))
            1024))

;; reload-post : SIGHUP reloads one after the other (each waited for) under the POST load
(define (fault-reload-post c)
  (define s0 (snapshot c))
  (define gen0 (generation c))
  (define log-mark (manager-log-mark c))
  (define reloads 5)
  (define-values (res lines info)
    (under-load c #:posts? #t #:rate post-rate #:mix post-mix #:seconds 20 #:at 1/10
                (λ ()
                  (for ([_ (in-range reloads)])
                    (define g (generation c))
                    (send-signal! (proc-pid (ctx-manager c)) SIGHUP)
                    (wait-reloaded c g)
                    (sleep 1)))))
  (define name (format "reload under POSTs (~a SIGHUPs)" reloads))
  (fault-row! name c s0 res lines 0
              (cons (format "generation ~a -> ~a" gen0 (generation c))
                    (post-load-notes c res log-mark)))
  (check! (>= (generation c) (+ gen0 reloads)) (format "~a: ~a reloads done" name reloads)))

;; recycle-post : a pool with options that recycle its workers, under the POST load; the
;; pool of the other scenarios is started again afterwards. leak: #f, or (cons path rate),
;; a GET load alongside (its requests must all be answered 200 too).
(define (fault-recycle-post c name options what #:leak [leak #f])
  (restart-pool! c options)
  (define s0 (snapshot c))
  (define log-mark (manager-log-mark c))
  (define recycled0 (hash-ref (or (board c) (hasheq)) 'recycled 0))
  (define side (and leak (start-loadgen (ctx-bin c) #:url (url c (car leak)) #:rate (cdr leak)
                                        #:seconds (secs 15) #:timeout 30 #:seed 4)))
  (define-values (res lines info)
    (under-load c void #:posts? #t #:rate post-rate #:mix post-mix #:seconds 15))
  (define side-res (and side (loadgen-wait side)))
  (define recycled (- (hash-ref (or (board c) (hasheq)) 'recycled 0) recycled0))
  (fault-row! name c s0 res lines 0
              (append
               (list (format "the pool started with ~a: ~a workers recycled during the run (~a)"
                             (string-join options) recycled what))
               (if side-res
                   (list (format "~a at ~a req/s alongside: ~a sent, ~a answered 200, statuses ~a, errors ~a"
                                 (car leak) (~r (cdr leak) #:precision 0) (hash-ref side-res 'sent) (status-count side-res '|200|)
                                 (jsexpr->string (hash-ref side-res 'by_status))
                                 (jsexpr->string (hash-ref side-res 'errors))))
                   '())
               (post-load-notes c res log-mark)))
  (when side-res
    (check! (zero? (non-200 side-res)) (format "~a: every ~a answered 200" name (car leak))))
  (check! (>= recycled 2) (format "~a: workers were recycled (~a)" name recycled))
  (restart-pool! c '()))

;; graceful stop: the last scenarios, as it ends the pool (the second starts it again).
;; With posts?, under the POST load (its GETs with some /slow/1000 in flight at the stop).
;; Unavoidable: the requests nginx found nothing listening for (connect refused), and the
;; POSTs that met nginx closing their connection to the client: when the app refuses a
;; POST whose body nginx is still passing on (fastcgi_request_buffering off), nginx
;; answers 502 and closes that connection after the answer, and a POST the client sends
;; on it meanwhile fails (reset) with no line in nginx's log. Those are counted from the
;; second before the stop on, and only as reset or other errors (not timeouts).
(define (fault-stop c #:posts? [posts? #f])
  (unless (pool-running? c) (restart-pool! c '()))
  (define s0 (snapshot c))
  (define status #f)
  (define name (if posts? "graceful stop under POSTs" "graceful stop"))
  (define seconds 12)
  (define stop-mix "/hello=80,/slow/1000=20")
  (define-values (res lines info)
    (under-load c #:mix stop-mix #:seconds seconds #:at 1/3
                #:rate (if posts? post-rate 100) #:posts? posts?
                (λ ()
                  (send-signal! (proc-pid (ctx-manager c)) SIGTERM)
                  (unless (sync/timeout 30 (proc-subprocess (ctx-manager c)))
                    (error 'reliability "the manager did not stop within 30 s"))
                  (set! status (subprocess-status (proc-subprocess (ctx-manager c)))))))
  (define refused (count-lines lines refused-rx))
  (define stop-second (floor (* (secs seconds) 1/3)))
  (define errors-after (for/sum ([b (in-list (hash-ref res 'seconds '()))]
                                 #:when (>= (hash-ref b 't) (- stop-second 1)))
                         (hash-ref b 'errors)))
  (define closed (min errors-after (+ (error-count res 'reset) (error-count res 'other))))
  (define s1 (cons 0 0))
  (define failed (non-200 res))
  (define unavoidable (+ refused closed))
  (define r (row (string-append name " (SIGTERM to the manager)") (hash-ref res 'sent) "200"
                 failed (min failed unavoidable) (lat res 'p50) (lat res 'p99) (lat res 'max)
                 (car s0) (car s1) (cdr s0) (cdr s1)
                 (append
                  (list (format "manager exit status ~a; socket file left: ~a" status (file-exists? (ctx-sock c)))
                        (format "statuses ~a, errors ~a; unavoidable: the requests nginx could not hand to anyone after the stop (connect refused: ~a) and the POSTs on client connections nginx closed after such a refusal (reset or other errors from the second before the stop on: ~a); cut by the app side: ~a"
                                (jsexpr->string (hash-ref res 'by_status)) (jsexpr->string (hash-ref res 'errors))
                                refused closed (count-lines lines cut-rx)))
                  (if posts?
                      (list (post-load-text res stop-mix) (method-notes res))
                      '())
                  (list "memory and fds after: the pool is gone (0)"))))
  (add-row! r)
  (check! (and (eqv? status 0) (not (file-exists? (ctx-sock c))))
          (format "~a: exit status 0, socket file removed" name))
  (check! (<= failed unavoidable) (format "~a: every request the pool had taken was answered" name)))

;; ---------------------------------------------------------------------------------------
;; Soak.

(define (soak c seconds)
  (define s0 (snapshot c))
  (define mix "/hello=60,/cpu/2=10,/slow/50=10,/download/100000=10,/status=10")
  (define h (start-loadgen (ctx-bin c) #:url (url c "/") #:mix mix #:rate 300 #:seconds seconds #:timeout 30))
  (define up (start-loadgen (ctx-bin c) #:url (url c "/upload") #:method "POST" #:body-bytes (* 256 1024)
                            #:rate 10 #:seconds seconds #:timeout 30 #:seed 5))
  (define t0 (current-inexact-milliseconds))
  (define samples
    (let loop ([acc '()])
      (define t (/ (- (current-inexact-milliseconds) t0) 1000.0))
      (cond
        [(> t seconds) (reverse acc)]
        [else
         (define s (snapshot c))
         (printf "soak ~a s: memory ~a MiB, fds ~a\n" (~r t #:precision 0) (fmt-mb (car s)) (cdr s))
         (flush-output)
         (sleep 10)
         (loop (cons (list t (car s) (cdr s)) acc))])))
  (define res (loadgen-wait h))
  (define up-res (loadgen-wait up))
  (define s1 (settle c))
  (define failed (+ (non-200 res) (non-200 up-res)))
  ;; flat: after the first fifth (warm-up), the last fifth stays within 10% (or 8 MiB) of
  ;; the second fifth, and the descriptors within 8
  (define n (length samples))
  (define (window from to) (for/list ([s (in-list samples)] [i (in-naturals)]
                                      #:when (and (>= i (floor (* n from))) (< i (ceiling (* n to)))))
                             s))
  (define (mean xs) (if (null? xs) 0 (/ (apply + xs) (length xs))))
  (define early (window 0.2 0.4))
  (define late (window 0.8 1.0))
  (define mem-early (mean (map second early)))
  (define mem-late (mean (map second late)))
  (define fds-early (apply max 0 (map third early)))
  (define fds-late (apply max 0 (map third late)))
  (values res up-res samples s0 s1 failed mem-early mem-late fds-early fds-late mix))

;; ---------------------------------------------------------------------------------------
;; The results file.

(define (machine-lines)
  (define (cmd s) (string-trim (with-output-to-string (λ () (system s)))))
  (list (format "- date: ~a" (cmd "date -u '+%Y-%m-%d %H:%M UTC'"))
        (format "- machine: ~a cores, ~a; ~a" (cmd "nproc") (cmd "uname -sr")
                (cmd "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"))
        (format "- ~a; ~a; load average before the run: ~a"
                (cmd "racket --version") (cmd "/usr/sbin/nginx -v 2>&1") (cmd "cut -d' ' -f1-3 /proc/loadavg"))
        (format "- the pool: `raco fastcgi serve tests/reliability/app.rkt ~a` on a unix socket; nginx 1 worker, upstream keepalive 64 (idle 2 s), fastcgi_keep_conn on"
                (string-join serve-options))))

(define (row->md r)
  (format "| ~a | ~a | ~a | ~a | ~a | ~a | ~a / ~a / ~a | ~a → ~a | ~a → ~a |"
          (row-name r) (row-sent r) (row-expected r)
          (- (row-sent r) (row-failed r)) (row-failed r) (row-unavoidable r)
          (fmt-ms (row-p50 r)) (fmt-ms (row-p99 r)) (fmt-ms (row-max r))
          (fmt-mb (row-mem0 r)) (fmt-mb (row-mem1 r)) (row-fds0 r) (row-fds1 r)))

;; replace-section : path string string -> void ; between <!-- NAME --> markers
(define (replace-section! file name text)
  (define begin-m (format "<!-- ~a -->" name))
  (define end-m (format "<!-- /~a -->" name))
  (define old (if (file-exists? file) (file->string file)
                  "# Reliability results\n\n<!-- reliability -->\n<!-- /reliability -->\n\n<!-- soak -->\n<!-- /soak -->\n"))
  (define rx (regexp (string-append (regexp-quote begin-m) "(?s:.*)" (regexp-quote end-m))))
  (define new-block (string-append begin-m "\n" text "\n" end-m))
  (display-to-file (if (regexp-match? rx old)
                       (regexp-replace rx old (regexp-replace-quote new-block))
                       (string-append old "\n" new-block "\n"))
                   file #:exists 'truncate))

(define (write-reliability! file command)
  (replace-section!
   file "reliability"
   (string-join
    (append
     (list "## `make reliability`" ""
           (format "Command: `~a`" command) "")
     (machine-lines)
     (list ""
           "Latency is from when each request was due (open loop), in ms: p50 / p99 / max. Memory is the resident memory of the manager and its workers together, and fds their open descriptors, before the scenario and 3.5 s after it (nginx closes its idle connections to the app after 2 s)."
           ""
           "| scenario | sent | expected | as expected | failed | of which unavoidable | latency ms | memory MiB | fds |"
           "|---|---|---|---|---|---|---|---|---|")
     (map row->md rows)
     (list "" "Notes per scenario:" "")
     (append* (for/list ([r (in-list rows)])
                (cons (format "- **~a**" (row-name r))
                      (map (λ (n) (string-append "  - " n)) (row-notes r)))))
     (list "" "Checks:" "")
     (for/list ([c (in-list checks)]) (format "- ~a ~a" (if (car c) "pass:" "**FAIL:**") (cdr c))))
    "\n")))

;; ---------------------------------------------------------------------------------------

(define (call-with-ctx proc)
  (call-with-temp-dir
   "fcgi-rel"
   (λ (dir)
     (printf "building the load generator...\n") (flush-output)
     (define bin (build-loadgen! dir))
     (define c (ctx dir (path->string (build-path dir "app.sock")) (path->string (build-path dir "manager.pid"))
                    #f (car (free-ports 1)) #f bin))
     (dynamic-wind
      void
      (λ ()
        (start-pool! c)
        (start-front! c)
        ;; warm the app and nginx's connections
        (run-loadgen bin #:url (url c "/hello") #:rate 200 #:seconds 2)
        (proc c))
      (λ ()
        (when (ctx-front c) (stop-process! (ctx-front c)))
        (when (ctx-manager c) (stop-process! (ctx-manager c) #:timeout 30))
        ;; RELIABILITY_LOGS=DIR keeps the pool's and nginx's logs of the run
        (define keep (getenv "RELIABILITY_LOGS"))
        (when keep
          (make-directory* keep)
          (for ([f (in-list (list* "manager.stderr" "nginx-error.log" (map path->string (old-manager-logs c))))]
                #:when (file-exists? (build-path dir f)))
            (copy-file (build-path dir f) (build-path keep f) #t))))))))

;; raco test loads every file under tests/: this one runs only as a program
(module test racket/base)

(module+ main
  (define only #f)
  (define soak-seconds #f)
  (define results-file default-results)
  (command-line
   #:program "reliability"
   #:once-each
   [("--scale") f "Multiply every duration by F (default 1; at least 3 s each)"
    (scale (string->number f))]
   [("--only") names "Run only these scenarios: steady100,steady1000,overload,kill,raise,hang,upload,download,front,reload,reload-post,recycle-post,stop,stop-post"
    (set! only (string-split names ","))]
   [("--soak") seconds "Run the soak for SECONDS instead of the scenarios"
    (set! soak-seconds (string->number seconds))]
   [("--results") file "Write the results here (default tests/reliability/RESULTS.md)"
    (set! results-file file)])
  (define command
    (string-join (cons "racket tests/reliability/run.rkt"
                       (vector->list (current-command-line-arguments)))))
  (define (run? name) (or (not only) (member name only)))
  (cond
    [soak-seconds
     (call-with-ctx
      (λ (c)
        (define-values (res up-res samples s0 s1 failed mem-early mem-late fds-early fds-late mix)
          (soak c soak-seconds))
        (define mem-ok? (<= mem-late (max (* 1.10 mem-early) (+ mem-early 8192))))
        (define fds-ok? (<= fds-late (+ fds-early 8)))
        (printf "soak: ~a requests and ~a uploads, ~a not 200; memory ~a -> ~a MiB; fds ~a -> ~a\n"
                (hash-ref res 'sent) (hash-ref up-res 'sent) failed
                (fmt-mb mem-early) (fmt-mb mem-late) fds-early fds-late)
        (replace-section!
         results-file "soak"
         (string-join
          (append
           (list (format "## Soak: ~a s (`make soak` runs an hour)" soak-seconds) ""
                 (format "Command: `~a`" command) "")
           (machine-lines)
           (list ""
                 (format "Load: ~a at 300 req/s, and 256 KiB uploads to /upload at 10 req/s, both for ~a s."
                         mix soak-seconds)
                 ""
                 (format "- requests: ~a sent, ~a answered 200 (~a), p50 ~a ms, p99 ~a ms, max ~a ms"
                         (hash-ref res 'sent) (status-count res '|200|)
                         (nines (status-count res '|200|) (hash-ref res 'sent))
                         (fmt-ms (lat res 'p50)) (fmt-ms (lat res 'p99)) (fmt-ms (lat res 'max)))
                 (format "- uploads: ~a sent, ~a answered 200" (hash-ref up-res 'sent) (status-count up-res '|200|))
                 (format "- memory of the pool (manager and workers), mean of the second fifth of the run: ~a MiB; of the last fifth: ~a MiB: ~a"
                         (fmt-mb mem-early) (fmt-mb mem-late) (if mem-ok? "flat (within 10% or 8 MiB)" "**GREW**"))
                 (format "- open descriptors, most in the second fifth: ~a; in the last fifth: ~a: ~a"
                         fds-early fds-late (if fds-ok? "flat" "**GREW**"))
                 ""
                 "| s | memory MiB | fds |" "|---|---|---|")
           (for/list ([s (in-list samples)])
             (format "| ~a | ~a | ~a |" (~r (first s) #:precision 0) (fmt-mb (second s)) (third s))))
          "\n"))
        (printf "wrote ~a\n" results-file)
        (unless (and mem-ok? fds-ok? (zero? failed)) (exit 1))))]
    [else
     (call-with-ctx
      (λ (c)
        (when (run? "steady100") (steady c 100))
        (when (run? "steady1000") (steady c 1000))
        (when (run? "overload") (overload c))
        (when (run? "kill") (fault-kill c))
        (when (run? "raise") (fault-side c "handler raises" "/raise" 20 '|500|))
        (when (run? "hang") (fault-side c "handler hangs (--request-timeout 2)" "/hang" 2 '|503|))
        (when (run? "upload")
          (fault-disconnect c "clients leave mid-upload" (λ (c) (abandon-upload c (* 8 1024 1024) (* 1024 1024)))
                            20 "each declared 8 MiB, sent 1 MiB and closed"))
        (when (run? "download")
          (fault-disconnect c "clients leave mid-download" (λ (c) (abandon-download c 100000000 (* 1024 1024)))
                            20 "each asked for 100 MB, read 1 MiB and closed"))
        (when (run? "front") (fault-front-restart c))
        (when (run? "reload") (fault-reload c))
        (when (run? "reload-post") (fault-reload-post c))
        (when (run? "recycle-post")
          ;; about 8 recycles in the run, whatever its scale
          (define max-requests (number->string (max 200 (exact-round (/ (* post-rate (secs 15)) 8)))))
          (fault-recycle-post c "recycling by --max-requests under POSTs" (list "--max-requests" max-requests)
                              (format "each worker after ~a requests" max-requests))
          ;; 24 MiB above what a worker holds once warm; /leak/256 alongside, 600 of them
          ;; in the run whatever its scale (150 MiB kept), passes it a few times a worker.
          ;; The hard ceiling (twice --max-memory by default) is set above what the whole
          ;; leak could add to one worker: this scenario is the graceful recycle. A forked
          ;; worker's private memory is not settled until its first major collections copy
          ;; the image it inherited (after a light load 1 to 3 MiB of it; 25 to 45 once
          ;; collected, with no leak), so workers draining behind their replacements would
          ;; pass a ceiling of twice the limit and be cut with requests in flight.
          (define warm-mib (worker-rss-mib c))
          (define max-memory (format "~am" (+ warm-mib 24)))
          (define max-memory-hard (format "~am" (+ warm-mib 24 160)))
          (fault-recycle-post c "recycling by --max-memory under POSTs"
                              (list "--max-memory" max-memory "--max-memory-hard" max-memory-hard)
                              (format "the workers of the pool before held ~a MiB at most; /leak/256 keeps 256 KiB a request" warm-mib)
                              #:leak (cons "/leak/256" (/ 600.0 (secs 15)))))
        (when (run? "stop") (fault-stop c))
        (when (run? "stop-post") (fault-stop c #:posts? #t))))
     (write-reliability! results-file command)
     (printf "wrote ~a\n" results-file)
     (unless (andmap car checks) (exit 1))]))
