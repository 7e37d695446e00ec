#lang racket/base
;; dev-reload.rkt: what the supervisor of `raco fastcgi dev`'s app processes decides from,
;; in this process: the app files a process reports and which of them changed since it
;; loaded them, the folders that are not the app's, the paths it shows, the error page's
;; text for a process that exited; and the command line it starts a process with (its
;; serve-config through config.rkt's writer, and dev's settings). Reloading through HTTP:
;; dev-test; the app's process itself: dev-child-test.
(require racket/file
         racket/list
         racket/os
         racket/path
         racket/string
         rackunit
         setup/dirs
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/dev/dev-files.rkt"
         "../fastcgi/private/dev/dev-reload.rkt"
         "integration/lib.rkt")
(require/expose "../fastcgi/private/dev/dev-reload.rkt"
                (gen gen-files gen-files-pos changed-file system-dirs display-path load-error
                     spawn! discard-spare!))

;; a gen for files-file whose process and pipes are not looked at
(define (files-gen files-file [files (make-hash)])
  (gen #f #f (make-semaphore 0) files-file (build-path files-file 'up "no-error") (box #"") #f
       #f files 0))

(test-case "changed-file: the app files reported, whole lines only; the first whose stamp changed"
  (call-with-temp-dir
   "fcgi-dreload"
   (λ (dir)
     (define a (build-path dir "a.rkt"))
     (define b (build-path dir "b.rkt"))
     (display-to-file "a" a)
     (display-to-file "b" b)
     (define files-file (build-path dir "files-1"))
     (define g (files-gen files-file))
     (check-false (changed-file g) "no files file yet")
     (display-to-file (format "~s\n~s\n(app ~s" `(app ,(path->string a) ,(file-stamp a))
                              `(lib "/usr/share/racket/collects/racket/base.rkt")
                              (path->string b))
                      files-file)
     (check-false (changed-file g))
     (check-equal? (hash-keys (gen-files g)) (list a) "the half-written line waits; lib lines are not the app's")
     (define pos (gen-files-pos g))
     (with-output-to-file files-file #:exists 'append
       (λ () (printf " ~s)\n(uses 0 ~s)\n" (file-stamp b) (path->string b))))
     (check-false (changed-file g))
     (check-equal? (sort (map path->string (hash-keys (gen-files g))) string<?)
                   (map path->string (list a b)))
     (check-true (> (gen-files-pos g) pos))
     (define tmp (build-path dir "b.new"))
     (display-to-file "B" tmp)
     (rename-file-or-directory tmp b #t)
     (check-equal? (changed-file g) b "saved by renaming a new file over it")
     (delete-file a)
     (check-not-false (member (changed-file g) (list a b)) "a removed file is a change"))))

(test-case "system-dirs: the installation's and the user's collections and packages, and the server's"
  (define dirs (system-dirs))
  (for ([d (list (find-system-path 'collects-dir) (find-collects-dir) (find-pkgs-dir))])
    (check-not-false (member (simple-form-path d) dirs) (path->string d)))
  (check-true (in-dirs? (collection-file-path "worker.rkt" "fastcgi" "private" "worker") dirs))
  (check-false (in-dirs? (string->path "/srv/app/app.rkt") dirs))
  (check-equal? dirs (remove-duplicates dirs)))

(test-case "display-path: relative to the current directory when inside it"
  (call-with-temp-dir
   "fcgi-dreload"
   (λ (dir)
     (parameterize ([current-directory dir])
       (check-equal? (display-path (build-path dir "sub" "a.rkt")) (path->string (build-path "sub" "a.rkt")))
       (check-equal? (display-path (string->path "/srv/x.rkt")) "/srv/x.rkt")))))

(test-case "load-error: the error the process wrote, else its exit status and the end of its output"
  (call-with-temp-dir
   "fcgi-dreload"
   (λ (dir)
     (define-values (p o i e) (subprocess #f #f #f "/bin/sh" "-c" "exit 4"))
     (for ([x (list o i e)]) (if (input-port? x) (close-input-port x) (close-output-port x)))
     (define error-file (build-path dir "error-1"))
     (define g (gen p #f (make-semaphore 0) (build-path dir "files-1") error-file (box #"last words\n")
                    (thread void) #f (make-hash) 0))
     (check-equal? (load-error g)
                   "The app's process exited with status 4. The end of its output:\n\nlast words\n")
     (display-to-file "app.rkt:1:0: bad syntax" error-file)
     (check-equal? (load-error g) "app.rkt:1:0: bad syntax"))))

;; cmdline : natural -> (listof string) ; a process's arguments, from /proc
;; (empty while the process execs: '(), and the caller waits on)
(define (cmdline pid)
  (define bs (file->bytes (format "/proc/~a/cmdline" pid)))
  (if (zero? (bytes-length bs))
      '()
      (map bytes->string/utf-8 (regexp-split #rx#"\0" (subbytes bs 0 (sub1 (bytes-length bs)))))))

(test-case "a process is started with its serve-config as config.rkt writes it, and dev's settings"
  (call-with-temp-dir
   "fcgi-dreload"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (display-to-file "#lang racket/base\n" app)
     (define s (make-supervisor "app.rkt" app dir #t))
     (define g (spawn! s))
     (define pid (subprocess-pid (gen-process g)))
     (define args
       (dynamic-wind
        void
        (λ () (wait-until 10 "its command line (after the exec)"
                          (λ () (let ([args (cmdline pid)]) (and (member "fastcgi-dev-app" args) args)))))
        (λ () (discard-spare! g))))
     (define cfg (read-serve-config (open-input-string (list-ref args (- (length args) 2)))))
     (check-equal? cfg (make-serve-config #:app (path->string app)
                                          #:listen (format "unix:~a" (build-path dir "app.sock"))
                                          #:socket-mode #o600 #:graceful-timeout 3 #:log-level 'warning))
     (define dev (read (open-input-string (last args))))
     (check-equal? (hash-ref dev 'dev-files) (path->string (build-path dir "files-1")))
     (check-equal? (hash-ref dev 'dev-error) (path->string (build-path dir "error-1")))
     (check-equal? (hash-ref dev 'warm-from) (path->string (build-path dir "warm")))
     (check-equal? (hash-ref dev 'dev-dir) (path->string dir))
     (check-equal? (hash-ref dev 'parent-pid) (getpid))
     (check-equal? (hash-ref dev 'system-dirs) (map path->string (system-dirs))))))
