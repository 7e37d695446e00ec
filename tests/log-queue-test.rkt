#lang racket/base
;; Logging never blocks or grows without bound (HOSTILE.md 36), with `raco fastcgi serve`
;; for real: its stderr on a pipe that nobody reads while the app logs a lot (the worker
;; answers, its memory stays bounded, the status counts the dropped lines, and a line says
;; how many once the pipe is read); the access log on a stdout pipe that nobody reads (the
;; worker answers); the access log on a full disk (/dev/full: at most one error line a
;; second). Every wait is bounded; the loads are bounded in count.
(require racket/file
         racket/port
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define setpriv "/usr/bin/setpriv")

;; The app: a request for /chatty logs 40 warnings of 4000 characters on a topic of its
;; own (printed at warning and above); any other path answers at once.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define-logger chatty)\n"
   "(define filler (make-string 4000 #\\x))\n"
   "(define (fastcgi-handler r)\n"
   "  (when (regexp-match? #rx#\"^/chatty\" (fastcgi-param r \"REQUEST_URI\" #\"/\"))\n"
   "    (for ([i (in-range 40)]) (log-chatty-warning \"~a ~a\" i filler)))\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

;; call-with-serve : (listof string) #:stdout (or/c 'pipe path) #:stderr (or/c 'pipe path)
;;                   (proc (or/c input-port #f) (or/c input-port #f) string string -> any) -> any
;; `raco fastcgi serve app --workers 1` on a unix socket in a fresh folder, with the extra
;; options; stdout and stderr are pipes (given to body, which may leave them unread) or
;; files. body gets the process, the two pipes, the socket address and the status file.
(define (call-with-serve opts body #:stdout [stdout-to "stdout"] #:stderr [stderr-to "stderr"])
  (call-with-temp-dir
   "fcgi-logq"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define sock (path->string (build-path dir "app.sock")))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (display-to-file app-source app)
     (define (file-port to)
       (and (string? to) (open-output-file (build-path dir to) #:exists 'truncate)))
     (define out-file (file-port stdout-to))
     (define err-file (file-port stderr-to))
     (define-values (sp stdout stdin stderr)
       (parameterize ([current-subprocess-custodian-mode 'kill])
         (apply subprocess out-file #f err-file 'new setpriv "--pdeathsig" "KILL" "--" raco
                (append (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                              "--workers" "1" "--pid-file" pid-file)
                        opts))))
     (when out-file (close-output-port out-file))
     (when err-file (close-output-port err-file))
     (define p (proc "serve" sp (subprocess-pid sp) stdin #f #f
                     (and err-file (build-path dir stderr-to))))
     (dynamic-wind
      void
      (λ ()
        (wait-for-unix-socket sock 30)
        (define status-file (pid-file->status-file pid-file))
        (wait-until 60 "a ready worker" (λ () (pair? (ready-pids status-file))))
        (body p stdout stderr (string-append "unix:" sock) status-file))
      (λ ()
        (stop-process! p #:timeout 10)
        (when stdout (close-input-port stdout))
        (when stderr (close-input-port stderr)))))))

;; board : string -> hash ; the status the manager publishes (empty while unreadable)
(define (board status-file) (or (read-status-file status-file) (hasheq)))

;; ready-pids : string -> (listof natural)
(define (ready-pids status-file) (board-pids (board status-file) '("idle" "busy")))

;; load! : string natural string -> string
;; n requests one after the other, each bounded by 5 s; stops at the first that fails.
;; "N answered 200", then what the first failure was (a status or an exception's message).
(define (load! address n uri)
  (let loop ([k 0])
    (define st (and (< k n)
                    (with-handlers ([exn:fail? exn-message])
                      (define-values (status headers body) (fastcgi-request address #:uri uri #:timeout 5))
                      status)))
    (if (eqv? st 200)
        (loop (add1 k))
        (format "~a answered 200~a" k (if st (format ", then: ~a" st) "")))))

;; read-until : input-port regexp seconds -> (or/c string #f)
;; Reads lines until one matches; #f at the deadline or at the end of the port.
(define (read-until in rx secs)
  (define deadline (+ (current-inexact-milliseconds) (* 1000 secs)))
  (let loop ()
    (define left (/ (- deadline (current-inexact-milliseconds)) 1000))
    (define line (and (positive? left) (sync/timeout left (read-line-evt in 'linefeed))))
    (cond
      [(not (string? line)) #f]
      [(regexp-match? rx line) line]
      [else (loop)])))

(define dropped-rx #rx"log: [0-9]+ lines dropped while the log was not being read")

(test-case "stderr on a pipe nobody reads: the worker answers, its memory stays bounded, drops are counted"
  (call-with-serve
   '("--status-path" "/status")
   #:stderr 'pipe
   (λ (p stdout stderr address status-file)
     (define pid (car (ready-pids status-file)))
     (check-equal? (load! address 20 "/chatty") "20 answered 200" "warm-up")
     (define before (status-memory-kb pid 'VmRSS))
     ;; 250 requests log about 40 MB of text (160 MB as Racket strings) into a pipe of 64 KiB
     (check-equal? (load! address 250 "/chatty") "250 answered 200")
     (define growth (- (status-memory-kb pid 'VmRSS) before))
     (check-true (< growth (* 100 1024)) (format "the worker grew by ~a KiB" growth))
     (wait-until 5 "log_dropped on the status" (λ () (hash-ref (board status-file) 'log_dropped #f)))
     (check-true (positive? (hash-ref (board status-file) 'log_dropped)))
     (define (status-page query)
       (define-values (status headers body) (fastcgi-request address #:uri (string-append "/status" query) #:timeout 5))
       (bytes->string/utf-8 body #\?))
     (check-regexp-match #rx"log lines dropped: +[1-9]" (status-page ""))
     (check-regexp-match #rx"fastcgi_log_dropped_total{pool=\"app.rkt\"} [1-9]" (status-page "?openmetrics"))
     (check-regexp-match #rx"<th>log lines dropped</th><td>[1-9]" (status-page "?html"))
     ;; reading the pipe at last: the lines held back come out, then the count of the others
     (check-not-false (read-until stderr dropped-rx 20) "the dropped line"))))

(test-case "--access-log - with stdout on a pipe nobody reads: the worker answers"
  (call-with-serve
   '("--access-log" "-")
   #:stdout 'pipe
   (λ (p stdout stderr address status-file)
     ;; lines of 4 KB: 400 of them fill the pipe, then the log's queue
     (define uri (string-append "/" (make-string 4000 #\a)))
     (check-equal? (load! address 400 uri) "400 answered 200")
     (check-not-false (read-until stdout #rx"\"GET /aaaa" 10) "the access lines held back")
     ;; the rest read too: the writer gets through the lines it holds, then says how many
     ;; it dropped
     (thread (λ () (copy-port stdout (open-output-nowhere))))
     (check-not-false
      (wait-until 20 "the dropped line on stderr"
                  (λ () (regexp-match? #rx"log to standard output: [0-9]+ lines dropped while the log was not being read"
                                       (file->string (proc-stderr-file p)))))))))

(test-case "--access-log /dev/full: at most one error line a second"
  (call-with-serve
   '("--access-log" "/dev/full")
   (λ (p stdout stderr address status-file)
     (define start (current-inexact-milliseconds))
     (define uri (string-append "/" (make-string 1000 #\a)))
     (check-equal? (load! address 300 uri) "300 answered 200")
     (sleep 1.5)
     (define seconds (/ (- (current-inexact-milliseconds) start) 1000))
     (define errors
       (for/list ([l (in-list (string-split (file->string (proc-stderr-file p)) "\n"))]
                  #:when (regexp-match? #rx"cannot write /dev/full" l))
         l))
     (check-true (pair? errors) "the failure is logged")
     (check-true (<= (length errors) (add1 (ceiling seconds)))
                 (format "~a error lines in ~a s" (length errors) seconds)))))
