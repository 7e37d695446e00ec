#lang racket/base
;; `raco fastcgi dev APP.rkt`: the embedded front for trying an app with no nginx.
;; The app runs in a child process, the server of `raco fastcgi serve --single-process`
;; on a unix socket in a temporary folder; Racket's own web-server answers HTTP on --port,
;; serves --static folders, and forwards every other request over real FastCGI with the
;; params a front like nginx sends. For development, not production: each request is
;; buffered whole in both directions.
;;
;; Reloading. When a source file of the app changes, dev stops the child and starts a new
;; one, which loads the new code. A process rather than a fresh namespace in this one:
;; - a process takes all of the old code's state with it: its threads, open files and
;;   database connections, parameters it set, a call to `exit`;
;; - a namespace must share some modules with the server (web-server's request and
;;   response structs, its servlet prompt and managers, the fastcgi request struct, the
;;   stateless servlets' serializers) and only those; one missed, and requests fail with
;;   contract errors between two instances of one struct;
;; - the app runs exactly as `serve --single-process` runs it.
;; The price is a process start per reload, mostly spent loading libraries (web-server):
;; a spare process loads them ahead of time, and takes over at the next change.
;;
;; The child (the `child` submodule) reports every source file of the app it loads, with
;; its stamp: the modules outside the Racket installation and this collection, and the
;; files they include at compile time (include-template). dev compares those stamps every
;; half second, and before each request, so the next request after a save gets the new
;; code. The child compiles those modules from source: a compiled file left by `raco make`
;; may be stale against a dependency that changed since.
(require compiler/find-exe
         net/url
         racket/async-channel
         racket/cmdline
         racket/file
         racket/list
         racket/os
         racket/path
         racket/runtime-path
         setup/dirs
         web-server/dispatchers/dispatch
         (only-in web-server/dispatchers/dispatch-files read-range-header)
         (prefix-in lift: web-server/dispatchers/dispatch-lift)
         (prefix-in sequencer: web-server/dispatchers/dispatch-sequencer)
         web-server/http
         web-server/http/response
         web-server/http/status-code
         web-server/private/mime-types
         web-server/web-server
         "../client.rkt"
         (only-in (submod "../client.rkt" private) cgi-params)
         "log.rkt"
         "logging.rkt")
(provide handle-dev)

;; What the dev process and its child both need: file stamps and the installation test.
(module files racket/base
  (require racket/list
           racket/path)
  (provide file-stamp in-dirs?)

  ;; file-stamp : path -> (or/c (list integer natural natural) #f)
  ;; Modification time in nanoseconds, size and inode; #f for a missing file. The inode
  ;; changes when an editor saves by renaming a new file over the old one, even within
  ;; one tick of the file system's clock.
  (define (file-stamp p)
    (with-handlers ([exn:fail:filesystem? (λ (e) #f)])
      (define s (file-or-directory-stat p))
      (list (hash-ref s 'modify-time-nanoseconds) (hash-ref s 'size) (hash-ref s 'inode))))

  ;; in-dirs? : path (listof path) -> boolean ; is p inside one of the (simple-form) dirs
  (define (in-dirs? p dirs)
    (define parts (explode-path (simple-form-path p)))
    (for/or ([d (in-list dirs)])
      (define d-parts (explode-path d))
      (and (< (length d-parts) (length parts))
           (equal? d-parts (take parts (length d-parts)))))))

;; The app's process: racket -l racket/base -e '(require (submod (file DEV.rkt) child))' CFG
;; CFG is a `write`n hash: run-single's configuration (worker.rkt), and
;;   dev-files: the file this process appends a line to for every module file it loads:
;;     `(app PATH STAMP)` for the app's own files, before it loads them, `(lib PATH)` for
;;     the others, and `(uses SHIFT PATH)` for each library an app module requires;
;;   dev-error: the file that receives the error when the app does not load;
;;   warm-from: a copy of the dev-files of an earlier process of the same app (it may be
;;     missing);
;;   system-dirs: the folders whose modules are not the app's;
;;   parent-pid: dev's pid; this process gets SIGTERM when dev dies;
;;   dev-dir: dev's temporary folder, which this process removes when dev died first.
;; It loads the server and what warm-from lists (see warm!), then waits for a line on
;; stdin before it loads the app: dev keeps one such spare process ready, so that a reload
;; mostly costs the compilation of the app's own modules. dev keeps its stdin open as long
;; as it lives: at the end of stdin before that line, it exits 0. It exits 3 when the app
;; does not load.
(module child racket/base
  (require racket/list
           racket/path
           racket/runtime-path
           (submod ".." files))
  (define-runtime-path worker "worker.rkt")
  (define-runtime-path signals "signals.rkt")
  (define-runtime-path server-dir ".")
  (define cfg (read (open-input-string (vector-ref (current-command-line-arguments) 0))))
  (define system-dirs (map string->path (hash-ref cfg 'system-dirs)))

  (define files-out (open-output-file (hash-ref cfg 'dev-files) #:exists 'append))
  (define files-lock (make-semaphore 1))
  (define noted (make-hash))
  ;; report! : any -> void ; one line to dev-files
  (define (report! entry)
    (call-with-semaphore
     files-lock
     (λ ()
       (write-string (format "~s\n" entry) files-out)
       (flush-output files-out))))
  ;; note! : path boolean -> void ; report a file once (an app file with its stamp now)
  (define (note! p app?)
    (unless (hash-ref noted p #f)
      (hash-set! noted p #t)
      (report! (if app?
                   (list 'app (path->string p) (file-stamp p))
                   (list 'lib (path->string p))))))

  ;; note-uses! : path -> void
  ;; The library modules an app module (just declared) requires, at each phase shift, as
  ;; `(uses SHIFT PATH)`: what the next spare instantiates and makes available in advance.
  (define (note-uses! path)
    (with-handlers ([exn:fail? void])
      (for* ([phase+mpis (in-list (module->imports path))]
             #:when (car phase+mpis)
             [mpi (in-list (cdr phase+mpis))])
        (define name (resolved-module-path-name (module-path-index-resolve mpi)))
        (when (and (path? name) (in-dirs? name system-dirs))
          (report! (list 'uses (car phase+mpis) (path->string name)))))))

  ;; Every module file goes through here: noted, and an app module compiled from source.
  (define compiled-paths (use-compiled-file-paths))
  (define default-load/use-compiled (current-load/use-compiled))
  (current-load/use-compiled
   (λ (path name)
     (define app? (not (in-dirs? path system-dirs)))
     (note! path app?)
     (begin0
       (parameterize ([use-compiled-file-paths (if app? '() compiled-paths)])
         (default-load/use-compiled path name))
       (when (and app? (symbol? name))
         (note-uses! path)))))

  ;; log-unescape : string -> string ; undoes log-escape (log.rkt), which the server
  ;; applies to the error text of a failed load
  (define (log-unescape s)
    (bytes->string/utf-8
     (regexp-replace* #rx#"\\\\x([0-9a-f][0-9a-f])" (string->bytes/utf-8 s)
                      (λ (all hex) (bytes (string->number (bytes->string/latin-1 hex) 16))))
     #\?))

  ;; warm! : string -> void
  ;; Loads what an earlier process of the app loaded from the libraries: declares every
  ;; module; instantiates the server's own and those the app's modules require at phase
  ;; 0 (loading the app would run them first anyway: only what the app required runs);
  ;; and visits, as compiling the app's modules does first, what they require at every
  ;; phase.
  (define (warm! files)
    (define entries
      (if (file-exists? files)
          (call-with-input-file files
            (λ (in) (let loop ([acc '()])
                      (define e (with-handlers ([exn:fail:read? (λ (x) eof)]) (read in)))
                      (if (eof-object? e) (reverse acc) (loop (cons e acc))))))
          '()))
    (define (each kind proc)
      (for ([e (in-list entries)] #:when (and (pair? e) (eq? (car e) kind)))
        (with-handlers ([exn:fail? void]) (apply proc (cdr e)))))
    (each 'lib (λ (p) (module-declared? (string->path p) #t)))
    (each 'lib (λ (p) (when (in-dirs? (string->path p) (list (simple-form-path server-dir)))
                        (dynamic-require (string->path p) #f))))
    (each 'uses (λ (shift p) (when (eqv? shift 0) (dynamic-require (string->path p) #f))))
    (define specs
      (remove-duplicates
       (for/list ([e (in-list entries)] #:when (and (pair? e) (eq? (car e) 'uses)))
         `(for-meta ,(cadr e) (only (file ,(caddr e)))))))   ; no bindings: none can clash
    (with-handlers ([exn:fail? void])
      (expand `(module dev-warm '#%kernel (#%require ,@specs)))))

  ;; As in worker-main.rkt, the server's modules load under a logger with no parent. Files
  ;; that macros read at compile time (include, include-template) are logged to it on the
  ;; cm-accomplice topic, as raco make learns of them.
  (define logger (make-logger #f #f))
  (define accomplices (make-log-receiver logger 'info 'cm-accomplice))
  (void
   (thread (λ ()
             (let loop ()
               (define v (sync accomplices))
               (define d (vector-ref v 2))
               (when (prefab-struct-key d)
                 (define f (vector-ref (struct->vector d) 1))
                 (when (and (path? f) (not (in-dirs? f system-dirs)))
                   (note! f #t)))
               (loop)))))
  (parameterize ([current-logger logger])
    ((dynamic-require signals 'die-with-parent!) (hash-ref cfg 'parent-pid)
                                                 (dynamic-require signals 'SIGTERM))
    ;; dev killed (SIGKILL: no clean-up of its own), its processes remove its folder, each
    ;; what is left (they may run at once). Whichever shows it first: dev's main thread
    ;; is a zombie, or we were given to another parent, or stdin (which dev keeps open as
    ;; long as it lives) is at its end.
    (let ([exit (exit-handler)]
          [dir (hash-ref cfg 'dev-dir)]
          [dev (hash-ref cfg 'parent-pid)]
          [in (current-input-port)]
          [parent-pid (dynamic-require signals 'parent-pid)]
          [process-alive? (dynamic-require signals 'process-alive?)])
      (exit-handler (λ (code)
                      (when (or (not (process-alive? dev))
                                (not (= (parent-pid) dev))
                                (and (byte-ready? in) (eof-object? (peek-byte in))))
                        (for ([f (in-list (with-handlers ([exn:fail? (λ (e) '())])
                                            (directory-list dir #:build? #t)))])
                          (with-handlers ([exn:fail? void]) (delete-file f)))
                        (with-handlers ([exn:fail? void]) (delete-directory dir)))
                      (exit code))))
    (define run-single (dynamic-require worker 'run-single))
    (warm! (hash-ref cfg 'warm-from))
    (when (eof-object? (read-line))
      (exit 0))
    (with-handlers ([exn:fail?
                     (λ (e)
                       (define text (log-unescape (exn-message e)))
                       (call-with-output-file (hash-ref cfg 'dev-error) #:exists 'truncate
                         (λ (o) (write-string text o)))
                       (eprintf "~a\n" text)
                       (exit 3))])
      (run-single cfg))))

(require 'files)
(define-runtime-path this-file "dev.rkt")
(define-runtime-path collection-dir "..")

;; Seconds between two looks at the app's files; seconds a child may take to load the
;; app (as serve's --start-timeout), and to finish its requests when it is replaced;
;; seconds the app may take to answer (fastcgi-request's default).
(define poll-interval 0.5)
(define start-timeout 60)
(define stop-timeout 3)
(define forward-timeout 30)

;; handle-dev : (vectorof string) -> void
(define (handle-dev argv)
  (define port 8080)
  (define host "127.0.0.1")
  (define reload? #t)
  (define statics '())
  (define app
    (command-line
     #:program "raco fastcgi dev"
     #:argv argv
     #:once-each
     [("--port" "-p") p "HTTP port of the local front (default 8080)"
      (set! port (or (let ([n (string->number p)]) (and (exact-integer? n) (<= 0 n 65535) n))
                     (raise-user-error 'raco-fastcgi "--port: expected a port number, got ~s" p)))]
     [("--host") h "Address the local front listens on (default 127.0.0.1)" (set! host h)]
     [("--no-reload") "Keep the code loaded at start (default: load it again when a source file of the app changes)"
      (set! reload? #f)]
     #:multi
     [("--static") dir "Serve the files under DIR before the app; may be repeated"
      (unless (directory-exists? dir)
        (raise-user-error 'raco-fastcgi "--static: no such directory: ~a" dir))
      (set! statics (append statics (list (normalize-path (simple-form-path dir)))))]
     #:args (app-file) app-file))
  (define app-path (simple-form-path app))
  (unless (file-exists? app-path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" app))
  (start-stderr-logging! 'info)
  (define dir (make-temporary-file "fastcgi-dev-~a" 'directory))
  (define sup (make-supervisor app app-path dir reload?))
  (define stop-http #f)
  (dynamic-wind
   void
   (λ ()
     ;; a request that comes before the first process starts waits for it
     (define confirm (make-async-channel))
     (set! stop-http
           (serve #:dispatch (apply sequencer:make
                                    (append (if (null? statics) '() (list (static-dispatcher statics)))
                                            (list (lift:make (λ (req) (answer sup req))))))
                  #:port port
                  #:listen-ip host
                  #:confirmation-channel confirm))
     (define bound (async-channel-get confirm))
     (when (exn? bound)
       (raise-user-error 'raco-fastcgi "cannot listen on ~a port ~a: ~a" host port (exn-message bound)))
     (supervisor-start! sup)
     (printf "raco fastcgi dev: ~a behind FastCGI at unix:~a\n" app (supervisor-socket sup))
     (flush-output)
     (define g (supervisor-gen sup))
     (sync (gen-ready-evt g))
     (when (and (not reload?) (not (eq? (gen-outcome g) 'ready)))
       (raise-user-error 'raco-fastcgi "~a did not load" app))
     (unless (eq? (gen-outcome g) 'ready)
       (printf "raco fastcgi dev: ~a did not load; requests get the error until a source file changes\n" app))
     (printf "Open http://~a:~a/ (Ctrl-C stops~a)\n" host bound
             (if reload? "; the app reloads when one of its source files changes" ""))
     (flush-output)
     (with-handlers ([exn:break? void])
       (sync/enable-break never-evt)))
   (λ ()
     (when stop-http (with-handlers ([exn:fail? void]) (stop-http)))
     (supervisor-stop! sup)
     (with-handlers ([exn:fail:filesystem? void])
       (delete-directory/files dir #:must-exist? #f)))))

;; system-dirs : -> (listof path)
;; Folders whose modules are not the app's: the installation's collections and packages,
;; the user's installed packages, and this collection (the server).
(define (system-dirs)
  (remove-duplicates
   (map simple-form-path
        (list (find-system-path 'collects-dir) (find-collects-dir) (find-pkgs-dir)
              (find-user-pkgs-dir) collection-dir))))

;; ---------------------------------------------------------------------------------------
;; The app's processes

;; One process, loading the app once. stdin: where it reads the line that starts the
;; load. ready: posted when outcome is known: 'ready, or (cons 'failed text). files:
;; path -> stamp of every app file it loaded, as read from its files-file up to files-pos.
;; tail: the end of its stderr, for the error page; err-pump: the thread that copies it.
(struct gen (process stdin ready files-file error-file tail err-pump
             [outcome #:mutable] [files #:mutable] [files-pos #:mutable]))

;; gen-ready-evt : gen -> evt
(define (gen-ready-evt g) (semaphore-peek-evt (gen-ready g)))

;; gen-exited? : gen -> boolean
(define (gen-exited? g) (not (eq? (subprocess-status (gen-process g)) 'running)))

;; The app, its current process and the spare that will replace it. One thread (supervise)
;; owns them and takes the messages on the channel `inbox`:
;;   (current BOX SEMA)  put the process for the next request in BOX, post SEMA;
;;   (ready GEN)         GEN's outcome is known;
;;   (stop SEMA)         stop the processes, post SEMA and end.
;; Request threads only ask: web-server runs each under a custodian that it shuts down
;; with the connection, which would take with it a process or thread started there.
(struct supervisor (app app-path dir socket reload? inbox
                        [gen #:mutable] [spare #:mutable] [count #:mutable] [thread #:mutable]))

;; make-supervisor : string path path boolean -> supervisor
(define (make-supervisor app app-path dir reload?)
  (supervisor app app-path dir (path->string (build-path dir "app.sock")) reload?
              (make-channel) #f #f 0 #f))

;; supervisor-start! : supervisor -> void ; the first process, and the supervising thread
(define (supervisor-start! s)
  (set-supervisor-gen! s (start-gen! s #f))
  (set-supervisor-thread! s (thread (λ () (supervise s)))))

;; supervisor-current : supervisor -> gen ; the process for the next request
(define (supervisor-current s)
  (define reply (box #f))
  (define done (make-semaphore 0))
  (channel-put (supervisor-inbox s) (list 'current reply done))
  (semaphore-wait done)
  (unbox reply))

;; supervisor-stop! : supervisor -> void
(define (supervisor-stop! s)
  (define t (supervisor-thread s))
  (define done (make-semaphore 0))
  (unless (and t
               (sync/timeout 1 (channel-put-evt (supervisor-inbox s) (list 'stop done)))
               (sync/timeout (+ stop-timeout 5) done))
    (when t (kill-thread t))
    (for ([g (in-list (list (supervisor-gen s) (supervisor-spare s)))] #:when g)
      (subprocess-kill (gen-process g) #t))))

;; supervise : supervisor -> void
;; With reloading on, the current process is checked at every request and every
;; poll-interval: a new one replaces it when a file it loaded has changed since, or when
;; it died after it was ready.
(define (supervise s)
  (define (guarded thunk)
    (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "dev: ~a" (log-escape (exn-message e))))])
      (thunk)))
  (let loop ()
    (define msg
      (sync (supervisor-inbox s)
            (if (supervisor-reload? s)
                (wrap-evt (alarm-evt (+ (current-inexact-milliseconds) (* 1000 poll-interval)))
                          (λ (_) '(poll)))
                never-evt)))
    (case (car msg)
      [(current)
       (guarded (λ () (check! s)))
       (set-box! (cadr msg) (supervisor-gen s))
       (semaphore-post (caddr msg))
       (loop)]
      [(poll) (guarded (λ () (check! s))) (loop)]
      [(ready)
       ;; the next spare starts once this process has loaded (not while: they would share
       ;; the processors), warmed with what it loaded
       (define g (cadr msg))
       (guarded (λ ()
                  (when (and (supervisor-reload? s) (eq? (supervisor-gen s) g))
                    (when (eq? (gen-outcome g) 'ready) (save-warm-list! s g))
                    (unless (supervisor-spare s)
                      (set-supervisor-spare! s (spawn! s))))))
       (loop)]
      [(stop)
       (when (supervisor-spare s) (discard-spare! (supervisor-spare s)))
       (stop-gen! (supervisor-gen s))
       (semaphore-post (cadr msg))])))

;; check! : supervisor -> void ; replace the current process when it is out of date
(define (check! s)
  (define g (supervisor-gen s))
  (when (supervisor-reload? s)
    (define why
      (cond
        [(changed-file g) => (λ (f) (format "after a change to ~a" (display-path f)))]
        [(and (eq? (gen-outcome g) 'ready) (gen-exited? g))
         (format "after its process exited with status ~a" (subprocess-status (gen-process g)))]
        [else #f]))
    (when why
      (when (eq? (gen-outcome g) 'ready) (save-warm-list! s g))
      (stop-gen! g)
      (delete-gen-files! g)
      (set-supervisor-gen! s (start-gen! s why)))))

;; save-warm-list! : supervisor gen -> void
;; What a process that loaded the app has loaded so far becomes what spares load ahead.
(define (save-warm-list! s g)
  (define tmp (path-add-extension (warm-list s) #".new"))
  (copy-file (gen-files-file g) tmp #t)
  (rename-file-or-directory tmp (warm-list s) #t))

;; warm-list : supervisor -> path
(define (warm-list s) (build-path (supervisor-dir s) "warm"))

;; delete-gen-files! : gen -> void ; once the process is gone
(define (delete-gen-files! g)
  (for ([f (in-list (list (gen-files-file g) (gen-error-file g)))])
    (with-handlers ([exn:fail:filesystem? void]) (delete-file f))))

;; display-path : path -> string ; relative to the current directory when inside it
(define (display-path p)
  (define cwd (simple-form-path (current-directory)))
  (path->string (if (in-dirs? p (list cwd)) (find-relative-path cwd (simple-form-path p)) p)))

;; start-gen! : supervisor (or/c string #f) -> gen
;; The spare (or a new process when there is none) loads the app and serves it on the
;; supervisor's socket. A thread sets its outcome, says so when it replaces another
;; (why: what changed), and tells the supervisor.
(define (start-gen! s why)
  (define spare (supervisor-spare s))
  (set-supervisor-spare! s #f)
  (define g (cond
              [(and spare (not (gen-exited? spare))) spare]
              [else (when spare (discard-spare! spare))
                    (spawn! s)]))
  ;; the app file itself, in case the process fails before it loads it
  (set-gen-files! g (make-hash (list (cons (supervisor-app-path s) (file-stamp (supervisor-app-path s))))))
  (with-handlers ([exn:fail? void])   ; a process that died: wait-ready reports it
    (write-string "load\n" (gen-stdin g))
    (flush-output (gen-stdin g)))
  (thread (λ ()
            (set-gen-outcome! g (wait-ready g (string-append "unix:" (supervisor-socket s))))
            (semaphore-post (gen-ready g))
            (when why
              (if (eq? (gen-outcome g) 'ready)
                  (printf "reloaded ~a ~a\n" (supervisor-app s) why)
                  (printf "~a did not load ~a; requests get the error until a source file changes\n"
                          (supervisor-app s) why))
              (flush-output))
            (channel-put (supervisor-inbox s) (list 'ready g))))
  g)

;; spawn! : supervisor -> gen
;; A process that loads the server, and what the warm list names, then waits for the
;; line that makes it load the app.
(define (spawn! s)
  (define n (add1 (supervisor-count s)))
  (set-supervisor-count! s n)
  (define files-file (build-path (supervisor-dir s) (format "files-~a" n)))
  (define error-file (build-path (supervisor-dir s) (format "error-~a" n)))
  (define cfg
    (hasheq 'app (path->string (supervisor-app-path s))
            'listen (string-append "unix:" (supervisor-socket s))
            'socket-mode #o600
            'graceful-timeout stop-timeout
            'log-level 'warning
            'dev-files (path->string files-file)
            'dev-error (path->string error-file)
            'warm-from (path->string (warm-list s))
            'system-dirs (map path->string (system-dirs))
            'dev-dir (path->string (supervisor-dir s))
            'parent-pid (getpid)))
  (define-values (p out in err)
    (subprocess #f #f #f (find-exe) "-N" "fastcgi-dev-app" "-l" "racket/base"
                "-e" (format "(require (submod (file ~s) child))" (path->string this-file))
                (format "~s" cfg)))
  (define tail (box #""))
  (pump out (current-output-port) #f)
  (gen p in (make-semaphore 0) files-file error-file tail (pump err (current-error-port) tail)
       #f #f 0))

;; discard-spare! : gen -> void ; a spare that never loaded the app
;; Killed before its stdin closes, which it would take for dev's end (see the child).
(define (discard-spare! g)
  (subprocess-kill (gen-process g) #t)
  (sync/timeout 1 (gen-process g))
  (close-output-port (gen-stdin g))
  (delete-gen-files! g))

;; Bytes of a process's stderr kept for its error page.
(define tail-size 16384)

;; pump : input-port output-port (or/c box #f) -> thread
;; Copies a child's output to ours as it comes; keeps its end in tail.
(define (pump in out tail)
  (thread (λ ()
            (define buf (make-bytes 4096))
            (let loop ()
              (define n (read-bytes-avail! buf in))
              (unless (eof-object? n)
                (write-bytes buf out 0 n)
                (flush-output out)
                (when tail
                  (define t (bytes-append (unbox tail) (subbytes buf 0 n)))
                  (set-box! tail (if (> (bytes-length t) tail-size)
                                     (subbytes t (- (bytes-length t) tail-size))
                                     t)))
                (loop)))
            (close-input-port in))))

;; wait-ready : gen string -> (or/c 'ready (cons 'failed string))
;; Ready when the server answers FCGI_GET_VALUES on the socket: it starts accepting once
;; the app is loaded (a connection made earlier waits in the listen backlog).
(define (wait-ready g address)
  (define p (gen-process g))
  (define deadline (alarm-evt (+ (current-inexact-milliseconds) (* 1000 start-timeout))))
  (let loop ()
    (define c (with-handlers ([exn:fail? (λ (e) #f)]) (fastcgi-connect address #:timeout 1)))
    (define answered
      (and c
           (let* ([ok (box #f)]
                  [t (thread (λ ()
                               (with-handlers ([exn:fail? void])
                                 (fastcgi-get-values c '("FCGI_MPXS_CONNS") #:timeout start-timeout)
                                 (set-box! ok #t))))])
             (sync t p deadline)
             (fcgi-client-close c)
             (unbox ok))))
    (cond
      [answered 'ready]
      [(gen-exited? g) (cons 'failed (load-error g))]
      [(sync/timeout 0 deadline)
       (subprocess-kill p #t)
       (cons 'failed (format "the app did not load within ~a s" start-timeout))]
      [else (sync/timeout 0.05 p) (loop)])))

;; load-error : gen -> string ; why a process that exited did not serve
(define (load-error g)
  (if (file-exists? (gen-error-file g))
      (file->string (gen-error-file g))
      (exit-text g)))

;; exit-text : gen -> string
(define (exit-text g)
  (sync/timeout 1 (gen-process g))
  (sync/timeout 1 (gen-err-pump g))   ; its last words
  (format "The app's process exited with status ~a. The end of its output:\n\n~a"
          (subprocess-status (gen-process g))
          (bytes->string/utf-8 (unbox (gen-tail g)) #\?)))

;; stop-gen! : gen -> void
;; SIGINT: the server finishes its requests (stop-timeout) and exits; SIGKILL after that.
;; Its stdin is closed once it is gone (not before: see the child).
(define (stop-gen! g)
  (define p (gen-process g))
  (unless (gen-exited? g)
    (subprocess-kill p #f)
    (unless (sync/timeout (+ stop-timeout 2) p)
      (subprocess-kill p #t)
      (sync/timeout 2 p)))
  (close-output-port (gen-stdin g)))

;; changed-file : gen -> (or/c path #f) ; an app file whose stamp is not the one loaded
(define (changed-file g)
  (read-new-files! g)
  (for/first ([(p stamp) (in-hash (gen-files g))]
              #:unless (equal? (file-stamp p) stamp))
    p))

;; read-new-files! : gen -> void ; the complete lines the process added to its files-file
(define (read-new-files! g)
  (define bs (with-handlers ([exn:fail:filesystem? (λ (e) #"")])
               (call-with-input-file (gen-files-file g)
                 (λ (in)
                   (file-position in (gen-files-pos g))
                   (read-bytes 1048576 in)))))
  (define end (let loop ([i (if (eof-object? bs) 0 (bytes-length bs))])
                (cond [(zero? i) 0]
                      [(= (bytes-ref bs (sub1 i)) (char->integer #\newline)) i]
                      [else (loop (sub1 i))])))
  (unless (zero? end)
    (for ([entry (in-port read (open-input-bytes (subbytes bs 0 end)))])
      (when (eq? (car entry) 'app)
        (hash-set! (gen-files g) (string->path (cadr entry)) (caddr entry))))
    (set-gen-files-pos! g (+ (gen-files-pos g) end))))

;; ---------------------------------------------------------------------------------------
;; Answering HTTP

;; answer : supervisor request -> response
;; Forwards to the current process once it is ready; the load error as a 500 page when it
;; did not load; a 502 page when it does not answer.
(define (answer s req)
  (with-handlers ([exn:fail? (λ (e)
                               (log-fastcgi-error "dev: ~a" (log-escape (exn-message e)))
                               (error-page 500 "raco fastcgi dev failed" (exn-message e) ""))])
    (answer/current s req)))

;; answer/current : supervisor request -> response
(define (answer/current s req)
  (define g (supervisor-current s))
  (sync (gen-ready-evt g))
  (define outcome (gen-outcome g))
  (cond
    [(eq? outcome 'ready)
     (with-handlers ([exn:fail?
                      (λ (e)
                        (sync/timeout 0.5 (gen-process g))
                        (if (gen-exited? g)
                            (error-page 502 (format "~a stopped" (supervisor-app s)) (exit-text g)
                                        (if (supervisor-reload? s)
                                            "raco fastcgi dev starts it again at the next request."
                                            "With --no-reload, restart raco fastcgi dev."))
                            (error-page 502 (format "No answer from ~a" (supervisor-app s)) (exn-message e) "")))])
       (forward (string-append "unix:" (supervisor-socket s)) req))]
    [else
     (error-page 500 (format "~a did not load" (supervisor-app s)) (cdr outcome)
                 (if (supervisor-reload? s)
                     "raco fastcgi dev loads it again when one of its source files changes."
                     "With --no-reload, restart raco fastcgi dev."))]))

;; error-page : natural string string string -> response
(define (error-page code title text hint)
  (response/xexpr
   #:code code
   #:message (status-message code)
   `(html (head (title ,title))
          (body (h1 ,title) (pre ,text) (p ,hint)))))

;; forward : string request -> response ; one HTTP request as one FastCGI request
(define (forward address req)
  (define headers
    (for/list ([h (in-list (request-headers/raw req))])
      (cons (bytes->string/latin-1 (header-field h)) (bytes->string/latin-1 (header-value h)))))
  (define body (or (request-post-data/raw req) #""))
  (define params
    (cgi-params (bytes->string/latin-1 (request-method req))
                (url->string (request-uri req))
                headers
                (and (positive? (bytes-length body)) (bytes-length body))
                `(("REMOTE_ADDR" . ,(request-client-ip req))
                  ("SERVER_ADDR" . ,(request-host-ip req))
                  ("SERVER_PORT" . ,(number->string (request-host-port req))))))
  (define c (fastcgi-connect address #:timeout forward-timeout))
  (define r (dynamic-wind
             void
             (λ () (fastcgi-call c #:params params #:stdin body #:keep-conn? #f #:timeout forward-timeout))
             (λ () (fcgi-client-close c))))
  ;; what the app wrote to its current-error-port in the handler: nginx logs it, dev shows it
  (define err (fcgi-reply-stderr r))
  (unless (zero? (bytes-length err))
    (write-bytes err (current-error-port))
    (unless (regexp-match? #rx#"\n$" err) (newline (current-error-port)))
    (flush-output (current-error-port)))
  (unless (eq? (fcgi-reply-protocol-status r) 'request-complete)
    (error 'raco-fastcgi "the app answered ~a" (fcgi-reply-protocol-status r)))
  (define-values (status out-headers out-body) (parse-cgi-response (fcgi-reply-stdout r)))
  (response status (status-message status) (current-seconds) #f
            (for/list ([h (in-list out-headers)]
                       #:unless (member (string-downcase (car h)) '("status" "content-length")))
              (header (string->bytes/latin-1 (car h)) (string->bytes/latin-1 (cdr h))))
            (λ (out) (write-bytes out-body out))))

;; status-message : natural -> bytes
(define (status-message code)
  (string->bytes/utf-8 (or (message-for-status-code code) "Status")))

;; ---------------------------------------------------------------------------------------
;; --static

(define path->mime-type
  (make-path->mime-type (collection-file-path "mime.types" "web-server" "default-web-root")))

;; static-dispatcher : (listof path) -> dispatcher
;; GET and HEAD of a file under one of dirs (the first that has it); 404 for a path that
;; leads out of them; anything else goes to the next dispatcher (the app).
(define ((static-dispatcher dirs) conn req)
  (define method (request-method req))
  (unless (regexp-match? #rx#"^(?i:get|head)$" method)
    (next-dispatcher))
  (define f (static-file dirs (request-uri req)))
  (cond
    [(eq? f 'refused)
     (output-response/method conn (error-page 404 "Not Found" (url->string (request-uri req)) "") method)]
    [f (output-file conn f method (path->mime-type f) (read-range-header (request-headers/raw req)))]
    [else (next-dispatcher)]))

;; static-file : (listof path) url -> (or/c path 'refused #f)
;; The regular file the URL's path names under one of dirs, its symbolic links resolved.
;; 'refused: a `..` segment (percent-encoded or not), or a link that leads out of its
;; folder. #f: no such file, or a segment that cannot be a file name.
(define (static-file dirs u)
  (define segments
    (for/list ([s (in-list (map path/param-path (url-path u)))]
               #:unless (member s '(same "" ".")))
      s))
  (cond
    [(for/or ([s (in-list segments)]) (member s '(up ".."))) 'refused]
    [(or (null? segments) (for/or ([s (in-list segments)]) (regexp-match? #rx"[/\0]" s))) #f]
    [else
     (for/or ([d (in-list dirs)])
       (define p (apply build-path d segments))
       (and (file-exists? p)
            (let ([real (normalize-path p)])
              (cond
                [(not (in-dirs? real (list d))) 'refused]
                [(eq? (file-or-directory-type real) 'file) real]
                [else #f]))))]))
