#lang racket/base
;; The manager's state (manager.rkt): one struct per worker process, and one for the pool,
;; which every procedure of the manager's modules takes as its first argument. Only the
;; manager's main loop touches it, so it needs no locks. Also here: the queries over the
;; workers that several of those modules ask, and what the manager releases when it ends.
(require ffi/unsafe/port
         "../os/child-process.rkt"
         "../os/logging.rkt"
         "../transport/transport.rkt")
(provide (except-out (struct-out fork-ask) fork-ask)
         make-fork-ask
         (except-out (struct-out canary) canary set-canary-pid! set-canary-start-ms! set-canary-base!)
         make-canary
         (except-out (struct-out stranger) stranger set-stranger-msgs!)
         make-stranger
         (except-out (struct-out worker) worker
                     set-worker-state! set-worker-ready-ms! set-worker-requests! set-worker-active!
                     set-worker-connections! set-worker-slow! set-worker-shed!
                     set-worker-queue-delay! set-worker-sessions! set-worker-rss!
                     set-worker-drain-deadline! set-worker-recycle! set-worker-last-busy-ms!
                     set-worker-retiring?! set-worker-control! set-worker-failure!
                     set-worker-reports-done?! set-worker-log-dropped! set-worker-heard-ms!
                     set-worker-late! set-worker-metrics! set-worker-max-requests!
                     set-worker-private! set-worker-shared! set-worker-shared-ms!
                     set-worker-oldest-ms!)
         make-worker
         (except-out (struct-out loader) loader
                     set-loader-sp! set-loader-pid! set-loader-started-ms! set-loader-state!
                     set-loader-control! set-loader-wanted! set-loader-image! set-loader-failure!
                     set-loader-reports-done?! set-loader-rss! set-loader-exited?!
                     set-loader-deaths!)
         make-loader
         generation-loader
         read-memory!
         (except-out (struct-out manager) manager
                     set-manager-base! set-manager-base-kind! set-manager-stopped-loaders!
                     set-manager-secret! set-manager-gen! set-manager-next-id!
                     set-manager-stopping?! set-manager-failures! set-manager-last-failure-ms!
                     set-manager-last-start-error! set-manager-ever-ready?!
                     set-manager-next-spawn-ms! set-manager-reload-gen!
                     set-manager-reload-pending?! set-manager-reload-asks!
                     set-manager-reload-covers! set-manager-reload-settled!
                     set-manager-last-reload-error! set-manager-max-active!
                     set-manager-last-board! set-manager-last-board-ms!
                     set-manager-last-memory-ms! set-manager-files-ok?! set-manager-notify!
                     set-manager-canary!)
         make-manager
         crash-window-ms
         manager-cfg
         live-workers
         serving
         pending-forks
         wanted-generation?
         total-add!
         start-failures-over!
         crash-counted!
         clean-up!)

