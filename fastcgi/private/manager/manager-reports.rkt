#lang racket/base
;; What the workers tell the manager (manager.rkt), over its control socket (control.rkt),
;; in the lines of lines.rkt: a thread per connection reads each line as its channel's
;; message and hands it to the main loop, which applies it here: ready (and a reload's new
;; generation taking over), stat, metrics, limit, recycle, failed, beat. A worker answering
;; the status path asks for the board instead. A generation's loader (loader.rkt) reports
;; on such a connection too: loaded, unsafe, refused, forced, failed, and its answers to
;; fork lines (forked, forked-loader: manager-forks.rkt's fork-reply!). A process that
;; reports before the manager knows its pid (a forked one, whose fork's answer is still on
;; its way) is a stranger: its messages are held, and applied once the answer comes; one
;; that stays unknown past stranger-ms is stopped (expire-strangers!): no process serves
;; on the listening socket untracked.
(require racket/list
         (only-in racket/string string-split)
         "../util/clock.rkt"
         "../worker/control.rkt"
         "../util/log.rkt"
         (only-in "../util/probes.rkt" probe-line)
         "manager-reload.rkt"
         "lifecycle.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" reports)
         "manager-status.rkt"
         "manager-workers.rkt"
         "manager-forks.rkt"
         "manager-stacks.rkt"
         "manager-canary.rkt"
         (only-in "../os/signals.rkt" send-signal! SIGKILL)
         (only-in "../status/metrics.rkt" counts->metrics)
         "../worker/lines.rkt"
         "../transport/transport.rkt")
(provide start-control-thread!
         message!
         expire-strangers!
         await-reports!)

