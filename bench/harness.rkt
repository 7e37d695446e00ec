#lang racket/base
;; What the bench and the profile share: the programs, the commands log, peers (programs
;; started, waited for, always stopped), the nginx front, the C responder's build, and how
;; our server is started in this tree (which `raco fastcgi serve` options exist).
(require compiler/find-exe
         json
         racket/file
         racket/runtime-path
         racket/string
         "../tests/integration/lib.rkt"
         "configs.rkt"
         "measure.rkt")
(provide bench-dir
         repo-dir
         nginx
         gcc
         php-fpm
         go
         haproxy
         curl
         strace
         racket
         raco
         hello-body
         log-command!
         logged-commands
         say
         (struct-out peer)
         wait-for-address
         call-with-peers
         answers?
         tail-of
         backend-memory
         (struct-out features)
         serve-features
         current-features
         strip-unix
         ours
         build-c!
         build-pace!
         c-peer
         write-php-files!
         php-peer
         start-nginx!)

(define-runtime-path bench-dir ".")
(define-runtime-path repo-dir "..")

(define nginx "/usr/sbin/nginx")
(define gcc "/usr/bin/gcc")
(define php-fpm "/usr/sbin/php-fpm8.2")
(define go "/usr/bin/go")
(define haproxy "/usr/sbin/haproxy")
(define curl "/usr/bin/curl")
(define strace "/usr/bin/strace")

