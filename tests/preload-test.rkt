#lang racket/base
;; Preloading under `raco fastcgi serve` for real (loader.rkt, fork.rkt, manager-loader.rkt,
;; child-process.rkt): by default a generation's loader (comm fastcgi-loader) loads the app
;; once and forks the workers (comm fastcgi-worker), which become the manager's own
;; children; --no-preload spawns workers that each load the app.
;;   - forked pools of a raw app and of a servlet answer; the status says preload "forked",
;;     each worker forked, its parent the manager; --no-preload: "off", not forked;
;;   - a forked servlet worker's memory is mostly shared, its private part small; without
;;     preloading each worker's private memory is the whole app;
;;   - the pseudo-random generator is reseeded in each forked worker: two workers' first
;;     draws differ, and differ from what the loader's generator would have drawn next;
;;   - the runtime's epoll set and wake-up pipe are each worker's own (pipe inodes, and
;;     kcmp(2) on the epoll descriptors), under the loader's numbers;
;;   - what a fork cannot share, left by loading (a SQLite connection, an open file, a
;;     child process, an OS thread), falls back to per-worker loads with one warning line
;;     naming it; the SQLite pool takes 200 concurrent inserts with an intact database;
;;     --preload forks all the same, with its own warning;
;;   - a loader killed after 10 s is replaced (loader_restarts 1) while the workers serve
;;     on; a worker killed then is replaced by a forked one; a loader killed while it loads
;;     at the first start: serve exits 1 ("cannot start");
;;   - an app that raises at load: serve exits 1 at once, with and without preloading;
;;   - a reload loads the new code in a new loader; the old loader goes.
;; Through a real nginx: integration/preload-nginx-test.rkt. Every wait is bounded; loads
;; are bounded in count and go to unix sockets only.
(module+ test
  (require db
           ffi/unsafe
           racket/file
           racket/list
           racket/port
           racket/string
           rackunit
           "../fastcgi/client.rkt"
           "../fastcgi/private/os/signals.rkt"
           "integration/lib.rkt"
           "lib/app-sources.rkt"
           "lib/serve.rkt")

  ;; -------------------------------------------------------------------------------------
  ;; The apps.

  ;; probe: each answer is (PID FIRST LOAD PREDICTED) as a Racket datum: the worker's pid;
  ;; the first three draws of the process's generator after the load (made at its first
  ;; request, then kept); three drawn at load; and the three the generator as it was at
  ;; the end of the load would give next (what a forked worker would draw if its generator
  ;; were not reseeded). The body is VERSION first: a reload can change it.
  (define (probe-source [version "v1"])
    (string-append
     "#lang racket/base\n"
     "(require ffi/unsafe fastcgi)\n"
     "(provide fastcgi-handler)\n"
     "(define getpid (get-ffi-obj \"getpid\" #f (_fun -> _int)))\n"
     "(define (draw3) (list (random 1000000000) (random 1000000000) (random 1000000000)))\n"
     "(define at-load (draw3))\n"
     "(define predicted\n"
     "  (parameterize ([current-pseudo-random-generator\n"
     "                  (vector->pseudo-random-generator\n"
     "                   (pseudo-random-generator->vector (current-pseudo-random-generator)))])\n"
     "    (draw3)))\n"
     "(define first-draws #f)\n"
     "(define (fastcgi-handler r)\n"
     "  (unless first-draws (set! first-draws (draw3)))\n"
     "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n" version " ~s\\n\"\n"
     "                        (list (getpid) first-draws at-load predicted))\n"
     "                (fastcgi-request-stdout r)))\n"))

  ;; A servlet (provide start, web-server/http) that answers its worker's pid.
  (define servlet-source
    (string-append
     "#lang racket/base\n"
     "(require ffi/unsafe web-server/http)\n"
     "(provide start)\n"
     "(define getpid (get-ffi-obj \"getpid\" #f (_fun -> _int)))\n"
     "(define (start req)\n"
     "  (response/output (λ (out) (write (list (getpid)) out)) #:mime-type #\"text/plain\"))\n"))

  ;; An app whose module level leaves something behind (more, a string of definitions);
  ;; it answers "ok PID". Files it names are next to it (define-runtime-path).
  (define (leaving-source requires more)
    (string-append
     "#lang racket/base\n"
     "(require ffi/unsafe fastcgi racket/runtime-path " requires ")\n"
     "(provide fastcgi-handler)\n"
     "(define getpid (get-ffi-obj \"getpid\" #f (_fun -> _int)))\n"
     more "\n"
     "(define (fastcgi-handler r)\n"
     "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\nok ~a\\n\" (getpid))\n"
     "                (fastcgi-request-stdout r)))\n"))

  (define file-source
    (leaving-source "" "(define-runtime-path held \"held.txt\")\n(define out (open-output-file held #:exists 'truncate))"))
  (define child-source
    (leaving-source "" "(define-values (sp o i e) (subprocess #f #f #f \"/bin/sleep\" \"30\"))"))
  (define os-thread-source
    (leaving-source "ffi/unsafe/os-thread"
                    "(define sema (make-os-semaphore))\n(call-in-os-thread (λ () (os-semaphore-wait sema)))"))

  ;; A SQLite connection made at module level; each request inserts its query string.
  (define sqlite-source
    (string-append
     "#lang racket/base\n"
     "(require db fastcgi racket/runtime-path)\n"
     "(provide fastcgi-handler)\n"
     "(define-runtime-path db-file \"app.db\")\n"
     "(define conn (sqlite3-connect #:database db-file #:mode 'create #:busy-retry-limit 600\n"
     "                              #:busy-retry-delay 0.05))\n"
     "(query-exec conn \"CREATE TABLE IF NOT EXISTS t (v TEXT NOT NULL)\")\n"
     "(define (fastcgi-handler r)\n"
     "  (query-exec conn \"INSERT INTO t (v) VALUES (?)\"\n"
     "              (bytes->string/utf-8 (fastcgi-param r \"QUERY_STRING\" #\"\")))\n"
     "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

  ;; Loading takes 4 s: long enough to kill the loader while it loads.
  (define slow-source
    (string-append
     "#lang racket/base\n(require fastcgi)\n(provide fastcgi-handler)\n(sleep 4)\n"
     "(define (fastcgi-handler r)\n"
     "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

  ;; -------------------------------------------------------------------------------------
  ;; Processes and the status.

  ;; board : served -> hash ; the status the manager publishes (empty while unreadable)
  (define (board s) (or (read-status-file (served-status-file s)) (hasheq)))

  ;; ready-workers : served -> (listof hash) ; idle or busy
  (define (ready-workers s)
    (for/list ([w (in-list (hash-ref (board s) 'workers '()))]
               #:when (member (hash-ref w 'state #f) '("idle" "busy")))
      w))

  ;; manager-pid : served -> natural ; from the pid file
  (define (manager-pid s) (string->number (string-trim (file->string (served-pid-file s)))))

  ;; proc-file : natural string -> (or/c string #f) ; /proc/PID/NAME, #f once it is gone
  (define (proc-file pid name)
    (with-handlers ([exn:fail? (λ (e) #f)]) (file->string (format "/proc/~a/~a" pid name))))

  ;; comm : natural -> (or/c string #f) ; the process's name (ps -o comm)
  (define (comm pid) (let ([c (proc-file pid "comm")]) (and c (string-trim c))))

  ;; ppid : natural -> (or/c natural #f)
  (define (ppid pid)
    (define m (let ([t (proc-file pid "status")]) (and t (regexp-match #px"(?m:^PPid:\\s+([0-9]+)$)" t))))
    (and m (string->number (cadr m))))

  ;; gone? : natural -> boolean ; no such process (exited and reaped)
  (define (gone? pid) (not (directory-exists? (format "/proc/~a" pid))))

  ;; stderr-text : served -> string ; what serve logged so far
  (define (stderr-text s) (file->string (proc-stderr-file (served-proc s))))

  ;; log-lines : served regexp -> (listof string) ; the lines of serve's stderr that match
  (define (log-lines s rx) (filter (λ (l) (regexp-match? rx l)) (string-split (stderr-text s) "\n")))

  (define c-kill (get-ffi-obj "kill" #f (_fun _int _int -> _int)))

  ;; get : served string -> (values natural string) ; one request on a fresh connection
  (define (get s uri)
    (define-values (status headers body) (fastcgi-request (served-address s) #:uri uri #:timeout 15))
    (values status (bytes->string/utf-8 body #\?)))

  ;; answer : served string -> (or/c list #f) ; a probe's answer (PID FIRST LOAD PREDICTED)
  ;; with its version checked, or the servlet's (PID)
  (define (answer s [version "v1"] #:uri [uri "/"])
    (define-values (status body) (get s uri))
    (check-equal? status 200 body)
    (define m (regexp-match #rx"^([a-z0-9]+) (.*)$" (string-trim body)))
    (cond
      [(not m) (with-input-from-string body read)]
      [else (check-equal? (cadr m) version body)
            (with-input-from-string (caddr m) read)]))

  ;; answers-by-pid : served natural (-> list) -> (hash pid answer)
  ;; Requests on fresh connections until n workers answered (at most 200 requests, 30 s);
  ;; the first answer of each.
  (define (answers-by-pid s n ask)
    (define deadline (+ (current-inexact-milliseconds) 30000))
    (let loop ([i 0] [seen (hash)])
      (cond
        [(or (>= (hash-count seen) n) (>= i 200) (> (current-inexact-milliseconds) deadline)) seen]
        [else
         (define a (ask))
         (loop (add1 i) (if (hash-ref seen (car a) #f) seen (hash-set seen (car a) a)))])))

  ;; check-forked-pool : served natural -> void
  ;; n ready workers, each forked, named fastcgi-worker and the manager's child; the loader
  ;; named fastcgi-loader and the manager's child too.
  (define (check-forked-pool s n)
    (define mgr (manager-pid s))
    (define b (board s))
    (define ws (ready-workers s))
    (check-equal? (hash-ref b 'preload #f) "forked")
    (check-equal? (length ws) n)
    (for ([w (in-list ws)])
      (define pid (hash-ref w 'pid))
      (check-equal? (hash-ref w 'forked 'missing) #t (format "worker ~a" pid))
      (check-equal? (comm pid) "fastcgi-worker" (format "worker ~a" pid))
      (check-equal? (ppid pid) mgr (format "worker ~a's parent" pid)))
    (define loader (hash-ref b 'loader_pid #f))
    (check-true (exact-positive-integer? loader) (format "loader_pid ~s" loader))
    (when (exact-positive-integer? loader)
      (check-equal? (comm loader) "fastcgi-loader")
      (check-equal? (ppid loader) mgr "the loader's parent")
      (check-false (member loader (map (λ (w) (hash-ref w 'pid)) ws)) "the loader is no worker")))

  ;; check-unforked-pool : served natural string -> void
  ;; n ready workers, none forked, each the manager's child; the status's preload; no loader.
  (define (check-unforked-pool s n preload)
    (define mgr (manager-pid s))
    (define ws (ready-workers s))
    (check-equal? (hash-ref (board s) 'preload #f) preload)
    ;; no loader serves: the one that found what a fork cannot share has exited
    (check-equal? (hash-ref (board s) 'loader_pid 'missing) 'null)
    (check-equal? (hash-ref (board s) 'image_memory 'missing) 'null)
    (check-equal? (length ws) n)
    (for ([w (in-list ws)])
      (define pid (hash-ref w 'pid))
      (check-equal? (hash-ref w 'forked 'missing) #f (format "worker ~a" pid))
      (check-equal? (ppid pid) mgr (format "worker ~a's parent" pid))))

  ;; with-pool : string (listof string) natural (served -> any) -> any
  (define (with-pool source opts n body #:name [name "fcgi-preload"])
    (call-with-served-app source opts body #:name name #:ready n))

  ;; -------------------------------------------------------------------------------------
  ;; Descriptors of another process.

  ;; fd-links : natural -> (listof (cons fd string)) ; what each descriptor refers to
  (define (fd-links pid)
    (define dir (format "/proc/~a/fd" pid))
    (sort (for*/list ([p (in-list (directory-list dir))]
                      [fd (in-value (string->number (path->string p)))]
                      #:when fd
                      [to (in-value (with-handlers ([exn:fail? (λ (e) #f)])
                                      (path->string (resolve-path (build-path dir p)))))]
                      #:when to)
            (cons fd to))
          < #:key car))

  ;; runtime-epoll : (listof (cons fd string)) -> (or/c fd #f) ; the lowest-numbered epoll set
  (define (runtime-epoll links)
    (for/first ([l (in-list links)] #:when (equal? (cdr l) "anon_inode:[eventpoll]")) (car l)))

  ;; pipe-pairs : (listof (cons fd string)) -> (listof (list string fd fd))
  ;; The pipes of which the process holds both ends: (inode-link fd fd)
  (define (pipe-pairs links)
    (for/list ([g (in-list (group-by cdr (filter (λ (l) (regexp-match? #rx"^pipe:" (cdr l))) links)))]
               #:when (= 2 (length g)))
      (list (cdar g) (car (first g)) (car (second g)))))

  ;; kcmp-file : natural natural fd fd -> integer
  ;; kcmp(2) KCMP_FILE: 0 when the two descriptors are one open file description, 1-3
  ;; when not, -1 on error. SYS_kcmp is 312 on x86_64.
  (define c-syscall (get-ffi-obj "syscall" #f (_fun _long _long _long _long _long _long -> _long)))
  (define (kcmp-file pid1 pid2 fd1 fd2) (c-syscall 312 pid1 pid2 0 fd1 fd2))

  ;; fd-of : (listof (cons fd string)) string -> (or/c fd #f) ; the first that refers to link
  (define (fd-of links link) (for/first ([l (in-list links)] #:when (equal? (cdr l) link)) (car l)))

  ;; set-count* : list -> natural ; how many distinct
  (define (set-count* xs) (length (remove-duplicates xs)))

  ;; The loader's and workers' pids of a pool, kept for a check once it is stopped.
  (define stopped-pids '())

  ;; -------------------------------------------------------------------------------------
  ;; 1, 3, 4. A raw app, forked: the pool; random draws; the runtime's descriptors.

  (test-case "raw app, default: forked workers of the manager; each draws its own randoms; fresh runtime descriptors"
    (with-pool
     (probe-source) '("--workers" "2") 2
     (λ (s)
       (check-forked-pool s 2)
       (check-equal? (length (log-lines s #rx"generation 1 loaded once by loader [0-9]+ \\(a heap of [0-9]+ MiB, shared\\): forking its workers")) 1
                     (stderr-text s))
       (check-equal? (log-lines s #rx"cannot share") '())
       ;; 3. both workers' first draws: they differ from each other, from the draws made
       ;; at load, and from what the loader's generator would have drawn next
       (define by-pid (answers-by-pid s 2 (λ () (answer s))))
       (check-equal? (hash-count by-pid) 2 (format "answers from ~a worker(s) in 200 requests" (hash-count by-pid)))
       (check-equal? (sort (hash-keys by-pid) <) (sort (map (λ (w) (hash-ref w 'pid)) (ready-workers s)) <)
                     "the answers came from the status's workers")
       (when (= (hash-count by-pid) 2)
         (define-values (a b) (apply values (hash-values by-pid)))
         (define (first-draws x) (second x))
         (define (load-draws x) (third x))
         (define (predicted x) (fourth x))
         (check-equal? (load-draws a) (load-draws b) "the load happened once (the draws at load are the loader's)")
         (check-equal? (predicted a) (predicted b))
         (check-not-equal? (first-draws a) (first-draws b) (format "two workers drew the same: ~s" (first-draws a)))
         (for ([x (list a b)])
           (check-not-equal? (first-draws x) (load-draws x))
           (check-not-equal? (first-draws x) (predicted x)
                             (format "worker ~a drew what the loader's generator gives next: not reseeded" (car x)))))
       ;; 4. the runtime's epoll set and wake-up pipe: each worker's own, under the
       ;; loader's numbers; the listening socket, shared on purpose, is the control
       (define loader (hash-ref (board s) 'loader_pid))
       (define workers (map (λ (w) (hash-ref w 'pid)) (ready-workers s)))
       (define l-links (fd-links loader))
       (define l-epoll (runtime-epoll l-links))
       (define l-pipes (pipe-pairs l-links))
       (check-true (exact-integer? l-epoll) (format "the loader's descriptors: ~s" l-links))
       (check-true (pair? l-pipes) (format "the loader's descriptors: ~s" l-links))
       (define w-links (map fd-links workers))
       ;; the listening socket: the one socket the loader and both workers hold
       (define shared-sockets
         (for/list ([l (in-list l-links)]
                    #:when (regexp-match? #rx"^socket:" (cdr l))
                    #:when (andmap (λ (links) (fd-of links (cdr l))) w-links))
           l))
       (check-equal? (length shared-sockets) 1 (format "the sockets the loader and the workers share: ~s" shared-sockets))
       (define l-listen (and (pair? shared-sockets) (cdar shared-sockets)))
       (define l-listen-fd (and (pair? shared-sockets) (caar shared-sockets)))
       (define w-epolls (map runtime-epoll w-links))
       (for ([pid (in-list workers)] [links (in-list w-links)] [ep (in-list w-epolls)])
         (define what (format "worker ~a: ~s" pid links))
         (check-equal? ep l-epoll (format "the runtime's epoll set under the loader's number; ~a" what))
         (for ([lp (in-list l-pipes)])
           (define r (assv (second lp) links))
           (define w (assv (third lp) links))
           (check-true (and r w (regexp-match? #rx"^pipe:" (cdr r)) (equal? (cdr r) (cdr w)) #t)
                       (format "the wake-up pipe's two ends under the loader's numbers ~a, ~a; ~a" (second lp) (third lp) what))
           (when (and r w)
             (check-not-equal? (cdr r) (first lp) (format "the loader's wake-up pipe ~a; ~a" (first lp) what))))
         ;; the control: kcmp says 0 for what is shared
         (define w-listen (and l-listen (fd-of links l-listen)))
         (check-true (exact-integer? w-listen) (format "the listening socket ~a; ~a" l-listen what))
         (when (exact-integer? w-listen)
           (check-equal? (kcmp-file pid loader w-listen l-listen-fd) 0 "kcmp: the listening socket is shared"))
         (when (and ep l-epoll)
           (check-true (and (memv (kcmp-file pid loader ep l-epoll) '(1 2 3)) #t)
                       (format "kcmp: worker ~a's epoll set is not the loader's (~a)" pid (kcmp-file pid loader ep l-epoll)))))
       (define w-pipes (map (λ (links) (map first (pipe-pairs links))) w-links))
       (check-true (andmap pair? w-pipes) (format "each worker holds a pipe's two ends: ~s" w-pipes))
       (check-equal? (set-count* (append* w-pipes)) (length (append* w-pipes))
                     (format "the workers' pipes are each their own: ~s" w-pipes))
       (check-false (ormap (λ (p) (member p (map first l-pipes))) (append* w-pipes))
                    (format "no worker holds the loader's pipe ~s: ~s" l-pipes w-pipes))
       (when (andmap values w-epolls)
         (define k (kcmp-file (first workers) (second workers) (first w-epolls) (second w-epolls)))
         (check-true (and (memv k '(1 2 3)) #t) (format "kcmp: the two workers' epoll sets are not one (~a)" k)))
       ;; the pool is stopped after this: its workers (own process groups) and loader too
       (set! stopped-pids (cons loader workers))))
    ;; (a forked worker is in a process group of its own: the test's kill of serve's group
    ;; does not reach it; the manager stops it)
    (check-equal? (length stopped-pids) 3)
    (for ([pid (in-list stopped-pids)])
      (check-not-exn (λ () (wait-until 5 (format "process ~a (~a) to end with the pool" pid (comm pid))
                                       (λ () (gone? pid)))))))

  (test-case "raw app, --no-preload: workers of their own, not forked"
    (with-pool
     (probe-source) '("--workers" "2" "--no-preload") 2
     (λ (s)
       (check-unforked-pool s 2 "off")
       (check-equal? (log-lines s #rx"loaded once by loader") '())
       (define by-pid (answers-by-pid s 2 (λ () (answer s))))
       (check-equal? (hash-count by-pid) 2))))

  ;; -------------------------------------------------------------------------------------
  ;; 1, 2. A servlet, forked; its memory.

  ;; memory-ready : served -> (or/c (listof hash) #f) ; the ready workers once every one's
  ;; memory figures are read
  (define (memory-ready s n)
    (wait-until 20 "the workers' memory figures"
                (λ () (let ([ws (ready-workers s)])
                        (and (= (length ws) n)
                             (andmap (λ (w) (for/and ([k '(memory private_memory shared_memory)])
                                              (exact-positive-integer? (hash-ref w k #f))))
                                     ws)
                             ws)))))

  (define MiB (* 1024 1024))

  (test-case "servlet, default: forked workers; each mostly shares its memory"
    (with-pool
     servlet-source '("--workers" "2") 2
     (λ (s)
       (check-forked-pool s 2)
       (define by-pid (answers-by-pid s 2 (λ () (answer s))))
       (check-equal? (sort (hash-keys by-pid) <) (sort (map (λ (w) (hash-ref w 'pid)) (ready-workers s)) <))
       (define ws (memory-ready s 2))
       (check-true (exact-positive-integer? (hash-ref (board s) 'image_memory #f)) "image_memory")
       (for ([w (in-list ws)])
         (define private (hash-ref w 'private_memory))
         (define shared (hash-ref w 'shared_memory))
         (define what (format "worker ~a: private ~a MiB, shared ~a MiB, resident ~a MiB" (hash-ref w 'pid)
                              (quotient private MiB) (quotient shared MiB) (quotient (hash-ref w 'memory) MiB)))
         (check-true (> shared private) what)
         (check-true (< private (* 60 MiB)) what)))))

  (test-case "--max-memory applies to private memory: a forked worker's shared image does not count"
    ;; resident memory over the limit, private memory far under it: no recycling
    (with-pool
     servlet-source '("--workers" "1" "--max-memory" "80m") 1
     (λ (s)
       (define w (car (memory-ready s 1)))
       (define what (format "resident ~a MiB, private ~a MiB" (quotient (hash-ref w 'memory) MiB)
                            (quotient (hash-ref w 'private_memory) MiB)))
       (check-true (> (hash-ref w 'memory) (* 80 MiB)) what)
       (check-true (< (hash-ref w 'private_memory) (* 80 MiB)) what)
       (answer s)
       (sleep 3)                                  ; the manager reads memory at every tick
       (check-equal? (hash-ref (board s) 'recycled) 0 what)
       (check-equal? (map (λ (x) (hash-ref x 'pid)) (ready-workers s)) (list (hash-ref w 'pid)))
       (check-equal? (log-lines s #rx"over --max-memory") '()))))

  (test-case "servlet, --no-preload: each worker's memory is its own"
    (with-pool
     servlet-source '("--workers" "2" "--no-preload") 2
     (λ (s)
       (check-unforked-pool s 2 "off")
       (define by-pid (answers-by-pid s 2 (λ () (answer s))))
       (check-equal? (hash-count by-pid) 2)
       (for ([w (in-list (memory-ready s 2))])
         (define private (hash-ref w 'private_memory))
         (check-true (> private (* 80 MiB))
                     (format "worker ~a: private ~a MiB, shared ~a MiB" (hash-ref w 'pid)
                             (quotient private MiB) (quotient (hash-ref w 'shared_memory) MiB)))))))

  ;; -------------------------------------------------------------------------------------
  ;; 5, 6. What a fork cannot share.

  (define cannot-share-rx #rx"loading the app left what a fork cannot share")

  ;; check-fallback : served regexp natural -> void
  ;; One warning line, which names what; the pool serves, its workers not forked.
  (define (check-fallback s what n)
    (define lines (log-lines s cannot-share-rx))
    (check-equal? (length lines) 1 (stderr-text s))
    (check-regexp-match
     (regexp (string-append "warning .*generation 1: loading the app left what a fork cannot share \\(.*"
                            (object-name what) ".*\\): each worker loads the app itself"))
     (if (pair? lines) (car lines) ""))
    (check-unforked-pool s n "unsafe")
    (define by-pid (answers-by-pid s n (λ () (let-values ([(st body) (get s "/")])
                                                (check-equal? st 200 body)
                                                (list (string->number (cadr (string-split (string-trim body)))))))))
    (check-equal? (hash-count by-pid) n))

  (test-case "a SQLite connection at load: one warning naming the file; 200 concurrent inserts, each once, database intact"
    (with-pool
     sqlite-source '("--workers" "4") 4 #:name "fcgi-preload-db"
     (λ (s)
       (define db-file (path->string (build-path (served-dir s) "app.db")))
       (define lines (log-lines s cannot-share-rx))
       (check-equal? (length lines) 1 (stderr-text s))
       (check-regexp-match (regexp (string-append "\\(descriptor [0-9]+ open on " (regexp-quote db-file) "[;)]"))
                           (if (pair? lines) (car lines) ""))
       (check-unforked-pool s 4 "unsafe")
       ;; 8 threads x 25 requests, each value once
       (define values* (for*/list ([t (in-range 8)] [i (in-range 25)]) (format "t~a-r~a" t i)))
       (define results
         (with-timeout
          120 "200 inserts"
          (λ ()
            (define chans
              (for/list ([t (in-range 8)])
                (define ch (make-channel))
                (thread (λ ()
                          (channel-put ch
                                       (for/list ([i (in-range 25)])
                                         (define v (format "t~a-r~a" t i))
                                         (with-handlers ([exn:fail? (λ (e) (cons v (exn-message e)))])
                                           (define-values (st body) (get s (string-append "/?" v)))
                                           (cons v st))))))
                ch))
            (append* (map channel-get chans)))))
       (define bad (filter (λ (r) (not (eqv? (cdr r) 200))) results))
       (check-equal? (length results) 200)
       (check-equal? bad '() (format "~a of 200 not answered 200; serve's stderr:\n~a" (length bad) (stderr-text s)))
       (define c (sqlite3-connect #:database db-file #:mode 'read-only))
       (dynamic-wind
        void
        (λ ()
          (check-equal? (query-value c "PRAGMA integrity_check") "ok")
          (define rows (query-list c "SELECT v FROM t"))
          (check-equal? (length rows) 200)
          (check-equal? (sort rows string<?) (sort values* string<?) "each value once"))
        (λ () (disconnect c)))
       (check-equal? (hash-ref (board s) 'preload #f) "unsafe" "still"))))

  (test-case "a file opened at load: the warning names it; the pool serves, not forked"
    (with-pool
     file-source '("--workers" "2") 2
     (λ (s)
       (define held (path->string (build-path (served-dir s) "held.txt")))
       (check-fallback s (regexp (string-append "descriptor [0-9]+ open on " (regexp-quote held))) 2))))

  (test-case "a program the app runs at load gets /dev/null as its standard input, not the listening socket"
    (with-pool
     ;; (the C library's system: the program gets the process's own fd 0)
     (leaving-source ""
                     (string-append "(define-runtime-path seen \"stdin.txt\")\n"
                                    "(void ((get-ffi-obj \"system\" #f (_fun _string -> _int))\n"
                                    "       (format \"readlink /proc/self/fd/0 > ~a\" seen)))"))
     '("--workers" "1") 1
     (λ (s)
       (check-equal? (string-trim (file->string (build-path (served-dir s) "stdin.txt"))) "/dev/null"))))

  (test-case "a subprocess left running at load: the warning names the child process and the OS thread"
    (with-pool
     child-source '("--workers" "2") 2
     (λ (s)
       (check-fallback s #rx"child process [0-9]+" 2)
       (check-regexp-match #rx"[0-9]+ OS threads? besides the main one" (string-append* (log-lines s cannot-share-rx))))))

  (test-case "an OS thread started at load: the warning says so"
    (with-pool
     os-thread-source '("--workers" "2") 2
     (λ (s)
       (check-fallback s #rx"1 OS thread besides the main one \\(places, futures, or the runtime's own after a subprocess\\)" 2))))

  (test-case "--preload with a file opened at load: forked all the same, with a warning"
    (with-pool
     file-source '("--workers" "2" "--preload") 2
     (λ (s)
       (define held (path->string (build-path (served-dir s) "held.txt")))
       (define lines (log-lines s #rx"--preload: forking all the same"))
       (check-equal? (length lines) 1 (stderr-text s))
       (check-regexp-match (regexp (string-append "warning .*generation 1: --preload: forking all the same, .*"
                                                  "descriptor [0-9]+ open on " (regexp-quote held)))
                           (if (pair? lines) (car lines) ""))
       (check-equal? (log-lines s #rx"each worker loads the app itself") '())
       (check-forked-pool s 2)
       (define-values (st body) (get s "/"))
       (check-equal? st 200)
       (check-regexp-match #rx"^ok [0-9]+" body))))

  ;; -------------------------------------------------------------------------------------
  ;; 7. A killed loader.

  ;; background-requests : served -> (-> (listof any))
  ;; A request every 50 ms (at most 600) until the returned thunk is called; it gives the
  ;; answers that were not 200.
  (define (background-requests s)
    (define stop? (box #f))
    (define bad '())
    (define count 0)
    (define t (thread (λ ()
                        (let loop ()
                          (unless (or (unbox stop?) (>= count 600))
                            (set! count (add1 count))
                            (define r (with-handlers ([exn:fail? exn-message])
                                        (let-values ([(st body) (get s "/")]) st)))
                            (unless (eqv? r 200) (set! bad (cons r bad)))
                            (sleep 0.05)
                            (loop))))))
    (λ ()
      (set-box! stop? #t)
      (unless (sync/timeout 20 t) (kill-thread t) (set! bad (cons "the request thread hung" bad)))
      (values count (reverse bad))))

  (test-case "a loader killed after 10 s: a new one, the workers serve on; a worker killed then: a forked replacement"
    (with-pool
     (probe-source) '("--workers" "2") 2
     (λ (s)
       (define mgr (manager-pid s))
       (define old-loader (hash-ref (board s) 'loader_pid))
       (define workers (sort (map (λ (w) (hash-ref w 'pid)) (ready-workers s)) <))
       (sleep 11)
       (define done (background-requests s))
       (sleep 0.3)
       (check-equal? (c-kill old-loader SIGKILL) 0)
       (define b
         (wait-until 15 "a new loader"
                     (λ () (let ([b (board s)])
                             (and (exact-positive-integer? (hash-ref b 'loader_pid #f))
                                  (not (= (hash-ref b 'loader_pid) old-loader))
                                  (equal? (hash-ref b 'preload #f) "forked")
                                  b)))))
       (define new-loader (hash-ref b 'loader_pid))
       (check-equal? (comm new-loader) "fastcgi-loader")
       (check-equal? (ppid new-loader) mgr)
       (check-equal? (hash-ref b 'loader_restarts #f) 1)
       (check-regexp-match (regexp (format "warning .*loader ~a of generation 1 exited \\(killed by SIGKILL\\): a new one loads it"
                                           old-loader))
                           (stderr-text s))
       (check-true (gone? old-loader) "the killed loader was reaped")
       (sleep 1)
       (define-values (n bad) (done))
       (check-true (> n 10) (format "~a requests" n))
       (check-equal? bad '() (format "~a requests while the loader was replaced" n))
       (check-equal? (sort (map (λ (w) (hash-ref w 'pid)) (ready-workers s)) <) workers "the workers are the same")
       ;; a worker killed: its replacement is forked by the new loader
       (define victim (car workers))
       (check-equal? (c-kill victim SIGKILL) 0)
       (define fresh
         (wait-until 20 "the killed worker's replacement"
                     (λ () (let ([ws (ready-workers s)])
                             (and (= (length ws) 2)
                                  (not (member victim (map (λ (w) (hash-ref w 'pid)) ws)))
                                  (for/first ([w (in-list ws)] #:unless (member (hash-ref w 'pid) workers)) w))))))
       (define pid (hash-ref fresh 'pid))
       (check-equal? (hash-ref fresh 'forked #f) #t)
       (check-equal? (comm pid) "fastcgi-worker")
       (check-equal? (ppid pid) mgr)
       (check-equal? (hash-ref (board s) 'loader_pid #f) new-loader)
       (check-equal? (hash-ref (board s) 'loader_restarts #f) 1)
       (define by-pid (answers-by-pid s 2 (λ () (answer s))))
       (check-not-false (hash-ref by-pid pid #f) (format "the replacement ~a answered (answers from ~a)" pid (hash-keys by-pid))))))

  (test-case "a loader killed while it loads, at the first start: serve exits 1, cannot start"
    (call-with-temp-dir
     "fcgi-preload"
     (λ (dir)
       (define app (path->string (build-path dir "app.rkt")))
       (define pid-file (path->string (build-path dir "manager.pid")))
       (display-to-file slow-source app)
       (define p (start-process "serve" raco
                                (list "fastcgi" "serve" app "--listen" (string-append "unix:" (path->string (build-path dir "app.sock")))
                                      "--pid-file" pid-file "--workers" "2")
                                #:dir dir))
       (dynamic-wind
        void
        (λ ()
          (define loader
            (wait-until 10 "the loader, loading"
                        (λ () (let* ([b (read-status-file (pid-file->status-file pid-file))]
                                     [l (and b (hash-ref b 'loader_pid #f))])
                                (and (exact-positive-integer? l) (equal? (hash-ref b 'preload #f) "loading")
                                     (equal? (comm l) "fastcgi-loader") l)))))
          (check-equal? (c-kill loader SIGKILL) 0)
          (define exited? (sync/timeout 15 (proc-subprocess p)))
          (define err (file->string (proc-stderr-file p)))
          (check-not-false exited? (format "serve still running 15 s after its loader was killed:\n~a" err))
          (check-equal? (subprocess-status (proc-subprocess p)) 1 err)
          (check-regexp-match (regexp (format "fatal .*cannot start: loader ~a exited before the app loaded \\(killed by SIGKILL\\)" loader))
                              err))
        (λ () (stop-process! p))))))

  ;; -------------------------------------------------------------------------------------
  ;; 8. Fail fast.

  (test-case "an app that raises at load: serve exits 1 within seconds, default and --no-preload"
    (for ([opts (list '() '("--no-preload"))])
      (call-with-temp-dir
       "fcgi-preload"
       (λ (dir)
         (define app (path->string (build-path dir "app.rkt")))
         (display-to-file broken-source app)
         (define t0 (current-inexact-milliseconds))
         (define p (start-process "serve" raco
                                  (list* "fastcgi" "serve" app "--listen" (string-append "unix:" (path->string (build-path dir "app.sock")))
                                         "--workers" "2" opts)
                                  #:dir dir))
         (define exited? (sync/timeout 20 (proc-subprocess p)))
         (define secs (/ (- (current-inexact-milliseconds) t0) 1000.))
         (define status (stop-process! p))
         (define err (file->string (proc-stderr-file p)))
         (check-not-false exited? (format "~s: still running after 20 s:\n~a" opts err))
         (check-equal? status 1 (format "~s: ~a" opts err))
         (check-true (< secs 15) (format "~s: ~a s" opts secs))
         (check-regexp-match #rx"cannot start: cannot load .*app\\.rkt: app: broken at load" err)
         (check-equal? (length (filter (λ (l) (regexp-match? #rx"broken at load" l)) (lines err))) 1 err)))))

  ;; -------------------------------------------------------------------------------------
  ;; 9. A reload.

  (test-case "a reload: a new loader loads the new code, the old loader goes"
    (with-pool
     (probe-source "v1") '("--workers" "2") 2
     (λ (s)
       (define old-loader (hash-ref (board s) 'loader_pid))
       (define old-workers (map (λ (w) (hash-ref w 'pid)) (ready-workers s)))
       (check-false (exact-integer? (hash-ref (board s) 'base_pid #f)) "no base before the first reload")
       (check-equal? (hash-ref (board s) 'generation #f) 1)
       (answer s "v1")
       (display-to-file (probe-source "v2") (build-path (served-dir s) "app.rkt") #:exists 'truncate)
       (define-values (code out err) (run-program* raco (list "fastcgi" "ctl" "reload" "--pid-file" (served-pid-file s)
                                                              "--timeout" "40")))
       (check-equal? code 0 (string-append out err))
       (define b (wait-until 20 "generation 2 serving, forked"
                             (λ () (let ([b (board s)])
                                     (and (eqv? (hash-ref b 'generation #f) 2)
                                          (equal? (hash-ref b 'preload #f) "forked")
                                          (= 2 (length (filter (λ (w) (eqv? (hash-ref w 'generation #f) 2))
                                                               (ready-workers s))))
                                          b)))))
       (define new-loader (hash-ref b 'loader_pid))
       (check-not-equal? new-loader old-loader)
       (check-equal? (comm new-loader) "fastcgi-loader")
       (check-equal? (length (log-lines s #rx"generation 2 loaded once by loader")) 1 (stderr-text s))
       (wait-until 10 (format "the old loader ~a gone (~a)" old-loader (comm old-loader)) (λ () (gone? old-loader)))
       (for ([w (in-list (ready-workers s))] #:when (eqv? (hash-ref w 'generation #f) 2))
         (check-equal? (hash-ref w 'forked #f) #t)
         (check-false (member (hash-ref w 'pid) old-workers)))
       (define by-pid (answers-by-pid s 2 (λ () (answer s "v2"))))
       (check-equal? (hash-count by-pid) 2)
       (for ([pid (in-hash-keys by-pid)]) (check-false (member pid old-workers) "answered by the new generation"))
       ;; the pool's base, started for the first reload: generation 2's loader was forked
       ;; from it, and so is generation 3's, which serves v3
       (define base (hash-ref b 'base_pid #f))
       (check-true (exact-positive-integer? base) (format "base_pid ~s" base))
       (when (exact-positive-integer? base)
         (check-equal? (comm base) "fastcgi-base")
         (check-equal? (ppid base) (manager-pid s)))
       (display-to-file (probe-source "v3") (build-path (served-dir s) "app.rkt") #:exists 'truncate)
       (define-values (code3 out3 err3) (run-program* raco (list "fastcgi" "ctl" "reload" "--pid-file" (served-pid-file s)
                                                                 "--timeout" "40")))
       (check-equal? code3 0 (string-append out3 err3))
       (wait-until 20 "generation 3 serving" (λ () (eqv? (hash-ref (board s) 'generation #f) 3)))
       (check-equal? (hash-ref (board s) 'base_pid #f) base "the same base")
       (check-equal? (comm (hash-ref (board s) 'loader_pid)) "fastcgi-loader")
       (answers-by-pid s 2 (λ () (answer s "v3")))))))
