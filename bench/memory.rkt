#lang racket/base
;; Memory per process and per pool, as PSS (the Pss: line of /proc/PID/smaps_rollup), and
;; what preloading changes (`raco fastcgi serve --workers N`: by default one loader per
;; generation loads the app and forks the workers; --no-preload: each worker loads it).
;;
;; - Per process: our manager, the loader, a raw worker, a servlet worker (with and
;;   without preload), a pool of four servlet workers, php-fpm's pool and the C
;;   responder, beside the floor of any Racket process (bench/apps/idle-base.rkt).
;; - Per pool, each row with preload and with --no-preload, side by side in this run:
;;   examples/guess.rkt with 4 workers after a dozen games played to the end, and again
;;   after two reloads with live sessions (the old workers drain them); the PSS of a
;;   servlet pool (examples/hello.rkt) and of a raw pool (examples/hello-raw.rkt) at 1, 2,
;;   4 and 8 workers and its least-squares slope per added worker; the time a SIGKILLed
;;   worker takes to be replaced by an idle one; the wall time of `ctl reload`.
;;
;; Every PSS is read after the requests (a second idle) and the row says how long after
;; the last request it was read. `make bench` runs it as its memory scenario (bench/run.rkt,
;; into RESULTS.md); `racket bench/memory.rkt` runs it alone (about 5 minutes) and prints
;; the markdown; `--only floor,pools,guess,php,c` runs some of its parts (`timings`: only the
;; servlet pool of 4 and its kills and reloads).
(require racket/format
         racket/list
         racket/string
         "../fastcgi/client.rkt"
         "../tests/integration/lib.rkt"
         "harness.rkt"
         "measure.rkt"
         "pool.rkt")
(provide (struct-out mem-row)
         memory-rows
         memory-markdown
         memory-parts)

;; Requests sent to each backend before it is measured, and the idle time after them.
(define request-count 20)
(define idle-seconds 1)
;; Rounds of request-count requests sent to a pool until each of its workers served one.
(define max-batches 5)

