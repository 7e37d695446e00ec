#lang racket/base
;; The loader of a generation (`serve`, preloading): a process that loads the app once,
;; makes its heap static and then forks the generation's workers on the manager's
;; request, so that they share the loaded image (fork.rkt). It is given the listening
;; socket as fd 0 and keeps it on a close-on-exec descriptor, which every worker it forks
;; inherits (and puts back on its fd 0); it never accepts on it.
;;
;; It talks to the manager on its own control connection (manager-link.rkt), in the lines
;; of lines.rkt's loader channel: after   loader PID   it says
;;   loaded KIND BYTES         the app (raw or servlet) is loaded, the heap (BYTES) static:
;;                             it takes fork lines
;;   unsafe WHAT; WHAT...      loading the app left what a fork cannot share: it exits, and
;;                             the manager starts the generation's workers as processes of
;;                             their own (each loads the app)
;;   forced WHAT; WHAT...      the same found with --preload: it forks all the same
;;   refused WHY               this Racket's runtime is not as a fork expects (fork.rkt),
;;                             found before loading: it exits, as for unsafe, even with
;;                             --preload
;;   failed REASON             the app does not load (escaped: one line); it exits 3
;; and for each manager's line   fork ID   it answers   forked ID PID   (PID -1: the fork
;; failed). The forked process returns from the fork in this module and becomes worker
;; ID (worker.rkt's run-worker): the app and the worker's modules are already there.
;;
;; The pool's base (run-base) is the same program without the app: it says   base PID,
;; then   ready BYTES   (or unsafe, or refused), and answers each   loader G   with   forked-loader G
;; PID: that process becomes generation G's loader, as above, on top of the base's heap.
;; SIGTERM, or the end of its control connection, stops either; so does the manager's death.
(require ffi/unsafe/port
         racket/string
         (only-in "../os/ffi.rkt" [c-getpid getpid] dup-cloexec null-onto!)
         "app.rkt"
         "config.rkt"
         "manager-link.rkt"
         "../os/fork.rkt"
         "../os/inherit.rkt"
         "../util/log.rkt"
         "../util/relative-path.rkt"
         "../os/logging.rkt"
         "../os/signals.rkt"
         "worker.rkt")
(provide run-loader)

;; What a servlet worker loads at its first use of them (define-lazy): loaded here, they
;; are in the shared image rather than in each worker.
(define-relative-path servlet-mod "../servlet/servlet.rkt")
(define-relative-path web-mod "../servlet/web.rkt")
(define-relative-path relay-mod "../servlet/relay.rkt")
(define-relative-path sessions-mod "../servlet/sessions.rkt")
(define servlet-modules
  (list servlet-mod web-mod relay-mod sessions-mod
        'web-server/servlet/web-cells 'web-server/http/xexpr))

;; run-loader : serve-config [#:base (or/c #f 'raw 'servlet)] -> none
;; A generation's loader; with base, the pool's base instead (run-base).
(define (run-loader cfg #:base [base #f])
  (break-enabled #f)
  ;; a program the app starts while it loads gets 0-2 and nothing else (inherit.rkt)
  (keep-no-descriptors!)
  (set-process-name! (if base "fastcgi-base" "fastcgi-loader"))
  (die-with-parent! (serve-config-master-pid cfg) SIGTERM)
  (start-stderr-logging! (serve-config-log-level cfg) #:tag (format "[~a]" (getpid)))
  (define-values (in out report!) (connect-as-loader cfg (if base 'base 'loader)))
  ;; a fork rests on what Racket does not document (fork.rkt), probed before the app
  ;; loads; where it does not hold, the manager starts processes that load for themselves
  (define refusal (fork-refusal))
  (when refusal
    (report! 'refused #:why (log-escape refusal))
    (flush-logging)
    (exit 0))
  ;; the listening socket (fd 0) leaves the standard descriptors, as in a worker: a
  ;; program started while loading does not get it as its standard input
  (define listen-fd (dup-cloexec 0))
  (unless (exact-integer? listen-fd)
    (report! 'failed #:why (format "cannot keep the listening socket: errno ~a" (car listen-fd)))
    (exit 3))
  (null-onto! 0)
  (if base
      (run-base cfg base listen-fd in out report!)
      (load-generation cfg listen-fd in out report!)))

;; connect-as-loader : serve-config (or/c 'loader 'base)
;;                     -> (values input-port output-port (symbol #:FIELD value ... -> boolean))
;; The control connection (keys read), and its reporter, once the process said who it is.
(define (connect-as-loader cfg who)
  (define-values (in out secret relay-key) (connect-manager (serve-config-pool-prefix cfg) "loader: "))
  (define report! (make-reporter out 'loader))
  (report! who #:pid (getpid))
  (values in out report!))

;; load-generation : serve-config fd input-port output-port (string any ... -> any) -> none
;; Loads the app, checks what a fork cannot share, makes the heap static, then forks.
(define (load-generation cfg listen-fd in out report!)
  (define kind
    (with-handlers ([(λ (e) #t)
                     (λ (e)
                       (report! 'failed
                                #:why (format "cannot load ~a: ~a" (log-escape (serve-config-app cfg))
                                              (log-escape (if (exn? e) (without-prefix (exn-message e)) (format "~e" e)))))
                       (flush-logging)
                       (exit 3))])
      (preload-app (serve-config-app cfg))))
  (when (eq? kind 'servlet) (load-servlet-modules!))
  (define hazards (fork-hazards (list listen-fd (unsafe-port->file-descriptor in) (unsafe-port->file-descriptor out))))
  (when (pair? hazards)
    (define what (string-join (map log-escape hazards) "; "))
    (unless (eq? (serve-config-preload cfg) #t)
      (report! 'unsafe #:what what)
      (flush-logging)
      (exit 0))
    (report! 'forced #:what what))
  (make-heap-static!)
  (report! 'loaded #:kind kind #:image (current-memory-use))
  (serve-forks cfg listen-fd in out report!))

;; load-servlet-modules! : -> void
(define (load-servlet-modules!)
  (for ([m (in-list servlet-modules)]) (dynamic-require m #f)))

;; run-base : serve-config (or/c 'raw 'servlet) fd input-port output-port
;;            (string any ... -> any) -> none
;; The pool's base: the runtime and the worker's modules (and web-server's, for a servlet)
;; loaded once, heap static, no app. Each later generation's loader is forked from it
;; (a line   loader G   answered   forked-loader G PID) and loads only the app on top, so
;; that generations share all that (a reload keeps old generations while their sessions
;; drain). The app itself is never loaded here: a reload must find its new code.
(define (run-base cfg kind listen-fd in out report!)
  (when (eq? kind 'servlet) (load-servlet-modules!))
  (define hazards (fork-hazards (list listen-fd (unsafe-port->file-descriptor in) (unsafe-port->file-descriptor out))))
  (when (pair? hazards)
    (report! 'unsafe #:what (string-join (map log-escape hazards) "; "))
    (flush-logging)
    (exit 0))
  (make-heap-static!)
  (report! 'ready #:image (current-memory-use))
  (answer-forks in report! 'loader 'gen 'forked-loader
                (λ (g)
                  (become-own! cfg in out)
                  (set-process-name! "fastcgi-loader")
                  (define-values (in2 out2 report2!) (connect-as-loader cfg 'loader))
                  (load-generation cfg listen-fd in2 out2 report2!))))

;; serve-forks : serve-config fd input-port output-port (string any ... -> any) -> none
;; Answers the manager's fork lines until it goes away or SIGTERM comes.
(define (serve-forks cfg listen-fd in out report!)
  (answer-forks in report! 'fork 'id 'forked
                (λ (id) (become-worker! cfg id listen-fd in out))))

;; answer-forks : input-port reporter symbol symbol symbol (natural -> none) -> none
;; For each of the manager's lines ASK (its field named field: N), a fork: the child runs
;; (child N); the parent answers ANSWER N PID (PID -1: the fork failed). Until the manager
;; goes away or SIGTERM comes.
(define (answer-forks in report! ask field answer child)
  (let loop ()
    (define m (next-manager-line in))
    (cond
      [(eof-object? m) (flush-logging) (exit 0)]
      [(not (and m (eq? (car m) ask))) (loop)]
      [else
       (define n (hash-ref (cdr m) field))
       (define pid (fork-flushed!))
       (cond
         [(zero? pid) (child n)]
         [else
          (when (negative? pid) (log-fastcgi-error "~a: fork failed" ask))
          (if (eq? answer 'forked)
              (report! 'forked #:id n #:pid pid)
              (report! 'forked-loader #:gen n #:pid pid))
          (loop)])])))

;; fork-flushed! : -> integer ; fork-child!, the logs and standard ports flushed first
(define (fork-flushed!)
  (flush-logging)
  (flush-output (current-output-port))
  (flush-output (current-error-port))
  (fork-child!))

;; become-worker! : serve-config natural fd input-port output-port -> none
;; In the forked process: what it shares with the loader and its siblings is made its
;; own, then it serves as worker id, with the listening socket as fd 0 (run-worker takes
;; it from there, as a spawned worker does).
(define (become-worker! cfg id listen-fd in out)
  (become-own! cfg in out)
  (move-descriptor! listen-fd 0)
  (set-process-name! "fastcgi-worker")
  (run-worker (serve-config-for-worker cfg #:pool-prefix (serve-config-pool-prefix cfg)
                                      #:master-pid (serve-config-master-pid cfg) #:worker-id id)))

;; become-own! : serve-config input-port output-port -> void
;; In a forked process: what it shares with its forker and siblings is made its own (the
;; runtime's descriptors, the random generator; the forker's control connection closed),
;; once the manager is its parent (the intermediate has exited: fork.rkt).
(define (become-own! cfg in out)
  (fresh-runtime-descriptors!)
  (close-input-port in)
  (close-output-port out)
  (reseed-random!)
  (unless (await-new-parent! (serve-config-master-pid cfg) 10)
    (log-fastcgi-fatal "forked process: not re-parented to the manager")
    (flush-logging)
    (exit 3))
  (die-with-parent! (serve-config-master-pid cfg) SIGTERM))
