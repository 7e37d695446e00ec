#lang racket/base
;; The app's processes under `raco fastcgi dev`: the current one, the spare that will
;; replace it, and the reloading.
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
;; The child (the `child` submodule of dev-child.rkt) reports every source file of the app
;; it loads, with its stamp: the modules outside the Racket installation and this
;; collection, and the files they include at compile time (include-template). dev compares
;; those stamps every half second, and before each request, so the next request after a
;; save gets the new code.
(require compiler/find-exe
         racket/file
         racket/list
         racket/os
         racket/path
         racket/runtime-path
         setup/dirs
         "../transport/client.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         "dev-child.rkt"
         "dev-files.rkt"
         "../util/log.rkt")
(provide make-supervisor supervisor-start! supervisor-stop! supervisor-current
         supervisor-app supervisor-socket supervisor-reload? supervisor-gen
         gen-ready-evt gen-outcome gen-process gen-exited? exit-text)

(define-runtime-path collection-dir "../..")

;; Seconds between two looks at the app's files; seconds a child may take to load the
;; app (as serve's --start-timeout), and to finish its requests when it is replaced.
(define poll-interval 0.5)
(define start-timeout 60)
(define stop-timeout 3)

;; system-dirs : -> (listof path)
;; Folders whose modules are not the app's: the installation's collections and packages,
;; the user's installed packages, and this collection (the server).
(define (system-dirs)
  (remove-duplicates
   (map simple-form-path
        (list (find-system-path 'collects-dir) (find-collects-dir) (find-pkgs-dir)
              (find-user-pkgs-dir) collection-dir))))

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
                (wrap-evt (alarm-at-evt (+ (now-ms) (* 1000 poll-interval)))
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
    (make-serve-config #:app (path->string (supervisor-app-path s))
                       #:listen (string-append "unix:" (supervisor-socket s))
                       #:socket-mode #o600
                       #:graceful-timeout stop-timeout
                       #:log-level 'warning))
  (define dev
    (hasheq 'dev-files (path->string files-file)
            'dev-error (path->string error-file)
            'warm-from (path->string (warm-list s))
            'system-dirs (map path->string (system-dirs))
            'dev-dir (path->string (supervisor-dir s))
            'parent-pid (getpid)))
  (define-values (p out in err)
    (apply subprocess #f #f #f (find-exe) (child-arguments cfg dev)))
  (define tail (box #""))
  (pump out (current-output-port) #f)
  (gen p in (make-semaphore 0) files-file error-file tail (pump err (current-error-port) tail)
       #f #f 0))

;; discard-spare! : gen -> void ; a spare that never loaded the app
;; Killed before its stdin closes, which it would take for dev's end (see dev-child.rkt).
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
  (define deadline (alarm-at-evt (+ (now-ms) (* 1000 start-timeout))))
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
;; Its stdin is closed once it is gone (not before: see dev-child.rkt).
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