;; The preload rows.
(define pool-sizes '(1 2 4 8))
(define kills 5)            ; SIGKILLed workers timed, per mode
(define reloads 3)          ; `ctl reload`s timed, per mode
(define timed-workers 4)    ; the servlet pool the kills and reloads are timed on
(define guess-workers 4)
(define games 12)           ; games per generation of the guess pool, at least
(define max-games 24)       ; ... played until each worker of the generation holds a session

(define hello-raw "examples/hello-raw.rkt")
(define hello-servlet "examples/hello.rkt")
(define guess "examples/guess.rkt")
(define idle-base "bench/apps/idle-base.rkt")

;; Which parts run (racket bench/memory.rkt --only ...; make bench runs them all).
(define memory-parts (make-parameter '(floor pools guess php c)))
(define (part? p) (and (memq p (memory-parts)) #t))

;; A line of the per-process table: a key, a label, the PSS in KiB of each process
;; measured ('() when not measured), the most one process may hold in MiB (#f: no
;; target), and a note.
(struct mem-row (key label pss target note) #:transparent)

;; A pool measured: app, preload? (#f: --no-preload), workers asked, the members with
;; their PSS ((listof (cons pool-proc kib)), '() when it failed), the ms from the last
;; request to the start of the reading and the ms the reading took, the requests each
;; worker served, and a note (why it failed, or "").
(struct pool-result (app preload? n members after-ms read-ms served note) #:transparent)

;; Timings of one mode on the timed servlet pool: kill (ms from SIGKILL to an idle
;; replacement in the status file), and for each kill the ms until the killed pid left
;; the status file and until the new pid was first listed; reload (ctl's wall ms, and ms
;; until the 4 new workers are idle), and for each reload the ms until the status file
;; first listed a worker of the new generation and first said the new generation (#f when
;; not seen); raco's own start-up (ms of `ctl status`); and a note.
(struct timing (preload? kill-ms kill-phases reload-ms reload-phases settle-ms raco-ms note) #:transparent)

;; The guess pool of one mode: after a dozen games, then after two reloads (each a
;; pool-result), the games played in each generation, the sessions per worker seen
;; (generation -> list), the reload wall times in ms, and a note.
(struct guess-result (preload? first after games sessions reload-ms note) #:transparent)

;; Everything memory-rows measured.
(struct memory-run (rows pools timings guesses) #:transparent)

;; ---------------------------------------------------------------------------------------
;; Measuring.

;; send-requests! : string (listof (cons string string)) -> void
;; request-count GETs of /, each on its own connection, in four threads (so that a pool's
;; processes share them); each must answer 200 with hello world.
(define (send-requests! address extra)
  (define (one)
    (define-values (status headers body)
      (fastcgi-request address #:uri "/" #:params-extra extra #:timeout 10))
    (note-request!)
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

;; serve-pool! : string string natural -> (listof natural)
;; Batches of requests until every worker has served one (the status file, rewritten now
;; and then, is polled for up to 3 s after each batch), at most max-batches of them;
;; returns the requests each worker served, as last seen.
(define (serve-pool! address status-file n)
  (define (counts) (let ([b (read-status status-file)])
                     (and b (map (λ (w) (hash-ref w 'requests 0)) (status-workers b)))))
  (let loop ([batch 1])
    (send-requests! address '())
    (define seen
      (let poll ([tries 0])
        (define c (counts))
        (cond
          [(and c (= (length c) n) (andmap positive? c)) c]
          [(< tries 30) (sleep 0.1) (poll (add1 tries))]
          [else (or c '())])))
    (if (or (and (= (length seen) n) (andmap positive? seen)) (= batch max-batches))
        seen
        (loop (add1 batch)))))

;; with-pool : path string string natural boolean (natural string string -> any) -> any
;; raco fastcgi serve app --workers n [--no-preload] on address, once its n workers are
;; ready: body gets the manager's pid (from --pid-file: raco exec()s into racket), the pid
;; file and the status file. Afterwards every process of the tree is gone (those left
;; after the group's SIGKILL are killed by pid, and the error says so).
(define (with-pool dir app address n preload? body)
  (define p (ours app address (append (list "--workers" (number->string n))
                                      (if preload? '() '("--no-preload")))))
  (define pid-file (cadr (member "--pid-file" (peer-args p))))
  (define status-file (string-append pid-file ".status.json"))
  (define seen '())
  (dynamic-wind
   void
   (λ ()
     (call-with-peers
      dir (list p)
      (λ (procs)
        (define manager (string->number (string-trim (file->string* pid-file))))
        (unless manager (error 'bench "no pid in ~a" pid-file))
        (define (tree) (let ([ms (pool-members manager #f)])
                         (set! seen (remove-duplicates (append seen (map pool-proc-pid ms))))
                         ms))
        (tree)
        (begin0 (body manager pid-file status-file)
                (tree)))))
   (λ ()
     (for ([f (list pid-file status-file)])
       (with-handlers ([exn:fail? void]) (when (file-exists? f) (delete-file f))))
     (define left (filter (λ (pid) (directory-exists? (format "/proc/~a" pid))) seen))
     (unless (null? left)
       (sleep 1)
       (for ([pid (in-list left)] #:when (directory-exists? (format "/proc/~a" pid)))
         (with-handlers ([exn:fail? void])
           (run-program (string->path "/bin/kill") (list "-KILL" (number->string pid)) #:timeout 10)))))))

;; file->string* : path-string -> string
(define (file->string* f) (call-with-input-file f (λ (in) (let ([s (read-string 100 in)]) (if (eof-object? s) "" s)))))

;; start-context : string -> string
;; What a pool's note says of the moment it started: modules compiled in memory (stale
;; compiled code, e.g. the tree edited during the run), when any.
(define (start-context app)
  (define stale (stale-modules repo-dir (list app)))
  (if (null? stale)
      ""
      (format "STALE: ~a module(s) newer than their compiled code when the pool started (~a): each process that loads them compiles them in memory, which may inflate its PSS"
              (length stale) (string-join (take stale (min 3 (length stale))) ", "))))

;; join-notes : string ... -> string
(define (join-notes . notes) (string-join (filter (λ (s) (not (equal? s ""))) notes) "; "))

;; read-pool : string boolean natural natural path-string (listof natural) string -> pool-result
;; The pool's members and their PSS, now (the caller waited idle-seconds).
(define (read-pool app preload? n manager status-file served note)
  (define after (ms-since-last-request))
  (define t0 (current-inexact-milliseconds))
  (define members (members-pss-kb (pool-members manager (read-status status-file))))
  (pool-result app preload? n members after (- (current-inexact-milliseconds) t0) served note))

;; failed-pool : string boolean natural exn -> pool-result
(define (failed-pool app preload? n e)
  (say "memory, ~a --workers ~a~a: FAILED: ~a" app n (if preload? "" " --no-preload") (exn-message e))
  (pool-result app preload? n '() #f #f '() (format "failed: ~a" (string-replace (exn-message e) "\n" " "))))

;; pool-kb : pool-result [symbol] -> natural ; PSS summed over its members (of a role)
(define (pool-kb r [role #f])
  (for/sum ([m+k (in-list (pool-result-members r))]
            #:when (or (not role) (eq? (pool-proc-role (car m+k)) role)))
    (cdr m+k)))

;; role-kbs : pool-result symbol -> (listof natural)
(define (role-kbs r role)
  (for/list ([m+k (in-list (pool-result-members r))] #:when (eq? (pool-proc-role (car m+k)) role))
    (cdr m+k)))

;; hello-pool : path string string natural boolean -> (values pool-result (or/c timing #f))
;; A hello pool served until each worker took a request, a second idle, its PSS; the
;; timed pool (servlet, timed-workers) then has workers killed and reloads timed.
(define (hello-pool dir app address n preload?)
  (with-handlers ([exn:fail? (λ (e)
                               (define f (failed-pool app preload? n e))
                               (values f (and (timed? app n) (timing preload? '() '() '() '() '() #f (pool-result-note f)))))])
    (with-pool
     dir app address n preload?
     (λ (manager pid-file status-file)
       (define context (start-context app))
       (define served (serve-pool! address status-file n))
       (sleep idle-seconds)
       (define r (read-pool app preload? n manager status-file served
                            (join-notes (if (and (= (length served) n) (andmap positive? served)) "" "a worker served none")
                                        context (format "load average ~a" (load-average)))))
       (say "memory, ~a --workers ~a~a: PSS ~a MiB (read ~a s after the last request)" app n
            (if preload? "" " --no-preload") (fmt-mib (pool-kb r)) (fmt-s (pool-result-after-ms r)))
       (values r (and (timed? app n) (time-pool preload? pid-file status-file n)))))))

(define (timed? app n) (and (equal? app hello-servlet) (= n timed-workers)))

;; time-pool : boolean path-string path-string natural -> timing
;; kills SIGKILLed workers replaced, then reloads `ctl reload`s, each from a settled pool.
(define (time-pool preload? pid-file status-file n)
  (with-handlers ([exn:fail? (λ (e)
                               (say "memory, timings~a: FAILED: ~a" (if preload? "" " --no-preload") (exn-message e))
                               (timing preload? '() '() '() '() '() #f (format "failed: ~a" (string-replace (exn-message e) "\n" " "))))])
    (define load-kills (load-average))
    (define-values (kill-ms kill-phases)
      (for/lists (a b) ([_ (in-range kills)])
        (define-values (ms victim fresh phases) (time-kill! status-file n))
        (say "memory, kill~a: worker ~a gone from the status after ~a ms; its replacement ~a listed after ~a ms, idle after ~a ms"
             (if preload? "" " --no-preload") victim (fmt-ms (car phases)) fresh (fmt-ms (cadr phases)) (fmt-ms ms))
        (sleep 0.5)
        (values ms phases)))
    (define raco-ms (raco-floor-ms pid-file))
    (define load-reloads (load-average))
    (define-values (reload-ms reload-phases* settle-ms)
      (for/lists (a b c) ([_ (in-range reloads)])
        (define-values (ctl settle gen) (time-reload! pid-file status-file n))
        (define phases (unbox reload-phases))
        (say "memory, ctl reload~a: generation ~a: a worker of it listed after ~a ms, serving after ~a ms, ctl returned after ~a ms, its ~a workers idle after ~a ms"
             (if preload? "" " --no-preload") gen (fmt-ms* (car phases)) (fmt-ms* (cadr phases))
             (fmt-ms ctl) n (fmt-ms settle))
        (sleep 0.5)
        (values ctl phases settle)))
    (timing preload? kill-ms kill-phases reload-ms reload-phases* settle-ms raco-ms
            (format "load average ~a before the kills, ~a before the reloads" load-kills load-reloads))))

;; play-generation! : string path-string natural -> (values natural (listof natural))
;; games games played to the end, then more, four at a time, until each of the n
;; workers of the current generation holds a live session (at most max-games): the games
;; played and the sessions of each worker of the generation.
(define (play-generation! address status-file n)
  (define gen (hash-ref (wait-settled status-file n) 'generation))
  (define (sessions) (for/list ([w (in-list (status-workers (read-status status-file)))]
                                #:when (eqv? (hash-ref w 'generation #f) gen))
                       (hash-ref w 'sessions 0)))
  (let loop ([played (length (play-games! address games))])
    (define ok? (let poll ([tries 0])
                  (or (every-worker-has-session? (read-status status-file) gen n)
                      (and (< tries 20) (begin (sleep 0.1) (poll (add1 tries)))))))
    (if (or ok? (>= played max-games))
        (values played (sessions))
        (loop (+ played (length (play-games! address 4)))))))

;; guess-pool : path string boolean -> guess-result
;; examples/guess.rkt with guess-workers workers: a dozen games, PSS; reload, a dozen
;; games, reload, a dozen games, PSS. Each reload is `ctl reload`, waited for until the
;; new generation's workers are idle; the old workers holding sessions drain them
;; (--session-drain, 600 s by default), so they are still there when PSS is read.
(define (guess-pool dir address preload?)
  (define n guess-workers)
  (define (fail e)
    (define f (failed-pool guess preload? n e))
    (guess-result preload? f f '() '() '() (pool-result-note f)))
  (with-handlers ([exn:fail? fail])
    (with-pool
     dir guess address n preload?
     (λ (manager pid-file status-file)
       (define context (start-context guess))
       (define (played-note games sessions)
         (join-notes (format "~a games, sessions per worker ~a" games (string-join (map ~a sessions) "/"))
                     context (format "load average ~a" (load-average))))
       (define-values (g1 s1) (play-generation! address status-file n))
       (sleep idle-seconds)
       (define first (read-pool guess preload? n manager status-file '() (played-note g1 s1)))
       (say "memory, guess~a after ~a games: PSS ~a MiB" (if preload? "" " --no-preload") g1 (fmt-mib (pool-kb first)))
       (define-values (r1 settle1 gen2) (time-reload! pid-file status-file n))
       (define-values (g2 s2) (play-generation! address status-file n))
       (define-values (r2 settle2 gen3) (time-reload! pid-file status-file n))
       (define-values (g3 s3) (play-generation! address status-file n))
       (sleep idle-seconds)
       (define board (read-status status-file))
       (define draining (for/sum ([w (in-list (status-workers board))])
                          (if (equal? (hash-ref w 'state #f) "draining") 1 0)))
       (define after (read-pool guess preload? n manager status-file '()
                                (join-notes
                                 (format "games per generation ~a/~a/~a, sessions per worker of each ~a; ~a old workers draining"
                                         g1 g2 g3 (string-join (for/list ([s (list s1 s2 s3)]) (string-join (map ~a s) "/")) ", ")
                                         draining)
                                 context (format "load average ~a" (load-average)))))
       (say "memory, guess~a after two reloads: PSS ~a MiB, ~a workers draining"
            (if preload? "" " --no-preload") (fmt-mib (pool-kb after)) draining)
       (guess-result preload? first after (list g1 g2 g3) (list s1 s2 s3) (list r1 r2) "")))))

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

;; pool-rows : (listof pool-result) -> (listof mem-row)
;; The per-process rows, from the pools of the slope: the manager, loader and workers of
;; the raw and servlet pools of 2 workers, and the servlet pool of 4.
(define (pool-rows pools)
  (define (find app n preload?)
    (findf (λ (r) (and (equal? (pool-result-app r) app) (= (pool-result-n r) n)
                       (eq? (pool-result-preload? r) preload?)))
           pools))
  (define (row key label target r pick)
    (cond
      [(not r) (mem-row key label '() target "not measured")]
      [(null? (pool-result-members r)) (mem-row key label '() target (pool-result-note r))]
      [else (mem-row key label (pick r) target (read-note r))]))
  (define raw2 (find hello-raw 2 #t))
  (define raw2-off (find hello-raw 2 #f))
  (define servlet2 (find hello-servlet 2 #t))
  (define servlet2-off (find hello-servlet 2 #f))
  (define servlet4 (find hello-servlet 4 #t))
  (list
   (row 'manager "ours: the manager (`serve examples/hello-raw.rkt --workers 2`)" 64 raw2 (λ (r) (role-kbs r 'manager)))
   (row 'raw-loader "ours: the loader (hello-raw.rkt, the same pool)" #f raw2 (λ (r) (role-kbs r 'loader)))
   (row 'raw-worker "ours: a raw worker (hello-raw.rkt, the same pool)" 75 raw2 (λ (r) (role-kbs r 'worker)))
   (row 'raw-worker-off "ours: a raw worker, `--no-preload` (hello-raw.rkt --workers 2)" 75 raw2-off (λ (r) (role-kbs r 'worker)))
   (row 'servlet-loader "ours: the loader (`serve examples/hello.rkt --workers 2`)" #f servlet2 (λ (r) (role-kbs r 'loader)))
   (row 'servlet-worker "ours: a servlet worker (the same pool)" 140 servlet2 (λ (r) (role-kbs r 'worker)))
   (row 'servlet-worker-off "ours: a servlet worker, `--no-preload` (hello.rkt --workers 2)" 140 servlet2-off (λ (r) (role-kbs r 'worker)))
   (row 'servlet-pool "ours: a servlet pool, manager, loader and 4 workers (`--workers 4`)" #f servlet4
        (λ (r) (list (pool-kb r))))))

;; read-note : pool-result -> string
(define (read-note r)
  (string-append
   (format "read ~a s after the last request" (fmt-s (pool-result-after-ms r)))
   (if (pair? (pool-result-served r))
       (format "; requests per worker ~a" (string-join (map ~a (pool-result-served r)) "/"))
       "")
   (if (equal? (pool-result-note r) "") "" (string-append "; " (pool-result-note r)))))

;; compile-apps! : -> void ; the Racket programs measured, compiled (a module compiled in
;; memory at start-up would load the compiler into the process)
(define (compile-apps!)
  (define files (for/list ([f (list idle-base hello-raw hello-servlet guess)])
                  (path->string (simplify-path (build-path repo-dir f)))))
  (log-command! raco (cons "make" files))
  (define-values (st out err) (run-program (string->path raco) (cons "make" files) #:timeout 300))
  (unless (eqv? st 0) (error 'bench "raco make failed:\n~a" err)))

;; memory-rows : path #:c-address string #:php-address string #:ours-address string
;;               -> memory-run
;; dir holds the C responder (build-c!) and php-fpm's files (write-php-files!) for the
;; unix socket of php-address. Each preload row is measured with preload, then at once
;; with --no-preload.
(define (memory-rows dir #:c-address c-address #:php-address php-address
                     #:ours-address ours-address)
  (compile-apps!)
  (define script `(("SCRIPT_FILENAME" . ,(path->string (build-path dir "php" "hello.php")))))
  (define (alone thunk) (λ () (values (list (thunk)) "")))
  ;; the pools of the slope, or with only the part `timings` the timed pool alone
  (define-values (apps sizes)
    (cond
      [(part? 'pools) (values (list hello-servlet hello-raw) pool-sizes)]
      [(part? 'timings) (values (list hello-servlet) (list timed-workers))]
      [else (values '() '())]))
  (define-values (pools timings)
    (for*/fold ([pools '()] [timings '()] #:result (values (reverse pools) (reverse timings)))
               ([app (in-list apps)] [n (in-list sizes)] [preload? '(#t #f)])
      (define-values (r t) (hello-pool dir app ours-address n preload?))
      (values (cons r pools) (if t (cons t timings) timings))))
  (define guesses
    (if (part? 'guess)
        (for/list ([preload? '(#t #f)]) (guess-pool dir ours-address preload?))
        '()))
  (memory-run
   (append
    (if (part? 'floor)
        (attempt '((baseline "Racket's floor: racket/base alone, idle (apps/idle-base.rkt)" #f))
                 (alone (λ () (baseline-pss dir))))
        '())
    (if (part? 'pools) (pool-rows pools) '())
    (if (part? 'php)
        (attempt '((php "php-fpm static 4: master and 4 children" #f))
                 (alone (λ () (peer-pss dir (php-peer dir php-address) script))))
        '())
    (if (part? 'c)
        (attempt '((c "C responder" #f))
                 (λ () (values (list (peer-pss dir (c-peer dir c-address) '()))
                               "17 MiB of it are its /1m and /16m answers, built at start-up")))
        '()))
   pools timings guesses))

;; ---------------------------------------------------------------------------------------
;; The section.

;; fmt-mib : natural -> string ; KiB shown in MiB
(define (fmt-mib kb) (~r (/ kb 1024.0) #:precision '(= 1)))
;; fmt-s : (or/c real #f) -> string ; ms shown in s
(define (fmt-s ms) (if ms (~r (/ ms 1000.0) #:precision '(= 1)) "?"))
(define (fmt-ms ms) (~r ms #:precision 0))
(define (fmt-ms* ms) (if ms (fmt-ms ms) "?"))

;; verdict : mem-row -> string
(define (verdict r)
  (cond
    [(not (mem-row-target r)) ""]
    [(null? (mem-row-pss r)) "not measured"]
    [(<= (/ (apply max (mem-row-pss r)) 1024.0) (mem-row-target r)) "PASS"]
    [else "**MISS**"]))

(define (line cells) (string-append "| " (string-join cells " | ") " |\n"))
(define (header cells) (string-append (line cells) (line (map (λ (_) "---") cells))))
(define (mode p?) (if p? "preload" "`--no-preload`"))
(define (pass-miss ok?) (if ok? "PASS" "**MISS**"))

;; memory-markdown : memory-run -> string ; RESULTS.md's memory sections
(define (memory-markdown run)
  (string-append
   (per-process-markdown (memory-run-rows run))
   (preload-markdown run)))

;; per-process-markdown : (listof mem-row) -> string
(define (per-process-markdown rows)
  (string-append
   "## Memory per process (PSS)\n\n"
   "Each process's PSS: the `Pss:` line of `/proc/PID/smaps_rollup`, its resident pages "
   "with a page that k processes share counted 1/k in each (RSS counts it whole in each). "
   (format "It is read after ~a `GET /` sent straight to the backend's unix socket " request-count)
   "(fastcgi/client.rkt, each on its own connection, four at a time; no nginx) and a second "
   "idle. Ours run `raco fastcgi serve --workers N --log-level warning` (`raco` exec()s into "
   "racket, so the manager is one process, its pid from `--pid-file`; the loader and the "
   "workers are its children, told apart by the status file and their names); requests are sent again, up to "
   (format "~a rounds, until the status file shows that every worker served one. " max-batches)
   "By default (preload) a loader loads the app once and forks the workers, which share "
   "its heap: a page shared by the loader and 2 workers counts a third in each, so a "
   "preloaded worker's PSS depends on the size of its pool. The pools here are those "
   "of the slope below. The first row is the floor any Racket process pays. The targets "
   "(issue 27) bound each process of the row.\n\n"
   (header (list "process" "processes" "PSS MiB, each" "PSS MiB, total" "target MiB, each" "result" "note"))
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

;; pool-summary : pool-result -> string ; "manager 66.0, loader 45.1, workers 4 x 45.0-46.2"
(define (pool-summary r)
  (define (group role name)
    (define ks (role-kbs r role))
    (cond
      [(null? ks) #f]
      [(null? (cdr ks)) (format "~a ~a" name (fmt-mib (car ks)))]
      [else (format "~a ~a x ~a-~a" name (length ks) (fmt-mib (apply min ks)) (fmt-mib (apply max ks)))]))
  (string-join (filter values (list (group 'manager "manager") (group 'loader "loader")
                                    (group 'worker "workers") (group 'other "other")))
               ", "))

;; workers-by-generation : pool-result -> string ; "gen 1: 4 draining; gen 3: 4 idle"
(define (workers-by-generation r)
  (define ws (for/list ([m+k (in-list (pool-result-members r))] #:when (eq? (pool-proc-role (car m+k)) 'worker))
               (car m+k)))
  (define gens (sort (remove-duplicates (map (λ (m) (or (pool-proc-generation m) 0)) ws)) <))
  (string-join
   (for/list ([g (in-list gens)])
     (define of-g (filter (λ (m) (eqv? (or (pool-proc-generation m) 0) g)) ws))
     (define kbs (for/list ([m+k (in-list (pool-result-members r))] #:when (memq (car m+k) of-g)) (cdr m+k)))
     (format "gen ~a: ~a ~a, ~a MiB" g (length of-g)
             (string-join (remove-duplicates (map (λ (m) (or (pool-proc-state m) "?")) of-g)) "/")
             (fmt-mib (apply + kbs))))
   "; "))

;; slope-of : (listof pool-result) string boolean -> (or/c real #f) ; MiB per worker
(define (slope-of pools app preload?)
  (define rs (filter (λ (r) (and (equal? (pool-result-app r) app) (eq? (pool-result-preload? r) preload?)
                                 (pair? (pool-result-members r))))
                     pools))
  (and (= (length rs) (length pool-sizes))
       (/ (lsq-slope (map pool-result-n rs) (map pool-kb rs)) 1024.0)))

;; preload-markdown : memory-run -> string
(define (preload-markdown run)
  (define pools (memory-run-pools run))
  (define timings (memory-run-timings run))
  (define guesses (memory-run-guesses run))
  (define (guess-of p?) (findf (λ (g) (eq? (guess-result-preload? g) p?)) guesses))
  (define (timing-of p?) (findf (λ (t) (eq? (timing-preload? t) p?)) timings))
  (define (mib-of r) (and r (pair? (pool-result-members r)) (/ (pool-kb r) 1024.0)))
  (define (target-line what pick required ok? fmt)
    (define a (pick #t))
    (define b (pick #f))
    (line (list what (if a (fmt a) "not measured") (if b (fmt b) "not measured") required
                (if a (pass-miss (ok? a)) "not measured"))))
  (define (med xs) (and (pair? xs) (median xs)))
  (define (guess-first p?) (let ([g (guess-of p?)]) (and g (mib-of (guess-result-first g)))))
  (define (guess-after p?) (let ([g (guess-of p?)]) (and g (mib-of (guess-result-after g)))))
  (define (mib x) (format "~a MiB" (~r x #:precision '(= 1))))
  (if (and (null? pools) (null? guesses))
      ""
      (string-append
       "\n## Preload: a pool's memory, a killed worker, a reload\n\n"
       "`raco fastcgi serve APP --workers N` by default starts, per generation, a loader "
       "(`fastcgi-loader`) that loads the app once, makes its heap static and forks the N "
       "workers, which share it copy-on-write; `--no-preload` starts each worker as a fresh "
       "racket that loads the app. Every row below is measured with preload, then at once "
       "the same with `--no-preload`, in this run. A pool's PSS is the sum over the "
       "manager's whole process tree (manager, loaders, workers, from /proc: processes, "
       "not threads), read a second after the last request (each row says how long after).\n\n"
       "### Targets\n\n"
       (header (list "target" "preload" "`--no-preload`, same run" "required (preload)" "result"))
       (target-line (format "examples/guess.rkt, ~a workers, after a dozen games: pool PSS" guess-workers)
                    guess-first "<= 300 MiB" (λ (x) (<= x 300)) mib)
       (target-line "the same after two reloads, old workers draining their sessions: pool PSS"
                    guess-after "<= 600 MiB" (λ (x) (<= x 600)) mib)
       (target-line "servlet pool (hello.rkt): PSS per added worker (slope over 1, 2, 4, 8)"
                    (λ (p?) (slope-of pools hello-servlet p?)) "<= 24 MiB/worker" (λ (x) (<= x 24))
                    (λ (x) (format "~a MiB/worker" (~r x #:precision '(= 1)))))
       (target-line "raw pool (hello-raw.rkt): PSS per added worker (slope over 1, 2, 4, 8)"
                    (λ (p?) (slope-of pools hello-raw p?)) "<= 12 MiB/worker" (λ (x) (<= x 12))
                    (λ (x) (format "~a MiB/worker" (~r x #:precision '(= 1)))))
       (target-line (format "a SIGKILLed worker replaced, new pid idle in the status file (median of ~a)" kills)
                    (λ (p?) (let ([t (timing-of p?)]) (and t (med (timing-kill-ms t)))))
                    "<= 150 ms" (λ (x) (<= x 150)) (λ (x) (format "~a ms" (fmt-ms x))))
       (target-line (format "`raco fastcgi ctl reload`, ~a servlet workers: wall time (median of ~a)" timed-workers reloads)
                    (λ (p?) (let ([t (timing-of p?)]) (and t (med (timing-reload-ms t)))))
                    "<= 2 s" (λ (x) (<= x 2000)) (λ (x) (format "~a s" (~r (/ x 1000.0) #:precision '(= 2)))))
       "\nCPU per request and req/s of a servlet pool of 2 workers with and without preload "
       "are hello-world rows (`ours servlet, unix, keep-conn, --workers 2`), when the run "
       "measured them.\n"
       (guess-markdown guesses)
       (slope-markdown pools)
       (timing-markdown timings))))

;; guess-markdown : (listof guess-result) -> string
(define (guess-markdown guesses)
  (if (null? guesses)
      ""
      (string-append
       (format "\n### examples/guess.rkt, ~a workers\n\n" guess-workers)
       "Games played to the end through fastcgi/client.rkt (GET /, then the form's guess "
       "posted to its continuation URL, a binary search: at most 7 guesses), four at a time: "
       (format "~a games, then ~a more at a time until each worker of the generation holds a live " games 4)
       (format "session (at most ~a). " max-games)
       "Then `raco fastcgi ctl reload`, waited for until the new generation's workers are "
       "idle, the same games on the new generation, a second reload, the same games again: the old "
       "workers drain their sessions (`--session-drain`, 600 s by default), so they are still "
       "there when PSS is read. A worker's generation and state are the status file's.\n\n"
       (header (list "pool" "mode" "pool PSS MiB" "processes" "workers by generation" "PSS read after the last request" "note"))
       (string-append*
        (for*/list ([g (in-list guesses)]
                    [which (list (list "after a dozen games" guess-result-first)
                                 (list "after two reloads" guess-result-after))])
          (define r ((cadr which) g))
          (define ok? (pair? (pool-result-members r)))
          (line (list (car which) (mode (guess-result-preload? g))
                      (if ok? (fmt-mib (pool-kb r)) "-")
                      (if ok? (pool-summary r) "-")
                      (if ok? (workers-by-generation r) "-")
                      (if ok? (format "~a s (reading took ~a ms)" (fmt-s (pool-result-after-ms r)) (fmt-ms (pool-result-read-ms r))) "-")
                      (string-append
                       (pool-result-note r)
                       (if (and ok? (eq? (cadr which) guess-result-after) (pair? (guess-result-reload-ms g)))
                           (format "; the two ctl reloads took ~a s"
                                   (string-join (map (λ (ms) (~r (/ ms 1000.0) #:precision '(= 2))) (guess-result-reload-ms g)) ", "))
                           ""))))))
       "\nWorkers by generation: their count, state and PSS summed. With preload each "
       "page of a generation's loaded image is shared by its loader and the workers forked "
       "from it, so a generation costs about its image once plus what "
       "each worker made its own; a generation left draining keeps its image.\n")))

;; slope-markdown : (listof pool-result) -> string
(define (slope-markdown pools)
  (if (null? pools)
      ""
      (string-append
       "\n### A pool's PSS at 1, 2, 4 and 8 workers\n\n"
       (format "Each pool after ~a `GET /` (more rounds until each worker served one) and a second idle. " request-count)
       "The slope is the least-squares slope of the pool's PSS over its worker count: what an added worker costs.\n\n"
       (header (append (list "app" "mode")
                       (map (λ (n) (format "~a MiB" n)) pool-sizes)
                       (list "slope MiB/worker" "target (preload)" "result")))
       (string-append*
        (for*/list ([app (list hello-servlet hello-raw)] [p? '(#t #f)])
          (define rs (for/list ([n (in-list pool-sizes)])
                       (findf (λ (r) (and (equal? (pool-result-app r) app) (= (pool-result-n r) n)
                                          (eq? (pool-result-preload? r) p?)))
                              pools)))
          (define s (slope-of pools app p?))
          (define target (if (equal? app hello-servlet) 24 12))
          (line (append (list app (mode p?))
                        (for/list ([r (in-list rs)])
                          (if (and r (pair? (pool-result-members r))) (fmt-mib (pool-kb r)) "-"))
                        (list (if s (~r s #:precision '(= 1)) "-")
                              (if p? (format "<= ~a" target) "")
                              (if (and p? s) (pass-miss (<= s target)) ""))))))
       "\nEach pool, process by process:\n\n"
       (header (list "app" "mode" "workers" "pool PSS MiB" "processes (PSS MiB)" "PSS read after the last request" "note"))
       (string-append*
        (for/list ([r (in-list pools)])
          (define ok? (pair? (pool-result-members r)))
          (line (list (pool-result-app r) (mode (pool-result-preload? r)) (number->string (pool-result-n r))
                      (if ok? (fmt-mib (pool-kb r)) "-")
                      (if ok? (pool-summary r) "-")
                      (if ok? (format "~a s (reading took ~a ms)" (fmt-s (pool-result-after-ms r)) (fmt-ms (pool-result-read-ms r))) "-")
                      (string-append
                       (if (pair? (pool-result-served r))
                           (format "requests per worker ~a" (string-join (map ~a (pool-result-served r)) "/"))
                           "")
                       (if (and (pair? (pool-result-served r)) (not (equal? (pool-result-note r) ""))) "; " "")
                       (pool-result-note r)))))))))

;; timing-markdown : (listof timing) -> string
(define (timing-markdown timings)
  (define (each xs) (string-join (map fmt-ms xs) ", "))
  (define (secs xs) (string-join (map (λ (ms) (~r (/ ms 1000.0) #:precision '(= 2))) xs) ", "))
  (if (null? timings)
      ""
      (string-append
       (format "\n### A killed worker replaced, and `ctl reload`, ~a servlet workers\n\n" timed-workers)
       (format "On the servlet pool of ~a workers above, after its PSS was read. " timed-workers)
       (format "~a times: the pool settled (its ~a workers of the current generation idle in the " kills timed-workers)
       "status file), the oldest idle worker SIGKILLed once it is at least 11 s old (the "
       "manager counts a worker that dies within 10 s of its start as a crash, and delays "
       "the start that follows a second crash in a row, twice as long each time: a kill "
       "timed here is not a crash), then the status file (which the manager "
       "rewrites when it changes) polled every 10 ms until it lists a pid it did not list "
       "before, in state idle: the time from the signal to that sight (also: when the "
       "killed pid left the status file, and when the new pid was first listed, starting). Then "
       (format "~a times `raco fastcgi ctl reload --pid-file P` from a settled pool: its wall time " reloads)
       "(it returns once the manager says the new generation serves), when the status file "
       "(polled every 10 ms meanwhile) first listed a worker of the new generation and first "
       "named the new generation as the one serving, and the time until it also shows the "
       "new generation's workers all idle. `raco fastcgi ctl status`'s "
       "wall time is what raco's own start-up costs any ctl command.\n\n"
       (header (list "mode" "killed worker replaced, ms (each)" "median ms" "target (preload)" "result"
                     "killed pid gone / new pid listed, ms (medians)"
                     "ctl reload, s (each)" "median s" "target (preload)" "result"
                     "a new worker listed / new generation serving, s (medians)"
                     "new workers all idle, s (each)" "ctl status, s" "note"))
       (string-append*
        (for/list ([t (in-list timings)])
          (define p? (timing-preload? t))
          (define k (timing-kill-ms t))
          (define rl (timing-reload-ms t))
          (line (list (mode p?)
                      (if (pair? k) (each k) "-")
                      (if (pair? k) (fmt-ms (median k)) "-")
                      (if p? "<= 150" "")
                      (if (and p? (pair? k)) (pass-miss (<= (median k) 150)) "")
                      (if (pair? (timing-kill-phases t))
                          (format "~a / ~a" (fmt-ms (median (map car (timing-kill-phases t))))
                                  (fmt-ms (median (map cadr (timing-kill-phases t)))))
                          "-")
                      (if (pair? rl) (secs rl) "-")
                      (if (pair? rl) (~r (/ (median rl) 1000.0) #:precision '(= 2)) "-")
                      (if p? "<= 2" "")
                      (if (and p? (pair? rl)) (pass-miss (<= (median rl) 2000)) "")
                      (let ([ph (timing-reload-phases t)])
                        (define (med-of f) (let ([xs (filter values (map f ph))]) (if (pair? xs) (~r (/ (median xs) 1000.0) #:precision '(= 2)) "?")))
                        (if (pair? ph) (format "~a / ~a" (med-of car) (med-of cadr)) "-"))
                      (if (pair? (timing-settle-ms t)) (secs (timing-settle-ms t)) "-")
                      (if (timing-raco-ms t) (~r (/ (timing-raco-ms t) 1000.0) #:precision '(= 2)) "-")
                      (timing-note t))))))))

(module+ main
  (require racket/cmdline)
  (command-line
   #:usage-help "Measures PSS per process and per pool, with and without preload (make bench's memory scenario), and prints its markdown."
   #:once-each
   [("--only") parts "Comma-separated parts: floor, pools (the slope, the per-process rows, kills and reloads), timings (only the kills and reloads), guess, php, c"
               (memory-parts (map string->symbol (string-split parts ",")))])
  (void (require-program! php-fpm "php8.2-fpm")
        (require-program! gcc "gcc"))
  (define started (current-inexact-milliseconds))
  (call-with-temp-dir
   "fcgimem"
   (λ (dir)
     (build-c! dir)
     (define php-socket (path->string (build-path dir "php.sock")))
     (write-php-files! dir php-socket)
     (define run
       (memory-rows dir
                    #:c-address (format "unix:~a" (build-path dir "c.sock"))
                    #:php-address (string-append "unix:" php-socket)
                    #:ours-address (format "unix:~a" (build-path dir "ours.sock"))))
     (newline)
     (write-string (memory-markdown run))
     (printf "\n(measured in ~a s)\n" (round (/ (- (current-inexact-milliseconds) started) 1000)))
     (flush-output))))
