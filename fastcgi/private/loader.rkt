#lang racket/base
;; The loader of a generation (`serve`, preloading): a process that loads the app once,
;; makes its heap static and then forks the generation's workers on the manager's
;; request, so that they share the loaded image (fork.rkt). It is given the listening
;; socket as fd 0 and keeps it on a close-on-exec descriptor, which every worker it forks
;; inherits (and puts back on its fd 0); it never accepts on it.
;;
;; It talks to the manager on its own control connection (control.rkt's keys first):
;;   loader PID            it is up
;;   loaded BYTES          the app is loaded, the heap (BYTES) static: it takes fork lines
;;   unsafe WHAT; WHAT...  loading the app left what a fork cannot share: it exits, and
;;                         the manager starts the generation's workers as processes of
;;                         their own (each loads the app)
;;   forced WHAT; WHAT...  the same found with --preload: it forks all the same
;;   failed REASON         the app does not load (escaped: one line); it exits 3
;; and for each manager's line   fork ID   it answers   forked ID PID   (PID -1: the fork
;; failed). The forked process returns from the fork in this module and becomes worker
;; ID (worker.rkt's run-worker): the app and the worker's modules are already there.
;; SIGTERM, or the end of its control connection, stops it; so does the manager's death.
(require ffi/unsafe/port
         racket/runtime-path
         racket/string
         (only-in "ffi.rkt" [c-getpid getpid] dup-cloexec null-onto!)
         "app.rkt"
         "config.rkt"
         "control.rkt"
         "fork.rkt"
         "log.rkt"
         "logging.rkt"
         "signals.rkt"
         "transport.rkt"
         "worker.rkt")
(provide run-loader)

;; What a servlet worker loads at its first use of them (define-lazy): loaded here, they
;; are in the shared image rather than in each worker.
(define-runtime-module-path-index servlet-mod "servlet.rkt")
(define-runtime-module-path-index web-mod "web.rkt")
(define-runtime-module-path-index relay-mod "relay.rkt")
(define-runtime-module-path-index sessions-mod "sessions.rkt")
(define servlet-modules
  (list servlet-mod web-mod relay-mod sessions-mod
        'web-server/servlet/web-cells 'web-server/http/xexpr))

;; run-loader : serve-config -> none
(define (run-loader cfg)
  (define master-pid (serve-config-master-pid cfg))
  (break-enabled #f)
  (set-process-name! "fastcgi-loader")
  (die-with-parent! master-pid SIGTERM)
  (start-stderr-logging! (serve-config-log-level cfg) #:tag (format "[~a]" (getpid)))
  (define-values (in out)
    (with-handlers ([exn:fail? (λ (e)
                                 (log-fastcgi-fatal "loader: cannot reach the manager: ~a" (log-escape (exn-message e)))
                                 (flush-logging)
                                 (exit 3))])
      (define-values (in out) (private-connect (control-name (serve-config-pool-prefix cfg))))
      (read-keys in 30)
      (values in out)))
  (define (report! fmt . args)
    (with-handlers ([exn:fail? (λ (e) #f)])
      (write-string (string-append (apply format fmt args) "\n") out)
      (flush-output out)
      #t))
  (report! "loader ~a" (getpid))
  ;; the listening socket (fd 0) leaves the standard descriptors while the app loads, as
  ;; in a worker: a program the app starts at load does not get it as its standard input
  (define listen-fd (dup-cloexec 0))
  (unless (exact-integer? listen-fd)
    (report! "failed cannot keep the listening socket: errno ~a" (car listen-fd))
    (exit 3))
  (null-onto! 0)
  (define kind
    (with-handlers ([(λ (e) #t)
                     (λ (e)
                       (report! "failed cannot load ~a: ~a" (log-escape (serve-config-app cfg))
                                (log-escape (if (exn? e) (without-prefix (exn-message e)) (format "~e" e))))
                       (flush-logging)
                       (exit 3))])
      (preload-app (serve-config-app cfg))))
  (when (eq? kind 'servlet)
    (for ([m (in-list servlet-modules)]) (dynamic-require m #f)))
  (define hazards (fork-hazards (list listen-fd (unsafe-port->file-descriptor in) (unsafe-port->file-descriptor out))))
  (when (pair? hazards)
    (define what (string-join (map log-escape hazards) "; "))
    (unless (eq? (serve-config-preload cfg) #t)
      (report! "unsafe ~a" what)
      (flush-logging)
      (exit 0))
    (report! "forced ~a" what))
  (make-heap-static!)
  (report! "loaded ~a" (current-memory-use))
  (serve-forks cfg listen-fd in out report!))

;; serve-forks : serve-config fd input-port output-port (string any ... -> any) -> none
;; Answers the manager's fork lines until it goes away or SIGTERM comes.
(define (serve-forks cfg listen-fd in out report!)
  (let loop ()
    (define line (with-handlers ([exn:break? (λ (e) eof)]
                                 [exn:fail? (λ (e) eof)])
                   (sync/enable-break (read-line-evt* in))))
    (define m (and (string? line) (regexp-match #px"^fork ([0-9]+)$" line)))
    (cond
      [(eof-object? line) (flush-logging) (exit 0)]
      [(not m) (loop)]
      [else
       (define id (string->number (cadr m)))
       (flush-logging)
       (flush-output (current-output-port))
       (flush-output (current-error-port))
       (define pid (fork-child!))
       (cond
         [(zero? pid) (become-worker! cfg id listen-fd in out)]
         [else
          (when (negative? pid) (log-fastcgi-error "loader: fork failed"))
          (report! "forked ~a ~a" id pid)
          (loop)])])))

;; read-line-evt* : input-port -> evt ; ready with the next line, read by this thread
(define (read-line-evt* in)
  (wrap-evt in (λ (_) (read-line in 'linefeed))))

;; become-worker! : serve-config natural fd input-port output-port -> none
;; In the forked process: what it shares with the loader and its siblings is made its
;; own, then it serves as worker id, with the listening socket as fd 0 (run-worker takes
;; it from there, as a spawned worker does).
(define (become-worker! cfg id listen-fd in out)
  (fresh-runtime-descriptors!)
  (move-descriptor! listen-fd 0)
  (close-input-port in)
  (close-output-port out)
  (reseed-random!)
  (set-process-name! "fastcgi-worker")
  ;; the manager is its parent once the intermediate exited (fork.rkt)
  (unless (await-new-parent! (serve-config-master-pid cfg) 10)
    (log-fastcgi-fatal "forked worker ~a: not re-parented to the manager" id)
    (flush-logging)
    (exit 3))
  (run-worker (serve-config-for-worker cfg #:pool-prefix (serve-config-pool-prefix cfg)
                                      #:master-pid (serve-config-master-pid cfg) #:worker-id id)))

;; without-prefix : string -> string ; load-app's own errors without their "raco-fastcgi: "
(define (without-prefix msg)
  (if (regexp-match? #rx"^raco-fastcgi: " msg) (substring msg 14) msg))
