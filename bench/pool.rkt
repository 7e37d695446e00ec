#lang racket/base
;; A pool under `raco fastcgi serve --workers N`, seen from outside (bench/memory.rkt's
;; preload rows): its processes from /proc (the manager, the loader of each generation,
;; the workers, told apart by the status file and the process names), their PSS, the
;; status file, the guessing game of examples/guess.rkt played to the end through
;; fastcgi/client.rkt, a worker killed and its replacement timed, a reload timed.
(require json
         racket/file
         racket/list
         racket/path
         racket/string
         "../fastcgi/client.rkt"
         "../tests/integration/lib.rkt"
         "harness.rkt"
         "measure.rkt")
(provide (struct-out pool-proc)
         read-status
         status-workers
         pool-members
         members-pss-kb
         note-request!
         ms-since-last-request
         play-game!
         play-games!
         every-worker-has-session?
         time-kill!
         time-reload!
         reload-phases
         wait-settled
         raco-floor-ms
         stale-modules
         load-average
         median
         lsq-slope)

;; ---------------------------------------------------------------------------------------
;; The last request's time, for "PSS read N s after the last request" (BENCH.md).

(define last-request-ms #f)
(define (note-request!) (set! last-request-ms (current-inexact-milliseconds)))
;; ms-since-last-request : -> (or/c real #f)
(define (ms-since-last-request)
  (and last-request-ms (- (current-inexact-milliseconds) last-request-ms)))

;; ---------------------------------------------------------------------------------------
;; The status file (--pid-file P writes P.status.json, atomically: a rename).

;; read-status : path-string -> (or/c hash #f)
(define (read-status file)
  (define b (with-handlers ([exn:fail? (λ (e) #f)]) (call-with-input-file file read-json)))
  (and (hash? b) b))

;; status-workers : (or/c hash #f) -> (listof hash)
(define (status-workers b) (if b (hash-ref b 'workers '()) '()))

;; ---------------------------------------------------------------------------------------
;; The pool's processes.

;; pool-proc: a process of the pool: pid, role ('manager 'loader 'worker 'other), the worker's
;; generation and state from the status file (#f otherwise), and its name (comm).
(struct pool-proc (pid role generation state comm) #:transparent)

;; proc-entries : -> (listof (list pid ppid comm))
;; Every process (thread group) from /proc/PID/status; /proc lists thread groups only,
;; and an entry whose Tgid is not its Pid (a thread reached by its id) is dropped anyway.
(define (proc-entries)
  (for*/list ([d (in-list (directory-list "/proc"))]
              #:when (regexp-match? #rx"^[0-9]+$" (path->string d))
              [text (in-value (with-handlers ([exn:fail? (λ (e) #f)])
                                (file->string (build-path "/proc" d "status"))))]
              #:when text
              [f (in-value (λ (k) (let ([m (regexp-match (pregexp (format "(?m:^~a:\\s*(.*)$)" k)) text)])
                                    (and m (string-trim (cadr m))))))]
              #:when (equal? (f "Tgid") (f "Pid")))
    (list (string->number (f "Pid")) (string->number (f "PPid")) (or (f "Name") "?"))))

;; pool-members : natural (or/c hash #f) -> (listof pool-proc)
;; The manager and every process under it, each with its role: the status file's workers
;; by pid, a process named fastcgi-loader a loader (the workers forked from it rename
;; themselves fastcgi-worker; workers of --no-preload keep the name racket), the rest
;; 'other (e.g. the short-lived intermediate of a fork).
(define (pool-members manager board)
  (define entries (proc-entries))
  (define tree
    (let loop ([todo (list manager)] [seen '()])
      (cond
        [(null? todo) (reverse seen)]
        [else
         (define kids (for/list ([e (in-list entries)] #:when (= (cadr e) (car todo))) (car e)))
         (loop (append (cdr todo) kids) (cons (car todo) seen))])))
  (define by-pid (for/hash ([w (in-list (status-workers board))]) (values (hash-ref w 'pid #f) w)))
  (for/list ([pid (in-list tree)])
    (define comm (let ([e (assv pid entries)]) (if e (caddr e) "?")))
    (define w (hash-ref by-pid pid #f))
    (cond
      [(= pid manager) (pool-proc pid 'manager #f #f comm)]
      [w (pool-proc pid 'worker (hash-ref w 'generation #f) (hash-ref w 'state #f) comm)]
      [(equal? comm "fastcgi-loader") (pool-proc pid 'loader #f #f comm)]
      [(equal? comm "fastcgi-worker") (pool-proc pid 'worker #f #f comm)]
      [else (pool-proc pid 'other #f #f comm)])))

;; members-pss-kb : (listof pool-proc) -> (listof (cons pool-proc natural))
;; Each member's PSS; one that exited meanwhile is left out.
(define (members-pss-kb ms)
  (for*/list ([m (in-list ms)]
              [k (in-value (with-handlers ([exn:fail? (λ (e) #f)]) (pss-kb (pool-proc-pid m))))]
              #:when k)
    (cons m k)))

;; ---------------------------------------------------------------------------------------
;; The guessing game (examples/guess.rkt): GET / starts a game whose page's form posts
;; `guess` to a continuation URL; a binary search over 1-100 wins in at most 7 guesses.

;; request! : string string string bytes -> bytes ; the body of a 200 answer
(define (request! address method uri body)
  (define-values (status headers page)
    (fastcgi-request address #:method method #:uri uri #:body body #:timeout 30
                     #:headers (if (equal? method "POST")
                                   '(("Content-Type" . "application/x-www-form-urlencoded"))
                                   '())))
  (note-request!)
  (unless (= status 200)
    (error 'bench "~a ~a answered ~a: ~s" method uri status (subbytes page 0 (min 300 (bytes-length page)))))
  page)

;; form-action : bytes -> string ; the continuation URL the page's form posts to
(define (form-action page)
  (define m (regexp-match #rx#"<form[^>]* action=\"([^\"]+)\"" page))
  (unless m (error 'bench "no form in the game's page: ~s" (subbytes page 0 (min 300 (bytes-length page)))))
  (regexp-replace* #rx"&amp;" (bytes->string/utf-8 (cadr m)) "&"))

;; play-game! : string -> natural ; one game played to the end: the guesses it took
(define (play-game! address)
  (let loop ([lo 1] [hi 100] [page (request! address "GET" "/" #"")] [guesses 0])
    (when (> guesses 7) (error 'bench "a binary search took over 7 guesses"))
    (define g (quotient (+ lo hi) 2))
    (define next (request! address "POST" (form-action page) (string->bytes/utf-8 (format "guess=~a" g))))
    (cond
      [(regexp-match? #rx#"class=\"won\"" next) (add1 guesses)]
      [(regexp-match? #rx#"is too small" next) (loop (add1 g) hi next (add1 guesses))]
      [(regexp-match? #rx#"is too large" next) (loop lo (sub1 g) next (add1 guesses))]
      [else (error 'bench "the game answered neither a hint nor a win: ~s"
                   (subbytes next 0 (min 300 (bytes-length next))))])))

;; play-games! : string natural -> (listof natural)
;; n games, four at a time (so that the pool's workers share them): the guesses of each.
(define (play-games! address n)
  (define results (make-vector n #f))
  (define failure #f)
  (define threads
    (for/list ([t (in-range 4)])
      (thread (λ ()
                (with-handlers ([exn:fail? (λ (e) (set! failure e))])
                  (for ([i (in-range t n 4)])
                    (vector-set! results i (play-game! address))))))))
  (for ([t (in-list threads)])
    (unless (sync/timeout 120 t)
      (kill-thread t)
      (error 'bench "games on ~a took over 120 s" address)))
  (when failure (raise failure))
  (vector->list results))

;; every-worker-has-session? : (or/c hash #f) natural natural -> boolean
;; The n workers of generation gen hold a live session each.
(define (every-worker-has-session? board gen n)
  (define ws (for/list ([w (in-list (status-workers board))]
                        #:when (eqv? (hash-ref w 'generation #f) gen))
               w))
  (and (= (length ws) n) (andmap (λ (w) (positive? (hash-ref w 'sessions 0))) ws)))

;; ---------------------------------------------------------------------------------------
;; A worker killed, a reload.

;; settled? : (or/c hash #f) natural -> boolean
;; n workers of the current generation idle, and none starting.
(define (settled? b n)
  (and b
       (let* ([gen (hash-ref b 'generation #f)]
              [ws (status-workers b)]
              [current (filter (λ (w) (eqv? (hash-ref w 'generation #f) gen)) ws)])
         (and (= (length current) n)
              (andmap (λ (w) (equal? (hash-ref w 'state #f) "idle")) current)))))

;; wait-settled : path-string natural [real] -> hash ; the status once settled?
(define (wait-settled file n [secs 60])
  (define deadline (+ (current-inexact-milliseconds) (* 1000 secs)))
  (let loop ()
    (define b (read-status file))
    (cond
      [(settled? b n) b]
      [(> (current-inexact-milliseconds) deadline)
       (error 'bench "the pool did not settle (~a idle workers of the current generation) within ~a s" n secs)]
      [else (sleep 0.05) (loop)])))

;; The manager counts a worker that dies younger than this as a crash, and from the
;; second crash in a row on delays the next start, twice as long each time
;; (fastcgi/private/manager/manager-state.rkt, crash-window-ms: 10 s). A worker killed to time its
;; replacement is older, so that its death is not a crash.
(define crash-window-seconds 10)
(define victim-min-age (+ crash-window-seconds 1))

;; worker-age : hash -> real ; seconds since the worker started (its start_time)
(define (worker-age w)
  (- (/ (current-inexact-milliseconds) 1000.) (hash-ref w 'start_time 0)))

;; time-kill! : path-string natural -> (values real natural natural (list real real))
;; SIGKILL to the oldest idle worker of the current generation, once the pool settled and
;; that worker is victim-min-age old (waited for), then the status file polled every 10 ms
;; until it lists a worker whose pid was not there before, in state idle: the ms from the
;; signal to that sight, the killed pid, the new one, and the ms until the status file
;; first left out the killed pid and first listed the new one (in any state).
(define (time-kill! file n)
  (define (oldest b)
    (define gen (hash-ref b 'generation))
    (define idle (for/list ([w (in-list (status-workers b))]
                            #:when (and (eqv? (hash-ref w 'generation #f) gen)
                                        (equal? (hash-ref w 'state #f) "idle")))
                   w))
    (argmax worker-age idle))
  (define b
    (let loop ()
      (define b (wait-settled file n))
      (define age (worker-age (oldest b)))
      (cond
        [(>= age victim-min-age) b]
        [else (sleep (+ 0.05 (- victim-min-age age))) (loop)])))
  (define before (map (λ (w) (hash-ref w 'pid)) (status-workers b)))
  (define victim (hash-ref (oldest b) 'pid))
  (log-command! "kill" (list "-KILL" "WORKER-PID"))
  (define t0 (current-inexact-milliseconds))
  (unless (system-kill victim "-KILL") (error 'bench "kill -KILL ~a failed" victim))
  (define gone-ms #f)
  (define listed-ms #f)
  (let loop ()
    (define b (read-status file))
    (define ws (status-workers b))
    (define elapsed (- (current-inexact-milliseconds) t0))
    (when (and b (not gone-ms) (not (for/or ([w (in-list ws)]) (eqv? (hash-ref w 'pid #f) victim))))
      (set! gone-ms elapsed))
    (when (and (not listed-ms) (for/or ([w (in-list ws)]) (not (memv (hash-ref w 'pid #f) before))))
      (set! listed-ms elapsed))
    (define fresh
      (for/first ([w (in-list ws)]
                  #:when (and (not (memv (hash-ref w 'pid #f) before))
                              (equal? (hash-ref w 'state #f) "idle")))
        (hash-ref w 'pid)))
    (cond
      [fresh (values elapsed victim fresh (list (or gone-ms elapsed) (or listed-ms elapsed)))]
      [(> elapsed 30000) (error 'bench "worker ~a, killed, was not replaced by an idle worker within 30 s" victim)]
      [else (sleep 0.01) (loop)])))

;; system-kill : natural string -> boolean
(define (system-kill pid sig)
  (define-values (st out err) (run-program (string->path "/bin/kill") (list sig (number->string pid)) #:timeout 10))
  (eqv? st 0))

;; time-reload! : path-string path-string natural -> (values real real natural)
;; `raco fastcgi ctl reload --pid-file P` from a settled pool: its wall time in ms (it
;; returns once the manager says the new generation serves), the ms until the status also
;; shows the n workers of the new generation idle, and the new generation. Meanwhile the
;; status file is polled every 10 ms: the box reload-phases then holds the ms until it first
;; listed a worker of the new generation, and until it first said the new generation.
(define reload-phases (box #f))
(define (time-reload! pid-file status-file n)
  (define b (wait-settled status-file n))
  (define gen (hash-ref b 'generation))
  (define args (list "fastcgi" "ctl" "reload" "--pid-file" pid-file "--timeout" "60"))
  (log-command! raco args)
  (define t0 (current-inexact-milliseconds))
  (define listed-ms #f)
  (define serving-ms #f)
  (define watcher
    (thread (λ ()
              (let loop ()
                (define b (read-status status-file))
                (define t (- (current-inexact-milliseconds) t0))
                (when (and b (not listed-ms)
                           (for/or ([w (in-list (status-workers b))]) (> (hash-ref w 'generation 0) gen)))
                  (set! listed-ms t))
                (when (and b (not serving-ms) (> (hash-ref b 'generation 0) gen))
                  (set! serving-ms t))
                (unless (and listed-ms serving-ms)
                  (sleep 0.01)
                  (loop))))))
  (define-values (st out err) (run-program (string->path raco) args #:timeout 90))
  (define t1 (current-inexact-milliseconds))
  (sync/timeout 1 watcher)
  (kill-thread watcher)
  (set-box! reload-phases (list listed-ms serving-ms))
  (unless (and (eqv? st 0) (regexp-match? #rx#"^reloaded" out))
    (error 'bench "raco fastcgi ctl reload failed (~a): ~a ~a" st out err))
  (let loop ()
    (define b (read-status status-file))
    (cond
      [(and (settled? b n) (> (hash-ref b 'generation 0) gen))
       (values (- t1 t0) (- (current-inexact-milliseconds) t0) (hash-ref b 'generation))]
      [(> (- (current-inexact-milliseconds) t0) 60000)
       (error 'bench "generation ~a: ~a idle workers not seen within 60 s of the reload" (add1 gen) n)]
      [else (sleep 0.01) (loop)])))

;; raco-floor-ms : path-string -> real ; wall time of `raco fastcgi ctl status`: what
;; raco's own start-up costs any ctl command
(define (raco-floor-ms pid-file)
  (define args (list "fastcgi" "ctl" "status" "--pid-file" pid-file))
  (define t0 (current-inexact-milliseconds))
  (define-values (st out err) (run-program (string->path raco) args #:timeout 60))
  (unless (eqv? st 0) (error 'bench "raco fastcgi ctl status failed: ~a" err))
  (- (current-inexact-milliseconds) t0))

;; ---------------------------------------------------------------------------------------
;; The machine and the tree measured.

;; stale-modules : path -> (listof string)
;; The modules of the fastcgi collection (and of the apps given) newer than their compiled
;; code: racket then compiles them in memory when it loads them, which loads the compiler
;; (tens of MiB in each process) and takes seconds. Another hand editing the tree during a
;; run shows here.
(define (stale-modules repo [apps '()])
  (define files
    (append
     (for*/list ([d (let ([priv (build-path repo "fastcgi" "private")])
                      ;; the collection, private/ (a flat tree before the folders by layer) and its folders
                      (list* (build-path repo "fastcgi") priv
                             (if (directory-exists? priv)
                                 (filter directory-exists? (directory-list priv #:build? #t))
                                 '())))]
                 #:when (directory-exists? d)
                 [f (in-list (directory-list d #:build? #t))]
                 #:when (regexp-match? #rx"[.]rkt$" (path->string f)))
       f)
     (map (λ (a) (build-path repo a)) apps)))
  (for/list ([f (in-list files)]
             #:unless (let-values ([(dir name _) (split-path f)])
                        (define zo (build-path dir "compiled"
                                               (path-add-extension (path-replace-extension name #"_rkt") #".zo")))
                        (and (file-exists? zo)
                             (>= (file-or-directory-modify-seconds zo) (file-or-directory-modify-seconds f)))))
    (path->string (find-relative-path (simplify-path repo) (simplify-path f)))))

;; load-average : -> string ; the 1-minute load average (/proc/loadavg)
(define (load-average)
  (with-handlers ([exn:fail? (λ (e) "?")])
    (car (string-split (file->string "/proc/loadavg")))))

;; ---------------------------------------------------------------------------------------
;; Figures.

;; median : (listof real) -> real ; the lower middle one of an even count
(define (median xs)
  (define s (sort xs <))
  (list-ref s (quotient (sub1 (length s)) 2)))

;; lsq-slope : (listof real) (listof real) -> real ; least-squares slope of y on x
(define (lsq-slope xs ys)
  (define n (length xs))
  (define mx (/ (apply + xs) n))
  (define my (/ (apply + ys) n))
  (/ (for/sum ([x (in-list xs)] [y (in-list ys)]) (* (- x mx) (- y my)))
     (for/sum ([x (in-list xs)]) (* (- x mx) (- x mx)))))

(module+ test
  (require rackunit racket/os)
  (check-equal? (median '(5 1 3)) 3)
  (check-equal? (median '(4 1 3 2)) 2)
  (check-equal? (lsq-slope '(1 2 4 8) '(10 20 40 80)) 10)
  (check-equal? (lsq-slope '(1 2 4 8) '(15 25 45 85)) 10)
  (check-equal? (pool-proc-role (car (pool-members (getpid) #f))) 'manager))