;; Who writes what. Every mutable field has one writer: the module named by the submodule
;; that provides its setter (manager-NAME.rkt, or lifecycle.rkt), the only module that
;; requires that submodule; the main module provides no setter. Fields not listed (a
;; worker's memory, the crash backoff) are written here. tests/manager-owners-test.rkt
;; checks it; tests reach any field through for-tests.
(module+ lifecycle
  (provide set-worker-state! set-worker-retiring?! set-worker-drain-deadline! set-worker-failure!
           set-loader-state! set-loader-sp! set-loader-pid! set-loader-started-ms!
           set-loader-failure!))
(module+ workers
  (provide set-worker-recycle! set-loader-wanted! set-manager-base! set-manager-base-kind!
           set-manager-next-id! set-manager-stopped-loaders!))
(module+ reports
  (provide set-worker-ready-ms! set-worker-requests! set-worker-active! set-worker-connections!
           set-worker-slow! set-worker-shed! set-worker-queue-delay! set-worker-sessions!
           set-worker-last-busy-ms! set-worker-control! set-worker-reports-done?!
           set-worker-log-dropped! set-worker-heard-ms! set-worker-metrics!
           set-worker-max-requests! set-worker-oldest-ms!
           set-loader-control! set-loader-image! set-loader-reports-done?!
           set-manager-ever-ready?! set-stranger-msgs!))
(module+ watch
  (provide set-worker-late! set-loader-rss! set-manager-last-memory-ms! set-manager-max-active!))
(module+ loader
  (provide set-loader-exited?! set-loader-deaths!))
(module+ reload
  (provide set-manager-secret! set-manager-gen! set-manager-reload-gen!
           set-manager-reload-pending?! set-manager-reload-asks! set-manager-reload-covers!
           set-manager-reload-settled! set-manager-last-reload-error! set-manager-canary!))
(module+ canary
  (provide set-canary-pid! set-canary-start-ms! set-canary-base!))
(module+ status
  (provide set-manager-files-ok?! set-manager-last-board! set-manager-last-board-ms!))
(module+ notify
  (provide set-manager-notify!))
(module+ manager
  (provide set-manager-stopping?!))
(module+ for-tests
  (require (submod ".." lifecycle) (submod ".." workers) (submod ".." reports)
           (submod ".." watch) (submod ".." loader) (submod ".." reload) (submod ".." canary)
           (submod ".." status) (submod ".." notify) (submod ".." manager))
  (provide (all-from-out (submod ".." lifecycle) (submod ".." workers) (submod ".." reports)
                         (submod ".." watch) (submod ".." loader) (submod ".." reload)
                         (submod ".." canary) (submod ".." status) (submod ".." notify)
                         (submod ".." manager))
           set-worker-rss! set-worker-private! set-worker-shared! set-worker-shared-ms!
           set-manager-failures! set-manager-last-failure-ms! set-manager-last-start-error!
           set-manager-next-spawn-ms!))

;; A worker that dies younger than this counts as a crash (manager-exits.rkt), and one
;; that lived longer since the last crash lets workers start without delay again.
(define crash-window-ms 10000.)

;; One worker process. id: its number in the pool (relay and handover names); gen: its
;; generation (a reload starts the next). state: 'starting 'ready 'draining. retiring?:
;; it was asked to retire (serve its servlet sessions, then stop) rather than to stop.
;; control: the output port of its control connection, once it said hello. failure: why it
;; could not start, as it said in a "failed" line. reports-done?: its control connection
;; has ended. heard-ms: when its last line came. late: #f, #t (silent past the late
;; threshold), or 'killed. recycle: why it waits to be replaced, or #f. The counters
;; (requests active connections slow shed queue-delay sessions log-dropped) are its last
;; stat line's; rss, private and shared its resident memory as last read (all of it, its
;; own pages, the pages it shares: a forked worker shares its loader's image); metrics its
;; last metrics line's (a metrics, metrics.rkt), or #f; max-requests the limit it drew (its
;; limit line), or #f; shared-ms: when its shared memory was last read; oldest-ms: when
;; (the manager's clock) its oldest running request began, as of its last stat line, or
;; #f with none. sp: its
;; child-process (child-process.rkt); forked?: a loader forked it.
(struct worker (id sp pid gen started-ms
                [state #:mutable] [ready-ms #:mutable]
                [requests #:mutable] [active #:mutable] [connections #:mutable] [slow #:mutable]
                [shed #:mutable] [queue-delay #:mutable] [sessions #:mutable]
                [rss #:mutable] [drain-deadline #:mutable] [recycle #:mutable]
                [last-busy-ms #:mutable] [retiring? #:mutable] [control #:mutable]
                [failure #:mutable] [reports-done? #:mutable] [log-dropped #:mutable]
                [heard-ms #:mutable] [late #:mutable] [metrics #:mutable]
                [max-requests #:mutable] [private #:mutable] [shared #:mutable] [shared-ms #:mutable]
                [oldest-ms #:mutable] forked?)
  #:transparent)

;; make-worker : #:id natural #:process child-process #:generation natural #:now flonum
;;               [#:forked? boolean] -> worker
(define (make-worker #:id id #:process sp #:generation gen #:now now #:forked? [forked? #f])
  (worker id sp (child-pid sp) gen now
          'starting #f
          0 0 0 0
          0 0 0
          #f #f #f
          now #f #f
          #f #f 0
          now #f #f
          #f #f #f -inf.0 #f forked?))

;; The loader of a generation (loader.rkt): the process that loads the app once and
;; forks the generation's workers. sp: its child-process (a subprocess, or forked by the
;; pool's base), #f while it waits for the base. state: 'waiting (for the base to be
;; ready), 'forking (asked of the base, whose answer is awaited), 'loading, 'ready (it
;; takes fork requests), 'unsafe (loading left what a fork cannot share: the generation's
;; workers load the app themselves), 'gone (it exited or failed), 'off (its generation's
;; loaders died young, or the app failed to load in it: the workers load the app
;; themselves). control: the output port
;; of its control connection, once it said hello. wanted: workers asked of it while it
;; loads, forked when it is ready. image: its heap once static (bytes), or #f. failure:
;; why the app does not load, as it said. reports-done?: its control connection ended.
;; rss: its resident memory as last read. exited?: the manager has seen it exit. deaths:
;; how many loaders of its generation died in a row soon after they started, before it.
(struct loader (gen [sp #:mutable] [pid #:mutable] [started-ms #:mutable]
                    [state #:mutable] [control #:mutable] [wanted #:mutable] [image #:mutable]
                    [failure #:mutable] [reports-done? #:mutable] [rss #:mutable]
                    [exited? #:mutable] [deaths #:mutable])
  #:transparent)

;; A fork asked of a loader (a worker: kind 'worker, n its id) or of the base (a loader:
;; kind 'loader, n its generation, ld the loader struct that waits for it); gen: the
;; generation; deadline-ms: when the forker is taken for stuck (killed, and what it was
;; asked for started as a process of its own).
(struct fork-ask (forker kind n gen ld deadline-ms))
;; make-fork-ask : #:forker loader #:kind symbol #:n natural #:generation natural
;;                 #:loader (or/c loader #f) #:deadline flonum -> fork-ask
(define (make-fork-ask #:forker forker #:kind kind #:n n #:generation gen #:loader ld
                       #:deadline deadline)
  (fork-ask forker kind n gen ld deadline))

;; A canary reload's trial (manager-canary.rkt). gen: the new generation; seconds: the
;; trial's length; total: the workers the generation will have once it rolls forward; pid:
;; the canary's, once ready; start-ms: when its trial started; base: pid -> (cons answers
;; 5xx) of each worker when the trial started.
(struct canary (gen seconds total [pid #:mutable] [start-ms #:mutable] [base #:mutable]))
;; make-canary : #:generation natural #:seconds real #:total natural -> canary ; not started
(define (make-canary #:generation gen #:seconds seconds #:total total)
  (canary gen seconds total #f #f #f))

;; A process the manager does not know yet that reported on its control socket: when it
;; first did, and its messages so far (newest first; at most stranger-max of them).
(struct stranger (first-ms [msgs #:mutable]) #:transparent)
;; make-stranger : #:now flonum -> stranger ; no message yet
(define (make-stranger #:now now) (stranger now '()))

;; make-loader : #:generation natural #:process (or/c child-process #f) #:now flonum -> loader
;; (the pool's base is one too, of generation 0: loader.rkt). Without a process, it waits
;; for the base (state 'waiting, no pid) and gets one with loader-started!.
(define (make-loader #:generation gen #:process sp #:now now)
  (loader gen sp (and sp (child-pid sp)) now (if sp 'loading 'waiting) #f 0 #f #f #f #f #f 0))


;; read-memory! : worker flonum -> void
;; Its resident memory, its shared part (read every shared-every-ms: costly) and its
;; private memory: resident less the shared part last read, which never overstates it
;; (pages shared at the fork only ever become private).
(define shared-every-ms 5000.)
(define (read-memory! w now)
  (define rss (process-rss (worker-pid w)))
  (set-worker-rss! w rss)
  (when (and rss (> (- now (worker-shared-ms w)) shared-every-ms))
    (set-worker-shared-ms! w now)
    (set-worker-shared! w (process-shared (worker-pid w))))
  (set-worker-private! w (and rss (max 0 (- rss (or (worker-shared w) 0))))))

;; The pool. Fixed at start: config (serve-config), pid, plan (pm-plan), listener and
;; address (the listening socket; listen-port: it as a port, for the workers' fd 0), control (the control socket's listener), prefix (its
;; name's, control.rkt), pid-file and scoreboard (#f without --pid-file), messages (the
;; channel of the control connections' lines), start-ms, relay-key, workers (pid ->
;; worker), totals (counters of workers that are gone, and of events), cut (the workers
;; stopped at once past the hard memory ceiling, once each).
;; Changing: secret (--secret-file's is read again at each reload); gen (the generation
;; that serves); next-id; stopping?; the crash backoff: failures (in a row),
;; last-failure-ms, last-start-error, ever-ready? (a worker has been ready: the app can
;; start), next-spawn-ms (no spawn before it). Reloads are counted as asked (SIGHUPs); one
;; asked while another is under way runs after it (several such collapse into one):
;; reload-gen (the generation a reload is starting, or #f), reload-pending?, reload-asks,
;; reload-covers (the asks made before the reload under way started), reload-settled
;; (those made before the last finished one started: `ctl reload` waits until it passes
;; its own ask), last-reload-error (#f when the last one worked). The status:
;; max-active, last-board and last-board-ms (the board last published), last-memory-ms
;; (when resident memory was last read), files-ok? (the status file could be written).
;; notify: what the manager tells systemd (manager-notify.rkt), or #f without NOTIFY_SOCKET.
;; canary: the trial of a canary reload under way (manager-canary.rkt), or #f.
;; Preloading: preload? (the workers are forked from a loader per generation: the
;; configuration allows it and the manager could become the subreaper of its
;; descendants), loaders (generation -> loader), forks (the forks asked and not yet
;; answered: (cons 'forked ID) or (cons 'forked-loader GEN), the answer awaited, -> fork-ask;
;; the manager never waits for one: manager-workers.rkt), strangers (pid -> stranger: the
;; lines of a process that reported before the manager knew its pid, a forked one whose
;; fork's answer is still on its way: manager-reports.rkt), queries (number -> the asks
;; for the running requests' stacks under way: manager-stacks.rkt) and query-seq (a box:
;; the last such number), base
;; (the pool's base, a loader struct of generation 0 from which later loaders are forked,
;; or #f), base-kind (what the base loads: 'raw or 'servlet, as the first generation) and
;; stopped-loaders (loaders stopped whose exit is still to be seen: a forked one is the
;; manager's to reap).
(struct manager (config pid plan listener address listen-port control prefix pid-file scoreboard
                        messages start-ms relay-key workers totals cut preload? loaders forks strangers
                        queries query-seq
                        [base #:mutable] [base-kind #:mutable] [stopped-loaders #:mutable]
                        [secret #:mutable] [gen #:mutable] [next-id #:mutable] [stopping? #:mutable]
                        [failures #:mutable] [last-failure-ms #:mutable] [last-start-error #:mutable]
                        [ever-ready? #:mutable] [next-spawn-ms #:mutable]
                        [reload-gen #:mutable] [reload-pending? #:mutable] [reload-asks #:mutable]
                        [reload-covers #:mutable] [reload-settled #:mutable] [last-reload-error #:mutable]
                        [max-active #:mutable] [last-board #:mutable] [last-board-ms #:mutable]
                        [last-memory-ms #:mutable] [files-ok? #:mutable] [notify #:mutable]
                        [canary #:mutable]))

;; make-manager : keyword ... -> manager ; the pool as it starts: no worker, generation 1
(define (make-manager #:config config #:pid pid #:plan plan #:listener listener
                      #:control control #:prefix prefix #:pid-file pid-file
                      #:secret secret #:relay-key relay-key #:start-ms start-ms
                      #:preload? [preload? #f])
  (manager config pid plan listener (listener-address listener)
           (unsafe-file-descriptor->port (listener-fd listener) 'listener '(read))
           control prefix pid-file
           (and pid-file (string-append pid-file ".status.json"))
           (make-channel) start-ms relay-key (make-hasheqv) (make-hasheq) (make-weak-hasheq)
           preload? (make-hasheqv) (make-hash) (make-hasheqv)
           (make-hasheqv) (box 0) #f #f '()
           secret 1 0 #f
           0 0. #f
           #f 0.
           #f #f 0
           0 0 #f
           0 #f 0.
           -inf.0 #t #f
           #f))

;; manager-cfg : manager (serve-config -> any) -> any ; an option's value
(define (manager-cfg m get) (get (manager-config m)))

;; generation-loader : manager natural -> (or/c loader #f)
(define (generation-loader m g) (hash-ref (manager-loaders m) g #f))

;; live-workers : manager -> (listof worker)
(define (live-workers m) (hash-values (manager-workers m)))

;; serving : manager natural -> (listof worker) ; starting or ready, in generation g
(define (serving m g)
  (filter (λ (w) (and (= (worker-gen w) g) (not (eq? (worker-state w) 'draining))))
          (live-workers m)))

;; pending-forks : manager natural -> natural
;; Workers of generation g on their way from its loader: asked of it while it loads, or
;; asked and not yet answered.
(define (pending-forks m g)
  (define ld (generation-loader m g))
  (+ (if (and ld (memq (loader-state ld) '(waiting forking loading))) (loader-wanted ld) 0)
     (for/sum ([a (in-hash-values (manager-forks m))])
       (if (and (eq? (fork-ask-kind a) 'worker) (= (fork-ask-gen a) g)) 1 0))))

;; wanted-generation? : manager natural -> boolean ; the one that serves or the one a reload starts
(define (wanted-generation? m g)
  (and (not (manager-stopping? m))
       (or (= g (manager-gen m)) (eqv? g (manager-reload-gen m)))))

;; total-add! : manager symbol number -> void
(define (total-add! m k n)
  (define totals (manager-totals m))
  (hash-set! totals k (+ n (hash-ref totals k 0))))

;; The crash backoff's fields are written here only.
;; crash-counted! : manager string flonum -> (or/c real #f)
;; A worker crashed (why) at now: one more failure in a row; from the second on, the next
;; start waits, twice as long each time: the delay in seconds, else #f.
(define (crash-counted! m why now)
  (define failures (add1 (manager-failures m)))
  (set-manager-failures! m failures)
  (set-manager-last-failure-ms! m now)
  (set-manager-last-start-error! m why)
  (and (> failures 1)
       (let ([delay (min 30. (* 0.1 (expt 2 (- failures 2))))])
         (set-manager-next-spawn-ms! m (+ now (* 1000 delay)))
         delay)))

;; start-failures-over! : manager [#:spawn-now? boolean] -> void
;; Workers start and last again (spawn-now?: a reload: the next start waits for nothing)
(define (start-failures-over! m #:spawn-now? [now? #f])
  (set-manager-failures! m 0)
  (set-manager-last-start-error! m #f)
  (when now? (set-manager-next-spawn-ms! m 0.)))

;; clean-up! : manager -> void ; the socket, the pid file and the status file go
(define (clean-up! m)
  (define pid-file (manager-pid-file m))
  (listener-close! (manager-listener m))
  (when (and pid-file (equal? (file->string* pid-file) (format "~a\n" (manager-pid m))))
    (delete-file* pid-file))
  (when (manager-scoreboard m) (delete-file* (manager-scoreboard m)))
  (listener-close! (manager-control m))
  (flush-logging))

;; file->string* : path -> (or/c string #f) ; a pid file's first line, or what of it fits
;; in 64 characters ("" when empty); #f when it cannot be read
(define (file->string* p)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define s (call-with-input-file p (λ (in) (read-string 64 in))))
    (if (eof-object? s) "" s)))
;; delete-file* : path -> void
(define (delete-file* p) (with-handlers ([exn:fail? void]) (delete-file p)))