;; start-control-thread! : manager -> thread
;; Each control connection gets the keys first; then a worker says "hello PID" and reports,
;; or a worker answering the status path asks for the board (the last one published).
(define (start-control-thread! m)
  (thread
   (λ ()
     (let loop ()
       (define-values (in out peer)
         (with-handlers ([exn:fail? (λ (e) (values #f #f #f))]) (listener-accept (manager-control m))))
       (when in
         (thread (λ ()
                   (with-handlers ([exn:fail? void]) (write-keys! out (manager-secret m) (manager-relay-key m)))
                   (read-reports in out (manager-messages m) (λ () (manager-last-board m)))))
         (loop))))))

;; read-reports : input-port output-port channel (-> (or/c hash #f)) -> void
;; After hello (a worker's) or loader or base (a loader's), the main loop gets (list pid
;; out), the port to ask the worker to retire or the loader to fork, then (list pid msg)
;; for each line (msg: the message, lines.rkt's parse-line of the worker's or the loader's
;; channel; #f for a line it is not), then (list pid eof) when the connection ends. Asked
;; for the board instead, it answers and the connection ends.
(define (read-reports in out messages board)
  (define greeting
    (with-handlers ([exn:fail? (λ (e) #f)])
      (define line (read-line in))
      (and (string? line) (parse-line 'greeting line))))
  (when (and greeting (eq? (car greeting) 'board))
    (with-handlers ([exn:fail? void]) (answer-board! out (board))))
  ;; an ask for the stacks: the main loop answers on out, and closes it (manager-stacks.rkt)
  (define stacks? (and greeting (eq? (car greeting) 'stacks)))
  (when stacks? (channel-put messages (list 'stacks out)))
  ;; `ctl reload --canary`: a reload with this trial (ctl reads its outcome in the status)
  (when (and greeting (eq? (car greeting) 'reload))
    (channel-put messages (list 'reload (hash-ref (cdr greeting) 'canary-ms))))
  (define pid (and greeting (hash-ref (cdr greeting) 'pid #f)))
  (define channel (and greeting (if (eq? (car greeting) 'hello) 'worker 'loader)))
  (when pid
    (channel-put messages (list pid out))
    (with-handlers ([exn:fail? void])
      (let loop ()
        (define line (read-line in))
        (when (string? line)
          (channel-put messages (list pid (parse-line channel line)))
          (loop))))
    (channel-put messages (list pid eof)))
  (close-input-port in)
  (unless (or pid stacks?) (with-handlers ([exn:fail? void]) (close-output-port out))))

;; message! : manager (list natural (or/c output-port eof-object message #f)) -> void
;; From a worker's or a loader's control connection: its port (after hello), a message
;; (#f: a line that is none), its end.
(define (message! m msg)
  (case (first msg)
    [(stacks) (stacks-asked! m (second msg))]
    [(reload) (reload! m #:canary (/ (second msg) 1000.0))]
    [else (process-message! m msg)]))

;; process-message! : manager (list natural any) -> void ; message! of a process's connection
(define (process-message! m msg)
  (define w (hash-ref (manager-workers m) (first msg) #f))
  (define ld (and (not w) (loader-by-pid m (first msg))))
  (define x (second msg))
  (cond
    [ld (loader-message! m ld x)]
    [(not w) (hold! m (first msg) x)]
    [(output-port? x) (when w (set-worker-control! w x))]
    [(eof-object? x) (when w (set-worker-reports-done?! w #t))]
    [else
     (when w (set-worker-heard-ms! w (now-ms)))
     (handle-message! m (first msg) x)]))

;; handle-message! : manager natural (or/c message #f) -> void
(define (handle-message! m pid msg)
  (define w (hash-ref (manager-workers m) pid #f))
  (when (and w msg)
    (define f (cdr msg))
    (case (car msg)
      ;; (a worker stopped before its ready line came stays stopped)
      [(ready) (when (eq? (worker-state w) 'starting) (ready! m w) (publish! m (now-ms)))]
      [(stat) (stat! w f)]
      [(metrics) (let ([x (counts->metrics (hash-ref f 'counts))]) (when x (set-worker-metrics! w x)))]
      [(limit) (let ([n (hash-ref f 'max-requests)])
                 (set-worker-max-requests! w (and (positive? n) n)))]
      [(recycle) (recycle! m w (hash-ref f 'why))]
      ;; escaped by the worker: one line of plain ASCII
      [(failed) (worker-failed! w (hash-ref f 'why))]
      [(stacks) (stacks-answered! m w (hash-ref f 'query) (hash-ref f 'json))]
      [else (void)])))

;; await-reports! : manager (-> boolean) -> void
;; The last lines of a process that exited (why it could not start) may still be on their
;; way when its exit is seen: they are read and applied until done? (its connection has
;; ended), for at most a second.
(define (await-reports! m done?)
  (define deadline (+ (now-ms) 1000))
  (let loop ()
    (unless (or (done?) (> (now-ms) deadline))
      (define msg (sync/timeout 0.05 (manager-messages m)))
      (when msg (message! m msg))
      (loop))))

;; loader-by-pid : manager natural -> (or/c loader #f)
(define (loader-by-pid m pid)
  (define base (manager-base m))
  (if (and base (eqv? (loader-pid base) pid))
      base
      (for/first ([ld (in-hash-values (manager-loaders m))] #:when (eqv? (loader-pid ld) pid)) ld)))

;; loader-message! : manager loader (or/c output-port eof-object message #f) -> void
(define (loader-message! m ld x)
  (cond
    [(output-port? x) (set-loader-control! ld x)]
    [(eof-object? x) (set-loader-reports-done?! ld #t)]
    [(not x) (void)]
    [else
     (define f (cdr x))
     (define base? (eq? ld (manager-base m)))
     ;; what and why: escaped by the loader, one line of plain ASCII. What it says of
     ;; its loading counts while it loads (lifecycle.rkt's moves from loading)
     (define loading? (eq? (loader-state ld) 'loading))
     (case (and (or loading? (memq (car x) '(forked forked-loader forced failed))) (car x))
       [(loaded) (loaded! m ld (hash-ref f 'kind) (hash-ref f 'image))]
       [(ready) (when base? (base-ready! m ld (hash-ref f 'image)))]
       [(unsafe) (if base? (base-unsafe! m ld (hash-ref f 'what)) (unsafe! m ld (hash-ref f 'what)))]
       [(refused) (if base?
                      (base-unsafe! m ld (hash-ref f 'why) #:refused? #t)
                      (unsafe! m ld (hash-ref f 'why) #:refused? #t))]
       [(forced)
        (log-fastcgi-warning "generation ~a: --preload: forking all the same, though loading the app left what a fork cannot share: ~a"
                             (loader-gen ld) (hash-ref f 'what))]
       [(failed) (loader-failed! ld (hash-ref f 'why))]
       [(forked forked-loader)
        (define pid (fork-reply! m ld x))
        (when pid
          (replay-stranger! m pid)
          ;; a changed pool is published at once, as a spawned worker is (manager.rkt)
          (publish! m (now-ms)))]
       [else (void)])]))

;; A stranger's messages are held for stranger-ms at most (well past a fork's deadline),
;; and at most stranger-max of them (a worker's hello, ready and first reports).
(define stranger-ms 10000.)
(define stranger-max 64)
;; At most this many strangers at once (forks answered late are few): a process of the
;; pool's user that opens connection after connection, each claiming a pid, holds no more;
;; the connection of one past it is closed at once.
(define strangers-max 256)

;; hold! : manager natural any -> void
;; A message of a process the manager does not know, from the start of its connection (its
;; port comes first); the rest of a connection whose process is gone is passed over.
(define (hold! m pid x)
  (define strangers (manager-strangers m))
  (define s (or (hash-ref strangers pid #f)
                (and (output-port? x)
                     (cond
                       [(>= (hash-count strangers) strangers-max)
                        (with-handlers ([exn:fail? void]) (close-output-port x))
                        #f]
                       [else (let ([s (make-stranger #:now (now-ms))]) (hash-set! strangers pid s) s)]))))
  (when (and s (< (length (stranger-msgs s)) stranger-max))
    (set-stranger-msgs! s (cons x (stranger-msgs s)))))

;; replay-stranger! : manager natural -> void ; the messages a process sent before it was known
(define (replay-stranger! m pid)
  (define s (hash-ref (manager-strangers m) pid #f))
  (when s
    (hash-remove! (manager-strangers m) pid)
    (for ([x (in-list (reverse (stranger-msgs s)))]) (message! m (list pid x)))))

;; expire-strangers! : manager flonum -> void
;; A process still unknown stranger-ms after it first reported was forked and never
;; answered for (its forker died or was killed in between): its control connection is
;; closed (which stops a worker) and, a child of the manager's, it is killed, so that none
;; serves untracked.
(define (expire-strangers! m now)
  (for ([(pid s) (in-hash (hash-copy (manager-strangers m)))]
        #:when (> (- now (stranger-first-ms s)) stranger-ms))
    (hash-remove! (manager-strangers m) pid)
    (log-fastcgi-warning "process ~a reported on the control socket but was never started or forked by the manager: stopping it" pid)
    (total-add! m 'untracked_stopped 1)
    (for ([x (in-list (stranger-msgs s))] #:when (output-port? x))
      (with-handlers ([exn:fail? void]) (close-output-port x)))
    (when (child-of? pid (manager-pid m)) (send-signal! pid SIGKILL))))

;; child-of? : natural natural -> boolean ; is process pid parent's child (/proc)?
(define (child-of? pid parent)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define stat (call-with-input-file (format "/proc/~a/stat" pid) (λ (in) (read-string 4096 in))))
    ;; pid (comm) state ppid ...: comm may hold spaces and parentheses
    (define after (substring stat (add1 (let loop ([i (sub1 (string-length stat))])
                                           (if (char=? (string-ref stat i) #\)) i (loop (sub1 i)))))))
    (define fields (string-split after))
    (equal? (string->number (cadr fields)) parent)))

;; loaded! : manager loader (or/c 'raw 'servlet #f) (or/c natural #f) -> void
;; The generation's workers asked so far are forked now. The first generation's kind is
;; what the pool's base will load (manager-workers.rkt's start-loader!).
(define (loaded! m ld kind image)
  (loader-move! ld 'loaded)
  (set-loader-image! ld image)
  (define g (loader-gen ld))
  (log-fastcgi-info "generation ~a loaded once by loader ~a (a heap of ~a MiB, shared): forking its workers"
                    g (loader-pid ld) (if image (quotient image 1048576) "?"))
  (when kind (base-kind-known! m kind))
  (release-wanted! m ld))

;; base-ready! : manager loader (or/c natural #f) -> void
(define (base-ready! m base image)
  (loader-move! base 'loaded)
  (set-loader-image! base image)
  (log-fastcgi-debug "the base ~a is ready (a heap of ~a MiB): later loaders are forked from it"
                     (loader-pid base) (if image (quotient image 1048576) "?"))
  (start-waiting-loaders! m))

;; base-unsafe! : manager loader string #:refused? boolean -> void
;; Loading the libraries left what a fork cannot share, or (refused?) this Racket's
;; runtime is not as a fork expects (what: why, escaped by the base): loaders start as
;; processes.
(define (base-unsafe! m base what #:refused? [refused? #f])
  (loader-move! base 'unsafe)
  (define then "each generation's loader loads the libraries itself")
  (if refused?
      (log-fastcgi-warning "the base: ~a" (probe-line "forking from a loaded image" what then))
      (log-fastcgi-warning "the base: loading the libraries left what a fork cannot share (~a): ~a" what then))
  (start-waiting-loaders! m))

;; unsafe! : manager loader string #:refused? boolean -> void
;; The generation's workers each load the app, as with --no-preload.
(define (unsafe! m ld what #:refused? [refused? #f])
  (loader-move! ld 'unsafe)
  (define g (loader-gen ld))
  (define then "each worker loads the app itself")
  (if refused?
      (log-fastcgi-warning "generation ~a: ~a" g (probe-line "forking from a loaded image" what then))
      (log-fastcgi-warning "generation ~a: loading the app left what a fork cannot share (~a): ~a" g what then))
  (release-wanted! m ld))

;; stat! : worker hash -> void
;; A stat message's counters (a worker of another install may send fewer or more: those
;; it does not send stay as they were).
(define (stat! w f)
  (define (get k) (hash-ref f k #f))
  (when (or (positive? (or (get 'active) 0)) (> (or (get 'requests) 0) (worker-requests w)))
    (set-worker-last-busy-ms! w (now-ms)))
  (define-syntax-rule (set-from! key setter) (let ([v (get key)]) (when v (setter w v))))
  (set-from! 'requests set-worker-requests!)
  (set-from! 'active set-worker-active!)
  (set-from! 'connections set-worker-connections!)
  (set-from! 'slow set-worker-slow!)
  (set-from! 'shed set-worker-shed!)
  (set-from! 'queue-delay set-worker-queue-delay!)
  (set-from! 'sessions set-worker-sessions!)
  (set-from! 'log-dropped set-worker-log-dropped!)
  (let ([age (get 'oldest-age-ms)])
    (when age (set-worker-oldest-ms! w (and (positive? age) (- (now-ms) age))))))

;; ready! : manager worker -> void
;; The last of a reload's new generation ready: the old one retires, the new one serves.
;; Otherwise a fresh worker takes the place of one of its generation waiting to be recycled.
(define (ready! m w)
  (worker-move! w 'ready)
  (set-worker-ready-ms! w (now-ms))
  (read-memory! w (now-ms))
  (set-manager-ever-ready?! m #t)
  (log-fastcgi-info "worker ~a ready (generation ~a)" (worker-pid w) (worker-gen w))
  (define reload-gen (manager-reload-gen m))
  (cond
    [(and reload-gen (= (worker-gen w) reload-gen))
     ;; a canary's first worker starts its trial instead (manager-canary.rkt); otherwise
     ;; the last of the generation ready (none still on its way from the loader) ends it
     (unless (canary-ready! m w)
       (when (and (zero? (pending-forks m reload-gen))
                  (andmap (λ (x) (eq? (worker-state x) 'ready)) (serving m reload-gen)))
         (finish-reload! m)))]
    [else
     (define waiting (sort (filter (λ (x) (and (worker-recycle x) (= (worker-gen x) (worker-gen w))
                                               (not (eq? (worker-state x) 'draining))))
                                   (live-workers m))
                           < #:key worker-started-ms))
     (when (pair? waiting) (retire! m (first waiting) (worker-recycle (first waiting))))]))
