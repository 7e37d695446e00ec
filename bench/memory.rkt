#lang racket/base
;; Memory per process, as PSS (the Pss: line of /proc/PID/smaps_rollup): our manager, a
;; raw worker, a servlet worker, a pool of four servlet workers, php-fpm's pool and the C
;; responder, each read after a few requests sent straight to the backend's socket and a
;; second idle, beside the floor of any Racket process (bench/apps/idle-base.rkt).
;; `make bench` runs it as its memory scenario (bench/run.rkt, into RESULTS.md);
;; `racket bench/memory.rkt` runs it alone and prints the markdown section.
(require json
         racket/file
         racket/format
         racket/list
         racket/string
         "../fastcgi/client.rkt"
         "../tests/integration/lib.rkt"
         "harness.rkt"
         "measure.rkt")
(provide (struct-out mem-row)
         memory-rows
         memory-markdown)

;; Requests sent to each backend before it is measured, and the idle time after them.
(define request-count 20)
(define idle-seconds 1)
;; Rounds of request-count requests sent to a pool until each of its workers served one.
(define max-batches 5)

(define hello-raw "examples/hello-raw.rkt")
(define hello-servlet "examples/hello.rkt")
(define idle-base "bench/apps/idle-base.rkt")

;; A line of the table: a key, a label, the PSS in KiB of each process measured ('() when
;; not measured), the most one process may hold in MiB (#f: no target), and a note.
(struct mem-row (key label pss target note) #:transparent)

;; ---------------------------------------------------------------------------------------
;; Measuring.

;; send-requests! : string (listof (cons string string)) -> void
;; request-count GETs of /, each on its own connection, in four threads (so that a pool's
;; processes share them); each must answer 200 with hello world.
(define (send-requests! address extra)
  (define (one)
    (define-values (status headers body)
      (fastcgi-request address #:uri "/" #:params-extra extra #:timeout 10))
    (unless (and (= status 200) (equal? body hello-body))
      (error 'bench "~a answered ~a ~s to GET /" address status body)))
  (define failure #f)
  (define threads
    (for/list ([t (in-range 4)])
      (thread (λ ()
                (with-handlers ([exn:fail? (λ (e) (set! failure e))])
                  (for ([_ (in-range (quotient request-count 4))]) (one)))))))
  (for ([t (in-list threads)])
    (unless (sync/timeout 60 t)
      (kill-thread t)
      (error 'bench "requests to ~a took over 60 s" address)))
  (when failure (raise failure)))

;; worker-requests : path-string -> (or/c #f (listof natural))
;; Requests served by each worker, from the manager's status file; #f when unreadable.
(define (worker-requests status-file)
  (define board
    (with-handlers ([exn:fail? (λ (e) #f)]) (call-with-input-file status-file read-json)))
  (and (hash? board)
       (for/list ([w (in-list (hash-ref board 'workers '()))]) (hash-ref w 'requests 0))))

;; serve-pool! : string string natural -> (listof natural)
;; Batches of requests until every worker has served one (the status file, rewritten now
;; and then, is polled for up to 3 s after each batch), at most max-batches of them;
;; returns the requests each worker served, as last seen.
(define (serve-pool! address status-file n)
  (let loop ([batch 1])
    (send-requests! address '())
    (define seen
      (let poll ([tries 0])
        (define counts (worker-requests status-file))
        (cond
          [(and counts (= (length counts) n) (andmap positive? counts)) counts]
          [(< tries 30) (sleep 0.1) (poll (add1 tries))]
          [else (or counts '())])))
    (if (or (and (= (length seen) n) (andmap positive? seen)) (= batch max-batches))
        seen
        (loop (add1 batch)))))

;; pool-pss : path string string natural -> (values (listof (listof natural)) string)
;; raco fastcgi serve app --workers n on address: once every worker is ready, requests
;; (serve-pool!), a second idle, then the manager's PSS (its pid from --pid-file: raco
;; exec()s into racket) and its workers' (its children). The note gives the requests each
;; worker served, as the status file last showed them.
(define (pool-pss dir app address n)
  (define p (ours app address (list "--workers" (number->string n))))
  (define pid-file (cadr (member "--pid-file" (peer-args p))))
  (define status-file (string-append pid-file ".status.json"))
  (dynamic-wind
   void
   (λ ()
     (call-with-peers
      dir (list p)
      (λ (procs)
        (define served (serve-pool! address status-file n))
        (sleep idle-seconds)
        (define manager (string->number (string-trim (file->string pid-file))))
        (unless manager (error 'bench "no pid in ~a" pid-file))
        (define workers (cdr (tree-pids manager)))
        (unless (= (length workers) n)
          (error 'bench "~a workers expected under the manager, found ~a" n (length workers)))
        (values (list (list (pss-kb manager)) (map pss-kb workers))
                (format "requests per worker: ~a~a"
                        (if (null? served) "unknown" (string-join (map ~a served) ", "))
                        (if (and (pair? served) (andmap positive? served)) "" "; a worker served none"))))))
   (λ ()
     (for ([f (list pid-file status-file)])
       (with-handlers ([exn:fail? void]) (when (file-exists? f) (delete-file f)))))))

;; peer-pss : path peer (listof (cons string string)) -> (listof natural)
;; The peer started, request-count requests, a second idle, then the PSS of its process
;; and of its descendants (php-fpm's master first, then its children).
(define (peer-pss dir p extra)
  (call-with-peers
   dir (list p)
   (λ (procs)
     (send-requests! (car (peer-addresses p)) extra)
     (sleep idle-seconds)
     (map pss-kb (tree-pids (proc-pid (car procs)))))))

;; baseline-pss : path -> (listof natural) ; idle-base.rkt's PSS, a second after "ready"
(define (baseline-pss dir)
  (define args (list (path->string (simplify-path (build-path repo-dir idle-base)))))
  (log-command! racket args)
  (call-with-process
   "idle-base" (string->path racket) args #:dir dir #:stdout-pipe? #t
   (λ (p)
     (define line (read-line/timeout (proc-stdout p) 30 "idle-base.rkt to start"))
     (unless (equal? line "ready") (error 'bench "idle-base.rkt said ~s" line))
     (sleep idle-seconds)
     (list (pss-kb (proc-pid p))))))

;; attempt : (listof (list symbol string (or/c real #f))) (-> (values list string))
;;           -> (listof mem-row)
;; One row per spec (key, label, target) from thunk's PSS lists, in order; its note goes
;; to the last row (a pool's workers); a failure becomes each row's note.
(define (attempt specs thunk)
  (with-handlers ([exn:fail? (λ (e)
                               (say "memory, ~a: FAILED: ~a" (cadr (car specs)) (exn-message e))
                               (for/list ([s (in-list specs)])
                                 (mem-row (car s) (cadr s) '() (caddr s)
                                          (format "failed: ~a" (string-replace (exn-message e) "\n" " ")))))])
    (define-values (psss note) (thunk))
    (for/list ([s (in-list specs)] [pss (in-list psss)] [i (in-naturals 1)])
      (say "memory, ~a: PSS ~a MiB" (cadr s) (string-join (map fmt-mib pss) ", "))
      (mem-row (car s) (cadr s) pss (caddr s) (if (= i (length specs)) note "")))))

;; compile-apps! : -> void ; the Racket programs measured, compiled (a module compiled in
;; memory at start-up would load the compiler into the process)
(define (compile-apps!)
  (define files (for/list ([f (list idle-base hello-raw hello-servlet)])
                  (path->string (simplify-path (build-path repo-dir f)))))
  (log-command! raco (cons "make" files))
  (define-values (st out err) (run-program (string->path raco) (cons "make" files) #:timeout 300))
  (unless (eqv? st 0) (error 'bench "raco make failed:\n~a" err)))

;; memory-rows : path #:c-address string #:php-address string #:ours-address string
;;               -> (listof mem-row)
;; dir holds the C responder (build-c!) and php-fpm's files (write-php-files!) for the
;; unix socket of php-address.
(define (memory-rows dir #:c-address c-address #:php-address php-address
                     #:ours-address ours-address)
  (compile-apps!)
  (define script `(("SCRIPT_FILENAME" . ,(path->string (build-path dir "php" "hello.php")))))
  (define (alone thunk) (λ () (values (list (thunk)) "")))
  (append
   (attempt '((baseline "Racket's floor: racket/base alone, idle (apps/idle-base.rkt)" #f))
            (alone (λ () (baseline-pss dir))))
   (attempt '((manager "ours: the manager (`serve examples/hello-raw.rkt --workers 2`)" 64)
              (raw-worker "ours: a raw worker (hello-raw.rkt, the same pool)" 75))
            (λ () (pool-pss dir hello-raw ours-address 2)))
   (attempt '((servlet-worker "ours: a servlet worker (`serve examples/hello.rkt --workers 2`)" 140))
            (λ () (let-values ([(psss note) (pool-pss dir hello-servlet ours-address 2)])
                    (values (cdr psss) note))))
   (attempt '((servlet-pool "ours: a servlet pool, manager and 4 workers (`--workers 4`)" #f))
            (λ () (let-values ([(psss note) (pool-pss dir hello-servlet ours-address 4)])
                    (values (list (append* psss)) note))))
   (attempt '((php "php-fpm static 4: master and 4 children" #f))
            (alone (λ () (peer-pss dir (php-peer dir php-address) script))))
   (attempt '((c "C responder" #f))
            (λ () (values (list (peer-pss dir (c-peer dir c-address) '()))
                          "17 MiB of it are its /1m and /16m answers, built at start-up")))))

;; ---------------------------------------------------------------------------------------
;; The section.

;; fmt-mib : natural -> string ; KiB shown in MiB
(define (fmt-mib kb) (~r (/ kb 1024.0) #:precision '(= 1)))

;; verdict : mem-row -> string
(define (verdict r)
  (cond
    [(not (mem-row-target r)) ""]
    [(null? (mem-row-pss r)) "not measured"]
    [(<= (/ (apply max (mem-row-pss r)) 1024.0) (mem-row-target r)) "PASS"]
    [else "**MISS**"]))

;; memory-markdown : (listof mem-row) -> string ; RESULTS.md's memory section
(define (memory-markdown rows)
  (define (line cells) (string-append "| " (string-join cells " | ") " |\n"))
  (string-append
   "## Memory per process (PSS)\n\n"
   "Each process's PSS: the `Pss:` line of `/proc/PID/smaps_rollup`, its resident pages "
   "with a page that k processes share counted 1/k in each (RSS counts it whole in each). "
   (format "It is read after ~a `GET /` sent straight to the backend's unix socket " request-count)
   "(fastcgi/client.rkt, each on its own connection, four at a time; no nginx) and a second "
   "idle. Ours run `raco fastcgi serve --workers N --log-level warning` (`raco` exec()s into "
   "racket, so the manager is one process, its pid from `--pid-file`; the workers are its "
   "children); requests are sent again, up to "
   (format "~a rounds, until the status file shows that every worker served one. " max-batches)
   "The first row is the floor any Racket process pays. The targets (issue 27) bound each "
   "process of the row.\n\n"
   (line (list "process" "processes" "PSS MiB, each" "PSS MiB, total" "target MiB, each" "result" "note"))
   (line (list "---" "---" "---" "---" "---" "---" "---"))
   (string-append*
    (for/list ([r (in-list rows)])
      (define pss (mem-row-pss r))
      (line (list (mem-row-label r)
                  (if (null? pss) "-" (number->string (length pss)))
                  (if (null? pss) "-" (string-join (map fmt-mib pss) ", "))
                  (if (null? pss) "-" (fmt-mib (apply + pss)))
                  (if (mem-row-target r) (format "<= ~a" (mem-row-target r)) "")
                  (verdict r)
                  (mem-row-note r)))))))

(module+ main
  (require racket/cmdline)
  (command-line
   #:usage-help "Measures PSS per process (make bench's memory scenario) and prints its markdown section.")
  (void (require-program! php-fpm "php8.2-fpm")
        (require-program! gcc "gcc"))
  (call-with-temp-dir
   "fcgimem"
   (λ (dir)
     (build-c! dir)
     (define php-socket (path->string (build-path dir "php.sock")))
     (write-php-files! dir php-socket)
     (define rows
       (memory-rows dir
                    #:c-address (format "unix:~a" (build-path dir "c.sock"))
                    #:php-address (string-append "unix:" php-socket)
                    #:ours-address (format "unix:~a" (build-path dir "ours.sock"))))
     (newline)
     (write-string (memory-markdown rows))
     (flush-output))))
