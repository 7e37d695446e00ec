#lang racket/base
;; Nothing leaks to a handler's subprocesses (issue 25, item 8): a program a handler starts
;; gets none of the worker's descriptors (the listening socket it inherited as fd 0,
;; accepted connections, its control connection to the manager, its log files, the
;; runtime's own), whether it is started by Racket's `subprocess` with the worker's stdin
;; or by libc's system(), and it outlives the pool.
;; After the pool stops, a pool started again at once on the same TCP port binds it and
;; serves: no orphan holds the port. The same for `serve --single-process` spawned by a web
;; server with the listening socket as fd 0.
(require ffi/unsafe
         ffi/unsafe/port
         racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/ffi.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

;; tcp-listening-fd : natural -> fd ; a socket listening on 127.0.0.1:port, as a web
;; server makes it for the app it spawns
(define (tcp-listening-fd port)
  (define fd (c-socket AF_INET SOCK_STREAM 0))
  (define (check r what) (when (< r 0) (error 'fd-leak "~a: ~a" what (errno-message (saved-errno)))))
  (check fd "socket")
  (setsockopt-int fd SOL_SOCKET SO_REUSEADDR 1)
  (define sa (make-sockaddr-in (bytes 127 0 0 1) port))
  (check (c-bind fd sa (bytes-length sa)) (format "bind 127.0.0.1:~a" port))
  (check (c-listen fd 16) "listen")
  fd)

;; Arguments of `sleep` that name this run's orphans (a duration no one else uses).
(define tag (format "~a.~a" (+ 40 (random 20)) (random 1000000000)))
(define racket-arg (string-append tag "1"))
(define libc-arg (string-append tag "2"))

;; The app: /racket starts `sleep` with the worker's stdin (Racket's subprocess passes a
;; file-stream port as is); /libc starts it through libc's system() and `setsid -f`, which
;; keeps every descriptor that is not close-on-exec. Neither waits for it.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require ffi/unsafe fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define c-system (get-ffi-obj \"system\" #f (_fun _bytes -> _int)))\n"
   "(define (fastcgi-handler r)\n"
   "  (define uri (fastcgi-param r \"REQUEST_URI\" #\"/\"))\n"
   "  (cond\n"
   "    [(equal? uri #\"/racket\")\n"
   (format "     (define-values (sp o i e) (subprocess #f (current-input-port) #f \"/bin/sleep\" ~s))\n" racket-arg)
   "     (close-input-port o) (close-input-port e)]\n"
   "    [(equal? uri #\"/libc\")\n"
   (format "     (c-system (string->bytes/utf-8 \"setsid -f sleep ~a >/dev/null 2>&1\"))]\n" libc-arg)
   "    [else (void)])\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

;; orphans : string -> (listof natural) ; pids of the `sleep ARG` processes
(define (orphans arg)
  (for*/list ([d (in-list (directory-list "/proc"))]
              [pid (in-value (string->number (path->string d)))]
              #:when pid
              [cmd (in-value (with-handlers ([exn:fail? (λ (e) #"")])
                               (file->bytes (format "/proc/~a/cmdline" pid))))]
              #:when (regexp-match? (byte-regexp (bytes-append #"^(/bin/)?sleep\0" (regexp-quote (string->bytes/utf-8 arg)) #"\0$")) cmd))
    pid))

;; descriptors-held : natural -> (listof string)
;; The process's descriptors that are sockets, or above the standard three.
(define (descriptors-held pid)
  (define dir (format "/proc/~a/fd" pid))
  (for*/list ([fd (in-list (with-handlers ([exn:fail? (λ (e) '())]) (directory-list dir)))]
              [target (in-value (with-handlers ([exn:fail? (λ (e) "")])
                                  (path->string (resolve-path (build-path dir fd)))))]
              #:when (or (string-prefix? target "socket:")
                         (> (string->number (path->string fd)) 2)))
    (format "fd ~a -> ~a" fd target)))

;; kill-orphans! : -> void
(define (kill-orphans!)
  (for* ([arg (list racket-arg libc-arg)] [pid (in-list (orphans arg))])
    (send-signal! pid SIGKILL)))

;; wait-serving : natural proc string -> void ; until the pool on 127.0.0.1:port answers
;; (an error at once if it exited)
(define (wait-serving port p what)
  (wait-until 60 what
              (λ ()
                (when (subprocess-status* p)
                  (error 'fd-leak "~a exited: ~a" (proc-name p) (file->string (proc-stderr-file p))))
                (with-handlers ([exn:fail? (λ (e) #f)])
                  (define-values (status headers body)
                    (fastcgi-request (format "127.0.0.1:~a" port) #:uri "/" #:timeout 5))
                  (= status 200)))))

;; subprocess-status* : proc -> (or/c natural #f) ; #f while it runs
(define (subprocess-status* p)
  (define st (subprocess-status (proc-subprocess p)))
  (and (exact-integer? st) st))

;; start-children! : natural -> void ; both handlers answer; their orphans exist
(define (start-children! port)
  (for ([uri '("/racket" "/libc")])
    (define-values (status headers body)
      (fastcgi-request (format "127.0.0.1:~a" port) #:uri uri #:timeout 10))
    (check-equal? status 200 uri))
  (wait-until 10 "the handlers' sleep processes"
              (λ () (and (pair? (orphans racket-arg)) (pair? (orphans libc-arg))))))

;; orphan-descriptors : -> (listof string) ; what the orphans hold that they should not
(define (orphan-descriptors)
  (for*/list ([arg (list racket-arg libc-arg)]
              [pid (in-list (orphans arg))]
              [s (in-list (descriptors-held pid))])
    (format "sleep ~a (pid ~a): ~a" arg pid s)))

;; restart-outcome : (-> proc) natural -> (or/c 'served string)
;; Starts the pool again on the port: 'served, or why it did not.
(define (restart-outcome start port)
  (with-handlers ([exn:fail? exn-message])
    (define p (start))
    (wait-serving port p "the pool started again on the same port to serve")
    (stop! p)
    'served))

;; stop! : proc -> void ; SIGTERM to the manager only (its group holds the orphans)
(define (stop! p)
  (send-signal! (proc-pid p) SIGTERM)
  (unless (sync/timeout 30 (proc-subprocess p))
    (error 'fd-leak "~a did not stop within 30 s" (proc-name p)))
  (check-equal? (subprocess-status* p) 0 (format "~a's exit status" (proc-name p))))

(test-case "a handler's subprocesses hold no socket; the pool restarts at once on its port"
  (call-with-temp-dir
   "fcgi-fdleak"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (display-to-file app-source app)
     (define port (car (free-ports 1)))
     (define args (list "fastcgi" "serve" app "--listen" (format "127.0.0.1:~a" port) "--workers" "1"
                        "--access-log" (path->string (build-path dir "access.log"))))
     (dynamic-wind
      void
      (λ ()
        (define first-pool (start-process "first-pool" raco args #:dir dir))
        (wait-serving port first-pool "the first pool to serve")
        (start-children! port)
        (stop! first-pool)
        (check-true (pair? (orphans racket-arg)) "the orphan outlived the pool")
        (define held (orphan-descriptors))
        (define outcome (restart-outcome (λ () (start-process "second-pool" raco args #:dir dir)) port))
        (check-equal? outcome 'served)
        (check-equal? held '() "descriptors the handlers' subprocesses hold"))
      kill-orphans!))))

(test-case "serve --single-process spawned with the listening socket as fd 0"
  (call-with-temp-dir
   "fcgi-fdleak1"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (display-to-file app-source app)
     (define port (car (free-ports 1)))
     ;; as a web server spawns a FastCGI app: the listening socket is its stdin
     (define (spawn name)
       (define stdin (unsafe-file-descriptor->port (tcp-listening-fd port) 'listener '(read)))
       (define err-file (build-path dir (string-append name ".stderr")))
       (define-values (sp out in err)
         (call-with-output-file err-file #:exists 'truncate
           (λ (e) (subprocess #f stdin e raco "fastcgi" "serve" app "--single-process"
                              "--access-log" (path->string (build-path dir "access.log"))))))
       (close-input-port stdin)
       (close-input-port out)
       (proc name sp (subprocess-pid sp) #f #f #f err-file))
     (dynamic-wind
      void
      (λ ()
        (define first-server (spawn "first-server"))
        (wait-serving port first-server "the first server to serve")
        (start-children! port)
        (stop! first-server)
        (define held (orphan-descriptors))
        (define outcome (restart-outcome (λ () (spawn "second-server")) port))
        (check-equal? outcome 'served)
        (check-equal? held '() "descriptors the handlers' subprocesses hold"))
      kill-orphans!))))