(define racket (path->string (find-exe)))
(define raco (path->string (or (find-executable-path "raco") (error 'bench "raco is not on PATH"))))

(define hello-body #"Hello, World!\n")

;; Every command the run executes, in order, for RESULTS.md.
(define commands '())

;; logged-commands : -> (listof string) ; in the order run
(define (logged-commands) (reverse commands))

;; log-command! : string (listof string) -> void
(define (log-command! program args)
  (set! commands (cons (string-join (cons program args)) commands)))

;; say : format-string any ... -> void ; progress on stdout
(define (say fmt . args)
  (apply printf fmt args)
  (newline)
  (flush-output))

;; ---------------------------------------------------------------------------------------
;; Peers: a program to start, and the addresses it is ready on.

(struct peer (name program args addresses) #:transparent)

;; wait-for-address : string -> void
;; "unix:/path" or "127.0.0.1:port": until it accepts connections; "workers:N:FILE": until
;; the manager's status file (FILE, from --pid-file) lists N workers ready (idle or busy).
;; The socket answers as soon as one worker is up; every worker should be able to take the
;; front's connections from the start.
(define (wait-for-address address)
  (cond
    [(regexp-match #rx"^workers:([0-9]+):(.*)$" address)
     => (λ (m) (wait-until 30 (format "~a workers ready" (cadr m))
                           (λ () (>= (workers-ready (caddr m)) (string->number (cadr m))))))]
    [(regexp-match? #rx"^unix:" address) (wait-for-unix-socket (substring address 5) 30)]
    [else (wait-for-tcp (string->number (cadr (regexp-match #rx":([0-9]+)$" address))) 30)]))

;; workers-ready : path-string -> natural ; workers idle or busy in a manager's status file
(define (workers-ready file)
  (define board (with-handlers ([exn:fail? (λ (e) #f)]) (call-with-input-file file read-json)))
  (if (hash? board)
      (for/sum ([w (in-list (hash-ref board 'workers '()))])
        (if (member (hash-ref w 'state #f) '("idle" "busy")) 1 0))
      0))

;; call-with-peers : path (listof peer) ((listof proc) -> any) -> any
;; Starts them, waits until each accepts connections, and stops them all afterwards.
(define (call-with-peers dir peers body)
  (define procs '())
  (dynamic-wind
   void
   (λ ()
     (for ([p (in-list peers)])
       (log-command! (peer-program p) (peer-args p))
       (set! procs (cons (start-process (peer-name p) (peer-program p) (peer-args p) #:dir dir)
                         procs)))
     (for ([p (in-list peers)] [pr (in-list (reverse procs))])
       (with-handlers ([exn:fail?
                        (λ (e)
                          (error 'bench "~a did not start: ~a\n~a" (peer-name p) (exn-message e)
                                 (tail-of (proc-stderr-file pr))))])
         (for-each wait-for-address (peer-addresses p))))
     (body (reverse procs)))
   (λ () (for-each stop-process! procs))))

;; tail-of : path -> string ; the end of a log file, for error messages
(define (tail-of file)
  (define text (if (file-exists? file) (file->string file) ""))
  (substring text (max 0 (- (string-length text) 2000))))

;; answers? : port-number string (or/c bytes byte-regexp) -> boolean
;; GET path through the front answers 200 with that body, or a body the regexp matches.
(define (answers? port path expected)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define r (http-request port path #:timeout 10))
    (and (= (http-response-status r) 200)
         (if (byte-regexp? expected)
             (regexp-match? expected (http-response-body r))
             (equal? (http-response-body r) expected)))))

;; backend-memory : (listof proc) -> (values (or/c natural #f) (or/c natural #f))
(define (backend-memory procs)
  (if (null? procs)
      (values #f #f)
      (for/fold ([hwm 0] [rss 0]) ([p (in-list procs)])
        (define-values (h r) (tree-memory-kb (proc-pid p)))
        (values (+ hwm h) (+ rss r)))))

;; What `raco fastcgi serve --help` offers in this tree: the manager's --workers, the
;; --single-process switch that turns it off, and --access-log.
(struct features (workers? single? access-log?) #:transparent)

;; serve-features : -> features
(define (serve-features)
  (define-values (status out err)
    (run-program (string->path raco) '("fastcgi" "serve" "--help") #:timeout 60))
  (unless (eqv? status 0) (error 'bench "raco fastcgi serve --help failed:\n~a" err))
  (features (regexp-match? #rx"--workers" out)
            (regexp-match? #rx"--single-process" out)
            (regexp-match? #rx"--access-log" out)))

;; The features of this run, read once at its start.
(define current-features (make-parameter (features #f #f #f)))

;; strip-unix : string -> string ; "unix:/p" -> "/p", a TCP address unchanged
(define (strip-unix a) (if (regexp-match? #rx"^unix:" a) (substring a 5) a))

;; ours : string string [(listof string)] -> peer
;; raco fastcgi serve with --log-level warning (nginx and php-fpm log nothing per request
;; either); one process (--single-process, when the manager exists) unless extra asks for
;; --workers.
(define (ours app address [extra '()])
  (define single (if (and (features-single? (current-features)) (not (member "--workers" extra)))
                     '("--single-process")
                     '()))
  ;; with --workers N: also wait until the N workers are ready (wait-for-address)
  (define workers (let ([m (member "--workers" extra)]) (and m (pair? (cdr m)) (cadr m))))
  (define pid-file (and workers (path->string (make-temporary-file "fcgi-bench-~a.pid" #f))))
  (when pid-file (delete-file pid-file))
  (peer "ours" raco
        (append (list "fastcgi" "serve" "--listen" address "--log-level" "warning")
                single extra
                (if pid-file (list "--pid-file" pid-file) '())
                (list (path->string (simplify-path (build-path repo-dir app)))))
        (if pid-file
            (list address (format "workers:~a:~a.status.json" workers pid-file))
            (list address))))


;; build-c! : path -> path ; the C responder, compiled into dir
(define (build-c! dir) (compile-c! dir "responder" "c-responder" "responder.c"))

;; c-peer : path string -> peer ; the C responder built in dir, on address
(define (c-peer dir address)
  (peer "c-responder" (path->string (build-path dir "responder")) (list address) (list address)))

;; write-php-files! : path string -> string
;; dir/php/hello.php (the php-fpm peer's hello world; nginx's SCRIPT_FILENAME) and
;; dir/php-fpm.conf, a pool on the unix socket path; returns the configuration's text.
(define (write-php-files! dir socket)
  (make-directory* (build-path dir "php"))
  (call-with-output-file (build-path dir "php" "hello.php") #:exists 'truncate
    (λ (o) (write-string "<?php\nheader('Content-Type: text/plain');\necho \"Hello, World!\\n\";\n" o)))
  (define conf (php-fpm-conf dir socket))
  (call-with-output-file (build-path dir "php-fpm.conf") #:exists 'truncate
    (λ (o) (write-string conf o)))
  conf)

;; php-peer : path string -> peer ; php-fpm with dir/php-fpm.conf (write-php-files!), on address
(define (php-peer dir address)
  (peer "php-fpm" php-fpm (list "-F" "-R" "-y" (path->string (build-path dir "php-fpm.conf")))
        (list address)))

;; build-pace! : path -> path ; the paced load client (bench/pace/pace.c), compiled into dir
(define (build-pace! dir) (compile-c! dir "pace" "pace" "pace.c"))

;; compile-c! : path string string ... -> path ; bench/SOURCE... compiled into dir/name
(define (compile-c! dir name . source)
  (define exe (build-path dir name))
  (define c-args (list "-O2" "-Wall" "-o" (path->string exe)
                       (path->string (apply build-path bench-dir source))))
  (log-command! gcc c-args)
  (define-values (st out err) (run-program (string->path gcc) c-args #:timeout 120))
  (unless (eqv? st 0) (error 'bench "gcc failed:\n~a" err))
  exe)

;; start-nginx! : path path (hash string front) -> proc
(define (start-nginx! dir fronts)
  (define conf (build-path dir "nginx.conf"))
  (call-with-output-file conf #:exists 'truncate
    (λ (o) (write-string (nginx-conf dir (build-path dir "php")
                                     (sort (hash-values fronts) < #:key front-port))
                         o)))
  (define args (list "-p" (path->string dir) "-c" (path->string conf)))
  (log-command! nginx args)
  (define p (start-process "nginx" nginx args #:dir dir))
  (with-handlers ([exn:fail? (λ (e)
                               (stop-process! p)
                               (error 'bench "nginx did not start: ~a\n~a~a" (exn-message e)
                                      (tail-of (proc-stderr-file p))
                                      (tail-of (build-path dir "nginx-error.log"))))])
    (for ([f (in-hash-values fronts)]) (wait-for-tcp (front-port f) 30)))
  p)

