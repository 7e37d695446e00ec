#lang racket/base
;; What the app's process under `raco fastcgi dev` runs: dev-child.rkt's `child` submodule
;; calls run-dev-child with the process's command line (CONFIG and DEV, described there).
;; It loads the server and what warm-from lists (see warm!), then waits for a line on
;; stdin before it loads the app: dev keeps one such spare process ready, so that a reload
;; mostly costs the compilation of the app's own modules. dev keeps its stdin open as long
;; as it lives: at the end of stdin before that line, it exits 0. It exits 3 when the app
;; does not load. It compiles the app's modules from source: a compiled file left by
;; `raco make` may be stale against a dependency that changed since.
(require racket/list
         racket/path
         racket/runtime-path
         "dev-files.rkt")
(provide run-dev-child)

(define-runtime-path worker "../worker/single.rkt")
(define-runtime-path config "../worker/config.rkt")
(define-runtime-path signals "../os/signals.rkt")
(define-runtime-path server-dir "..")

;; run-dev-child : (vectorof string) -> none
;; args holds CONFIG, then DEV (dev's settings); CONFIG is read when the app loads.
(define (run-dev-child args)
  (define settings (read (open-input-string (vector-ref args 1))))
  (define system-dirs (map string->path (hash-ref settings 'system-dirs)))
  (define-values (report! note!) (open-dev-files (hash-ref settings 'dev-files)))
  (note-module-loads! system-dirs report! note!)
  ;; As in worker-main.rkt, the server's modules load under a logger with no parent.
  (define logger (make-logger #f #f))
  (note-accomplices! logger system-dirs note!)
  (parameterize ([current-logger logger])
    ((dynamic-require signals 'die-with-parent!) (hash-ref settings 'parent-pid)
                                                 (dynamic-require signals 'SIGTERM))
    (remove-dev-dir-at-exit! settings)
    (define run-single (dynamic-require worker 'run-single))
    (define read-serve-config (dynamic-require config 'read-serve-config))
    (warm! (hash-ref settings 'warm-from))
    (when (eof-object? (read-line))
      (exit 0))
    (with-handlers ([exn:fail?
                     (λ (e)
                       (define text (log-unescape (exn-message e)))
                       (call-with-output-file (hash-ref settings 'dev-error) #:exists 'truncate
                         (λ (o) (write-string text o)))
                       (eprintf "~a\n" text)
                       (exit 3))])
      (run-single (read-serve-config (open-input-string (vector-ref args 0)))))))

;; open-dev-files : path-string -> (values (any -> void) (path boolean -> void))
;; The dev-files list, appended to: report! writes one line (from any thread), note!
;; reports a file once (an app file with its stamp now, before it loads).
(define (open-dev-files file)
  (define out (open-output-file file #:exists 'append))
  (define lock (make-semaphore 1))
  (define noted (make-hash))
  (define (report! entry)
    (call-with-semaphore
     lock
     (λ ()
       (write-string (format "~s\n" entry) out)
       (flush-output out))))
  (define (note! p app?)
    (unless (hash-ref noted p #f)
      (hash-set! noted p #t)
      (report! (if app?
                   (list 'app (path->string p) (file-stamp p))
                   (list 'lib (path->string p))))))
  (values report! note!))

;; note-module-loads! : (listof path) (any -> void) (path boolean -> void) -> void
;; From now on every module file goes through here: noted, and an app module (one outside
;; system-dirs) compiled from source, its library requires reported (note-uses!).
(define (note-module-loads! system-dirs report! note!)
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
         (note-uses! path system-dirs report!))))))

;; note-uses! : path (listof path) (any -> void) -> void
;; The library modules an app module (just declared) requires, at each phase shift, as
;; `(uses SHIFT PATH)`: what the next spare instantiates and makes available in advance.
(define (note-uses! path system-dirs report!)
  (with-handlers ([exn:fail? void])
    (for* ([phase+mpis (in-list (module->imports path))]
           #:when (car phase+mpis)
           [mpi (in-list (cdr phase+mpis))])
      (define name (resolved-module-path-name (module-path-index-resolve mpi)))
      (when (and (path? name) (in-dirs? name system-dirs))
        (report! (list 'uses (car phase+mpis) (path->string name)))))))

;; note-accomplices! : logger (listof path) (path boolean -> void) -> void
;; Files that macros read at compile time (include, include-template) are logged to the
;; logger on the cm-accomplice topic, as raco make learns of them: those of the app are
;; noted as its files, from a thread of their own.
(define (note-accomplices! logger system-dirs note!)
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
               (loop))))))

;; remove-dev-dir-at-exit! : hash -> void ; settings: DEV, dev's settings
;; dev killed (SIGKILL: no clean-up of its own), its processes remove its folder, each
;; what is left (they may run at once). Whichever shows it first: dev's main thread is a
;; zombie, or we were given to another parent, or stdin (which dev keeps open as long as
;; it lives) is at its end.
(define (remove-dev-dir-at-exit! settings)
  (let ([exit (exit-handler)]
        [dir (hash-ref settings 'dev-dir)]
        [dev (hash-ref settings 'parent-pid)]
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
                    (exit code)))))

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
