#lang racket/base
;; The app's process under `raco fastcgi dev` (the `child` submodule), and the command
;; line that starts it. The supervisor is dev-reload.rkt.
;;
;; The app's process: racket -l racket/base -e '(require (submod (file DEV-CHILD.rkt) child))' CONFIG DEV
;; CONFIG is run-single's configuration (worker.rkt), a serve-config as config.rkt's
;; write-serve-config writes it; DEV is a `write`n hash of what the process does for dev:
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
;; does not load. It compiles the app's modules from source: a compiled file left by
;; `raco make` may be stale against a dependency that changed since.
(require racket/runtime-path
         "../worker/config.rkt")
(provide child-arguments)

(define-runtime-path this-file "dev-child.rkt")

;; child-arguments : serve-config hash -> (listof string)
;; The arguments of racket that start the app's process with configuration cfg and dev's
;; settings dev (the hash above).
(define (child-arguments cfg dev)
  (define config-text (let ([o (open-output-string)]) (write-serve-config cfg o) (get-output-string o)))
  (list "-N" "fastcgi-dev-app" "-l" "racket/base"
        "-e" (format "(require (submod (file ~s) child))" (path->string this-file))
        config-text
        (format "~s" dev)))

(module child racket/base
  (require racket/list
           racket/path
           racket/runtime-path
           "dev-files.rkt")
  (define-runtime-path worker "../worker/worker.rkt")
  (define-runtime-path config "../worker/config.rkt")
  (define-runtime-path signals "../os/signals.rkt")
  (define-runtime-path server-dir "..")
  ;; dev's settings (the serve-config, the first argument, is read when the app loads)
  (define cfg (read (open-input-string (vector-ref (current-command-line-arguments) 1))))
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
    (define read-serve-config (dynamic-require config 'read-serve-config))
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
      (run-single (read-serve-config (open-input-string (vector-ref (current-command-line-arguments) 0)))))))
