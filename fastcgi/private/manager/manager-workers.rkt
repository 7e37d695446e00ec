#lang racket/base
;; The manager's hands on single workers (manager.rkt): spawn one, stop one (drain!,
;; retire!, at once: cut!), mark one to be recycled, and maintain! the pool at the size
;; the process manager (pm.rkt) asks for.
(require racket/list
         "../os/child-process.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         (only-in "../worker/lines.rkt" message-line)
         "../util/log.rkt"
         "../util/relative-path.rkt"
         "../os/racket-program.rkt"
         "lifecycle.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" workers)
         "pm.rkt"
         "../os/signals.rkt")
(provide spawn! spawn-process! release-wanted! pass-wanted! add-worker! fork-timeout
         start-loader! start-loader-as-process! loader-process-started! start-waiting-loaders!
         start-base! base-kind-known! stop-loader! stop-idle-loaders! stopped-loader-exited!
         drain! cut! retire! recycle! maintain! starts-now)

(define-relative-path worker-module "../worker/worker-main.rkt")
(define-relative-path loader-module "../worker/loader-main.rkt")

(define hard-grace 1)             ; seconds between SIGTERM and SIGKILL past --max-memory-hard
(define fork-timeout 5)           ; seconds a loader may take to answer a fork line

;; spawn! : manager natural -> (or/c worker #f)
;; A worker of generation g. With preloading, its loader forks it (one is started for g
;; if there is none: the worker is forked once it has loaded); then #f is returned, and
;; the worker is added when the loader answers (fork-reply!). Else, or when g's loader
;; cannot fork, a process of its own that loads the app.
(define (spawn! m g)
  (define ld (and (manager-preload? m) (generation-loader m g)))
  (cond
    [(not (manager-preload? m)) (spawn-process! m g)]
    [(or (not ld) (eq? (loader-state ld) 'gone))
     (define new (start-loader! m g))
     (set-loader-wanted! new (add1 (loader-wanted new)))
     #f]
    [(memq (loader-state ld) '(waiting forking loading))
     (set-loader-wanted! ld (add1 (loader-wanted ld)))
     #f]
    [(eq? (loader-state ld) 'ready)
     (define id (next-worker-id! m))
     (if (ask-fork! m ld (message-line 'manager 'fork #:id id) 'worker id g #f)
         #f
         (spawn-process! m g))]
    [else (spawn-process! m g)]))

;; release-wanted! : manager loader -> void
;; The workers asked of ld while it could not fork yet are asked again now (forked once
;; it is ready, processes of their own once it cannot fork), while its generation is wanted.
(define (release-wanted! m ld)
  (define n (loader-wanted ld))
  (set-loader-wanted! ld 0)
  (when (wanted-generation? m (loader-gen ld))
    (for ([_ (in-range n)]) (spawn! m (loader-gen ld)))))

;; pass-wanted! : loader loader -> void ; what a dead loader was asked goes to its successor
(define (pass-wanted! from to)
  (set-loader-wanted! to (loader-wanted from)))

;; worker-config : manager natural -> serve-config ; what worker id runs with
(define (worker-config m id)
  (serve-config-for-worker (manager-config m) #:pool-prefix (manager-prefix m)
                           #:master-pid (manager-pid m) #:worker-id id))

;; next-worker-id! : manager -> natural
(define (next-worker-id! m)
  (define id (add1 (manager-next-id m)))
  (set-manager-next-id! m id)
  id)

;; spawn-process! : manager natural -> worker ; a worker of generation g, given the
;; listening socket as fd 0 and its configuration on its command line (config.rkt)
(define (spawn-process! m g)
  (define id (next-worker-id! m))
  (define sp (start-racket m worker-module (worker-config m id)))
  (add-worker! m (make-worker #:id id #:process sp #:generation g #:now (now-ms))))

;; add-worker! : manager worker -> worker
(define (add-worker! m w)
  (hash-set! (manager-workers m) (worker-pid w) w)
  (log-fastcgi-debug "started worker ~a (generation ~a~a)" (worker-pid w) (worker-gen w)
                     (if (worker-forked? w) ", forked" ""))
  w)

;; start-racket : manager path serve-config [(listof string)] -> subprocess
;; racket running module with the arguments and the configuration, the listening socket
;; as fd 0
(define (start-racket m module cfg [args '()])
  (define-values (sp out in err)
    (apply subprocess (passable (current-output-port)) (manager-listen-port m) (passable (current-error-port))
           (racket-program) "-N" (if (eq? module loader-module) "fastcgi-loader" "fastcgi-worker")
           "-t" (path->string module)
           "--" (append args (list (let ([o (open-output-string)]) (write-serve-config cfg o) (get-output-string o))))))
  sp)

;; start-loader! : manager natural -> loader
;; Generation g's loader. The first generation's is a process of its own; once it has
;; loaded, the kind of app is known (base-kind), and every later loader (a reload's, or
;; one that replaces a dead loader) is forked from the pool's base, which is started for
;; the first of them (the loader waits for it): it shares the runtime and the libraries
;; with the other generations. Without a usable base, a process of its own.
(define (start-loader! m g)
  (define base (or (manager-base m)
                   (and (manager-base-kind m) (start-base! m (manager-base-kind m)))))
  (define ld (make-loader #:generation g #:process #f #:now (now-ms)))
  (hash-set! (manager-loaders m) g ld)
  (if (and base (eq? (loader-state base) 'loading))
      (log-fastcgi-debug "generation ~a's loader waits for the base" g)
      (start-loader-process! m ld))
  ld)

;; start-waiting-loaders! : manager -> void
;; The base is ready, or cannot serve: the loaders that waited for it start.
(define (start-waiting-loaders! m)
  (define base (manager-base m))
  (unless (or (manager-stopping? m) (and base (eq? (loader-state base) 'loading)))
    (for ([ld (in-list (hash-values (manager-loaders m)))]
          #:when (eq? (loader-state ld) 'waiting))
      (start-loader-process! m ld))))

;; start-loader-process! : manager loader -> void
;; A waiting loader is asked of the ready base (it is 'forking until the base answers:
;; fork-reply!), or else started as a process of its own.
(define (start-loader-process! m ld)
  (define base (manager-base m))
  (define g (loader-gen ld))
  (cond
    [(and base (eq? (loader-state base) 'ready)
          (ask-fork! m base (message-line 'manager 'loader #:gen g) 'loader g g ld))
     (loader-move! ld 'fork)]
    [else (start-loader-as-process! m ld)]))

;; start-loader-as-process! : manager loader -> void ; a process of its own, not forked
(define (start-loader-as-process! m ld)
  (loader-process-started! m ld (start-racket m loader-module (worker-config m 0))))

;; loader-process-started! : manager loader child-process -> void
(define (loader-process-started! m ld sp)
  (loader-started! ld sp (now-ms))
  (log-fastcgi-debug "started loader ~a (generation ~a~a)" (loader-pid ld) (loader-gen ld)
                     (if (subprocess? sp) "" ", forked from the base")))

;; start-base! : manager (or/c 'raw 'servlet) -> loader ; the pool's base, loading
(define (start-base! m kind)
  (set-manager-base-kind! m kind)
  (define sp (start-racket m loader-module (worker-config m 0)
                           (list (if (eq? kind 'servlet) "base-servlet" "base-raw"))))
  (define base (make-loader #:generation 0 #:process sp #:now (now-ms)))
  (set-manager-base! m base)
  (log-fastcgi-debug "started the base ~a (~a)" (loader-pid base) kind)
  base)

;; base-kind-known! : manager (or/c 'raw 'servlet) -> void ; what the first generation loaded
(define (base-kind-known! m kind)
  (unless (manager-base-kind m) (set-manager-base-kind! m kind)))

;; ask-fork! : manager loader string (or/c 'worker 'loader) natural natural (or/c loader #f)
;;             -> boolean
;; Writes line (fork ID, or loader GEN) to the forker and notes what its answer will be
;; for (kind: a worker of id n, or the loader ld of generation n), and until when it is
;; awaited; #f when the line cannot be written. The manager goes on meanwhile: the answer
;; comes as a message (fork-reply!), its absence at the tick (fork-deadlines!).
(define (ask-fork! m forker line kind n g ld)
  (and (with-handlers ([exn:fail? (λ (e) #f)])
         (write-string line (loader-control forker))
         (newline (loader-control forker))
         (flush-output (loader-control forker))
         #t)
       (begin
         (hash-set! (manager-forks m) (fork-key kind n)
                    (make-fork-ask #:forker forker #:kind kind #:n n #:generation g #:loader ld
                                   #:deadline (+ (now-ms) (* 1000 fork-timeout))))
         #t)))

;; fork-key : (or/c 'worker 'loader) natural -> pair ; the answer's verb and number
;; (manager-forks.rkt matches the answers)
(define (fork-key kind n) (cons (if (eq? kind 'worker) 'forked 'forked-loader) n))

;; stop-loader! : manager natural -> void ; generation g needs its loader no more
(define (stop-loader! m g)
  (define ld (generation-loader m g))
  (when ld
    (hash-remove! (manager-loaders m) g)
    (set-manager-stopped-loaders! m (cons ld (manager-stopped-loaders m)))
    (when (and (loader-sp ld) (eq? (child-status (loader-sp ld)) 'running))
      (log-fastcgi-debug "stopping loader ~a (generation ~a)" (loader-pid ld) g)
      (send-signal! (loader-pid ld) SIGTERM))))

;; stopped-loader-exited! : manager loader -> void ; a stopped loader is gone: forget it
(define (stopped-loader-exited! m ld)
  (set-manager-stopped-loaders! m (remq ld (manager-stopped-loaders m))))

;; stop-idle-loaders! : manager -> void
;; The loaders of generations that neither serve nor start and have no live worker left.
;; One whose old generation still drains stays: its workers share its image with it
;; (without it, the image's pages become the last worker's own, and count as its private
;; memory against --max-memory-hard), and it costs nothing beyond them.
(define (stop-idle-loaders! m)
  (for ([g (in-list (hash-keys (manager-loaders m)))]
        #:unless (or (= g (manager-gen m)) (eqv? g (manager-reload-gen m))
                     (for/or ([w (in-list (live-workers m))]) (= (worker-gen w) g))))
    (stop-loader! m g)))

;; drain! : manager worker string -> void ; SIGTERM: it finishes what it holds and exits
;; (a retiring worker too: it stops serving its sessions)
(define (drain! m w why)
  (unless (and (eq? (worker-state w) 'draining) (not (worker-retiring? w)))
    (log-fastcgi-info "stopping worker ~a (~a)" (worker-pid w) why)
    (worker-move! w 'drain
                  #:deadline (+ (now-ms) (* 1000 (+ (manager-cfg m serve-config-graceful-timeout) 2))))
    (send-signal! (worker-pid w) SIGTERM)))

;; cut! : manager worker string -> void
;; A worker past the hard memory ceiling is not waited for, since what makes it grow
;; would go on while it drains: SIGTERM now, so that what can finish within hard-grace
;; seconds does, then SIGKILL (manager-watch.rkt); its replacement starts at once.
(define (cut! m w why)
  (unless (hash-ref (manager-cut m) w #f)
    (hash-set! (manager-cut m) w #t)
    (log-fastcgi-warning "stopping worker ~a at once (SIGKILL in ~a s): ~a" (worker-pid w) hard-grace why)
    (define draining? (eq? (worker-state w) 'draining))
    (unless (or (worker-recycle w) draining?)
      (set-worker-recycle! w why)
      (total-add! m 'recycled 1))
    (worker-move! w 'drain #:deadline (min (+ (now-ms) (* 1000 hard-grace))
                                           (if draining? (worker-drain-deadline w) +inf.0)))
    (send-signal! (worker-pid w) SIGTERM)
    (maintain! m)))

;; retire! : manager worker string -> void
;; A worker that is replaced: it stops taking connections, finishes what it holds and
;; serves its servlet sessions (continuation URLs other workers pass on to it) until
;; they end or session-drain seconds pass. Without a control connection, drain!.
(define (retire! m w why)
  (cond
    [(eq? (worker-state w) 'draining) (void)]
    [(and (worker-control w)
          (with-handlers ([exn:fail? (λ (e) #f)])
            (write-string (message-line 'manager 'retire #:successors (successor-ids m w)) (worker-control w))
            (newline (worker-control w))
            (flush-output (worker-control w))
            #t))
     (log-fastcgi-info "retiring worker ~a (~a)" (worker-pid w) why)
     (worker-move! w 'retire #:deadline (+ (now-ms)
                                           (* 1000 (+ (manager-cfg m serve-config-session-drain)
                                                      (* 2 (manager-cfg m serve-config-graceful-timeout))
                                                      5))))]
    [else (drain! m w why)]))

;; successor-ids : manager worker -> (listof natural)
;; The ids of the ready workers of the newest generation but w: a retiring worker hands
;; its kept connections over to them (handover.rkt) instead of closing them under the front
(define (successor-ids m w)
  ;; (one waiting to be recycled only when there is no other)
  (define ready* (filter (λ (x) (and (eq? (worker-state x) 'ready) (not (eq? x w))))
                         (live-workers m)))
  (define fresh (filter (λ (x) (not (worker-recycle x))) ready*))
  (define ready (if (null? fresh) ready* fresh))
  (define newest (for/fold ([g 0]) ([x (in-list ready)]) (max g (worker-gen x))))
  (for/list ([x (in-list (shuffle ready))] #:when (= (worker-gen x) newest))
    (worker-id x)))

;; recycle! : manager worker string -> void ; it is replaced once its successor is ready
(define (recycle! m w why)
  (unless (or (worker-recycle w) (eq? (worker-state w) 'draining))
    (log-fastcgi-info "recycling worker ~a: ~a" (worker-pid w) why)
    (set-worker-recycle! w why)
    (total-add! m 'recycled 1)
    (maintain! m)))

;; maintain! : manager -> void ; ask the process manager what to start and stop, and do it
;; (workers already asked of a loader that is loading count as started)
(define (maintain! m)
  (unless (manager-stopping? m)
    (define now (now-ms))
    (define current (serving m (manager-gen m)))
    (define fresh (filter (λ (w) (not (worker-recycle w))) current))
    (define decision (pm-decide (manager-plan m) (map worker-view fresh) now))
    (when (pm-decision-max-reached? decision) (total-add! m 'max_workers_reached 1))
    (for ([p (in-list (pm-decision-stop decision))])
      (define w (hash-ref (manager-workers m) p #f))
      (when w (retire! m w (pm-decision-why decision))))
    (define n (starts-now m (max 0 (- (pm-decision-start decision) (pending-forks m (manager-gen m))))))
    (when (and (positive? n) (not (manager-reload-gen m)))
      (cond
        [(< now (manager-next-spawn-ms m)) (void)]
        [else (for ([_ (in-range n)]) (spawn! m (manager-gen m)))]))))

;; starts-now : manager natural -> natural
;; Of n workers the process manager wants started, how many start now: those that replace
;; workers waiting to be recycled start one at a time, once no other worker of the serving
;; generation is starting. Workers that grow alike pass --max-memory together (as workers
;; started together reach --max-requests together without --max-requests-jitter), and
;; replacing them all at once leaves the pool to just-started workers, each handed every
;; kept connection of the one it replaces while the new processes take the cores. One at
;; a time, the others serve on meanwhile; the hard ceiling still stops one at once (cut!).
(define (starts-now m n)
  (define current (serving m (manager-gen m)))
  (define replacing (min n (count worker-recycle current)))
  (define in-flight (+ (pending-forks m (manager-gen m))
                       (count (λ (w) (and (eq? (worker-state w) 'starting) (not (worker-recycle w))))
                              current)))
  (- n (- replacing (min replacing (if (zero? in-flight) 1 0)))))

;; worker-view : worker -> pm-worker
(define (worker-view w)
  (pm-worker (worker-pid w) (worker-state w) (worker-active w) (worker-last-busy-ms w)))

;; passable : port -> (or/c port #f) ; subprocess takes file-stream ports only
(define (passable p) (and (file-stream-port? p) p))
