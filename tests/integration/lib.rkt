#lang racket/base
;; Helpers for the end-to-end tests against real fronts (nginx, cgi-fcgi): external
;; programs that must exist, processes that always die (process group, custodian and exit
;; plumber), free ports, bounded waits, a bounded HTTP client, and /proc memory figures.
;; Every wait here has a deadline: a hung front fails the test, it does not hang it.
(require ffi/unsafe
         file/sha1
         net/http-client
         racket/file
         racket/list
         racket/port
         racket/string
         racket/tcp
         racket/unix-socket)
(provide require-program!
         call-with-temp-dir
         free-ports
         (struct-out proc)
         start-process
         stop-process!
         call-with-process
         read-line/timeout
         run-program
         with-timeout
         wait-until
         wait-for-tcp
         wait-for-unix-socket
         (struct-out http-response)
         http-request
         http-response-header
         http-response-header*
         status-memory-kb
         reset-peak-memory!
         sha1-hex
         port-length+sha1
         pattern-bytes
         write-pattern
         build-trampoline!)

;; require-program! : path-string string -> path
;; Fails loudly (never skips) when a front the tests need is not installed.
(define (require-program! path package)
  (unless (and (file-exists? path) (memq 'execute (file-or-directory-permissions path)))
    (error 'integration
           "~a is missing: install the Debian package ~a (the Makefile does: apt-get install ~a)"
           path package package))
  (string->path path))

;; call-with-temp-dir : string (path -> any) -> any
;; A fresh directory under /tmp (short, so unix socket paths stay under 108 bytes),
;; removed afterwards even when the body fails, or at exit when a break (raco test's
;; Ctrl-C) ends the process without unwinding the test's thread.
(define (call-with-temp-dir prefix proc)
  (define dir (make-temporary-directory (string-append prefix "-~a") #:base-dir "/tmp"))
  (define (remove-dir) (with-handlers ([exn:fail? void]) (delete-directory/files dir)))
  (define at-exit (plumber-add-flush! (current-plumber) (λ (h) (remove-dir))))
  (dynamic-wind
   void
   (λ () (proc dir))
   (λ ()
     (plumber-flush-handle-remove! at-exit)
     (remove-dir))))

;; free-ports : natural -> (listof port-number)
;; Ports the kernel hands out for port 0, all held at once so that they differ, then freed.
(define (free-ports n)
  (define listeners (for/list ([_ (in-range n)]) (tcp-listen 0 4 #t "127.0.0.1")))
  (define ports
    (for/list ([l (in-list listeners)])
      (define-values (host port remote-host remote-port) (tcp-addresses l #t))
      port))
  (for-each tcp-close listeners)
  ports)

;; ---------------------------------------------------------------------------------------
;; Processes.

;; A started program: a name for messages, its subprocess and pid, the pipe to its stdin,
;; its stdout (a pipe, or #f and a file) and the file that holds its stderr.
(struct proc (name subprocess pid stdin stdout stdout-file stderr-file))

(define c-kill (get-ffi-obj "kill" #f (_fun #:save-errno 'posix _int _int -> _int)))
(define SIGKILL 9)
(define SIGTERM 15)

;; Every process started here, so that the exit plumber can kill what a crash left behind.
(define live (make-hasheq))
(define live-lock (make-semaphore 1))

;; kill-group! : proc natural -> void ; signal the whole process group (its leader is pid)
(define (kill-group! p sig)
  (c-kill (- (proc-pid p)) sig)
  (void))

(void
 (plumber-add-flush! (current-plumber)
                     (λ (h)
                       (for ([p (in-list (hash-keys live))])
                         (kill-group! p SIGKILL)))))

;; setpriv (util-linux, always on Debian) execs the program with PR_SET_PDEATHSIG, so
;; that it is killed even when this process dies by SIGKILL and no clean-up runs.
(define setpriv "/usr/bin/setpriv")

;; start-process : string path-string (listof string) #:dir path #:stdout-pipe? boolean
;;                 -> proc
;; Starts the program as the leader of a new process group, to die with us. Its stderr
;; (and its stdout unless stdout-pipe?) goes to a file in dir, for failure messages.
;; stdin is a pipe left open: a child that watches it learns when we are gone.
(define (start-process name program args #:dir dir #:stdout-pipe? [stdout-pipe? #f])
  (define err-file (build-path dir (string-append name ".stderr")))
  (define out-file (and (not stdout-pipe?) (build-path dir (string-append name ".stdout"))))
  (define err (open-output-file err-file #:exists 'truncate))
  (define out (and out-file (open-output-file out-file #:exists 'truncate)))
  (define-values (sp stdout stdin _stderr)
    (parameterize ([current-subprocess-custodian-mode 'kill])
      (if (file-exists? setpriv)
          (apply subprocess out #f err 'new setpriv "--pdeathsig" "KILL" "--" program args)
          (apply subprocess out #f err 'new program args))))
  (close-output-port err)
  (when out (close-output-port out))
  (define p (proc name sp (subprocess-pid sp) stdin stdout out-file err-file))
  (call-with-semaphore live-lock (λ () (hash-set! live p #t)))
  p)

;; stop-process! : proc #:timeout seconds -> (or/c natural #f)
;; SIGTERM to the group, then SIGKILL if it has not exited in time; returns the exit
;; status, or #f when even SIGKILL did not end it within a second.
(define (stop-process! p #:timeout [timeout 5])
  (define sp (proc-subprocess p))
  (call-with-semaphore live-lock (λ () (hash-remove! live p)))
  (with-handlers ([exn:fail? void]) (close-output-port (proc-stdin p)))
  (when (eq? (subprocess-status sp) 'running)
    (kill-group! p SIGTERM)
    (unless (sync/timeout timeout sp)
      (kill-group! p SIGKILL)
      (sync/timeout 1 sp)))
  ;; the leader may be gone while others in its group live on
  (kill-group! p SIGKILL)
  (when (proc-stdout p) (close-input-port (proc-stdout p)))
  (define st (subprocess-status sp))
  (and (exact-integer? st) st))

;; call-with-process : string path (listof string) #:dir path (proc -> any) -> any
(define (call-with-process name program args #:dir dir #:stdout-pipe? [pipe? #f] body)
  (define p (start-process name program args #:dir dir #:stdout-pipe? pipe?))
  (dynamic-wind void (λ () (body p)) (λ () (stop-process! p))))

;; read-line/timeout : input-port seconds string -> string
(define (read-line/timeout in secs what)
  (define line (sync/timeout secs (read-line-evt in 'linefeed)))
  (cond
    [(not line) (error 'integration "timed out after ~a s waiting for ~a" secs what)]
    [(eof-object? line) (error 'integration "end of file while waiting for ~a" what)]
    [else line]))

;; run-program : path (listof string) #:stdin bytes #:env (listof (cons string (or/c string #f)))
;;               #:timeout seconds -> (values exit-code stdout-bytes stderr-bytes)
;; Runs a program to completion with the current environment changed by env (#f removes
;; a variable); stdin is written and the outputs read concurrently, so no pipe fills up.
(define (run-program program args #:stdin [input #""] #:env [env '()] #:timeout [timeout 20])
  (define vars (environment-variables-copy (current-environment-variables)))
  (for ([kv (in-list env)])
    (environment-variables-set! vars (string->bytes/utf-8 (car kv))
                                (and (cdr kv) (string->bytes/utf-8 (cdr kv)))))
  (define-values (sp out in err)
    (parameterize ([current-environment-variables vars]
                   [current-subprocess-custodian-mode 'kill])
      (apply subprocess #f #f #f program args)))
  (define (collect port)
    (define result (box #""))
    (values result (thread (λ () (set-box! result (port->bytes port)) (close-input-port port)))))
  (define-values (out-box out-thread) (collect out))
  (define-values (err-box err-thread) (collect err))
  (define writer
    (thread (λ ()
              (with-handlers ([exn:fail? void])   ; the program may exit without reading
                (write-bytes input in))
              (with-handlers ([exn:fail? void]) (close-output-port in)))))
  (unless (sync/timeout timeout sp)
    (subprocess-kill sp #t)
    (error 'integration "~a ~a did not finish within ~a s" program (string-join args) timeout))
  (for ([t (list out-thread err-thread writer)])
    (unless (sync/timeout 5 t)
      (error 'integration "~a: its output did not end within 5 s of its exit" program)))
  (values (subprocess-status sp) (unbox out-box) (unbox err-box)))

;; ---------------------------------------------------------------------------------------
;; Bounded waits.

;; with-timeout : seconds string (-> any) -> any
;; Runs thunk in a thread under its own custodian; after secs, everything it opened
;; (sockets, threads) is shut down and the test fails with what.
(define (with-timeout secs what thunk)
  (define cust (make-custodian))
  (define result #f)
  (define t
    (parameterize ([current-custodian cust])
      (thread (λ ()
                (set! result
                      (with-handlers ([(λ (e) #t) (λ (e) (λ () (raise e)))])
                        (call-with-values thunk (λ vs (λ () (apply values vs))))))))))
  (define done? (sync/timeout secs t))
  (custodian-shutdown-all cust)
  (unless done? (error 'integration "timed out after ~a s: ~a" secs what))
  (result))

;; wait-until : seconds string (-> any) -> any
;; Polls thunk every 20 ms until it returns a true value.
(define (wait-until secs what thunk)
  (define deadline (+ (current-inexact-milliseconds) (* 1000 secs)))
  (let loop ()
    (cond
      [(thunk) => values]
      [(> (current-inexact-milliseconds) deadline)
       (error 'integration "timed out after ~a s waiting for ~a" secs what)]
      [else (sleep 0.02) (loop)])))

;; wait-for-tcp : port-number seconds -> void ; until something accepts on 127.0.0.1:port
(define (wait-for-tcp port [secs 10])
  (wait-until secs (format "127.0.0.1:~a to accept connections" port)
              (λ ()
                (with-handlers ([exn:fail:network? (λ (e) #f)])
                  (define-values (in out) (tcp-connect "127.0.0.1" port))
                  (close-input-port in)
                  (close-output-port out)
                  #t))))

;; wait-for-unix-socket : path seconds -> void
(define (wait-for-unix-socket path [secs 10])
  (wait-until secs (format "~a to accept connections" path)
              (λ ()
                (with-handlers ([exn:fail? (λ (e) #f)])
                  (define-values (in out) (unix-socket-connect path))
                  (close-input-port in)
                  (close-output-port out)
                  #t))))

;; ---------------------------------------------------------------------------------------
;; HTTP client.

;; status: number; headers: (listof (cons string-downcased string)) in arrival order
(struct http-response (status headers body) #:transparent)

;; http-request : port-number string #:method #:headers #:data #:timeout -> http-response
;; One request to 127.0.0.1:port on a fresh connection, the whole answer read, bounded.
(define (http-request port path
                      #:method [method "GET"]
                      #:headers [headers '()]
                      #:data [data #f]
                      #:timeout [timeout 20])
  (with-timeout
   timeout (format "~a http://127.0.0.1:~a~a" method port path)
   (λ ()
     (define-values (status-line raw-headers body-port)
       (http-sendrecv "127.0.0.1" path #:port port #:method method #:headers headers
                      #:data data #:content-decode '()))
     (define body (port->bytes body-port))
     (close-input-port body-port)
     (http-response
      (string->number (bytes->string/latin-1 (cadr (regexp-match #rx#"^HTTP/[0-9.]+ ([0-9]+)" status-line))))
      (for/list ([h (in-list raw-headers)])
        (define m (regexp-match #rx#"^([^:]*):[ \t]*(.*)$" h))
        (cons (string-downcase (bytes->string/latin-1 (cadr m)))
              (bytes->string/latin-1 (caddr m))))
      body))))

;; http-response-header : http-response string -> (or/c string #f) ; first value of a header
(define (http-response-header r name)
  (define p (assoc (string-downcase name) (http-response-headers r)))
  (and p (cdr p)))

;; http-response-header* : http-response string -> (listof string) ; every value, in order
(define (http-response-header* r name)
  (for/list ([p (in-list (http-response-headers r))]
             #:when (equal? (car p) (string-downcase name)))
    (cdr p)))

;; ---------------------------------------------------------------------------------------
;; Memory and content.

;; status-memory-kb : pid symbol -> natural ; a field of /proc/PID/status ('VmRSS 'VmHWM)
(define (status-memory-kb pid field)
  (define text (file->string (format "/proc/~a/status" pid)))
  (define m (regexp-match (pregexp (format "(?m:^~a:\\s+([0-9]+) kB$)" field)) text))
  (unless m (error 'integration "no ~a in /proc/~a/status" field pid))
  (string->number (cadr m)))

;; reset-peak-memory! : pid -> void
;; Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+), so the next
;; VmHWM reading is the peak of what happened in between.
(define (reset-peak-memory! pid)
  (call-with-output-file (format "/proc/~a/clear_refs" pid) #:exists 'append
    (λ (out) (write-string "5" out)))
  (void))

;; sha1-hex : (or/c bytes input-port) -> string
(define (sha1-hex v)
  (sha1 (if (bytes? v) (open-input-bytes v) v)))

;; port-length+sha1 : input-port -> (values natural string)
;; Streams the port through sha1, counting the bytes on the way: nothing is held whole.
(define (port-length+sha1 in)
  (define n 0)
  (define counting
    (make-input-port 'counting
                     (λ (bs)
                       (define k (read-bytes-avail!* bs in))
                       (cond
                         [(eqv? k 0) (wrap-evt in (λ (_) 0))]
                         [else (when (exact-integer? k) (set! n (+ n k))) k]))
                     #f
                     void))
  (define digest (sha1-hex counting))
  (values n digest))

;; pattern-bytes : natural natural -> bytes
;; Bytes [start, end) of a deterministic stream that is not periodic at any small period,
;; so a chunk lost, doubled or moved changes the result.
(define (pattern-bytes start end)
  (define bs (make-bytes (- end start)))
  (for ([i (in-range start end)])
    (bytes-set! bs (- i start) (bitwise-and (+ i (quotient i 251)) 255)))
  bs)

;; write-pattern : natural output-port -> void ; the first n pattern bytes, in 64 KiB writes
(define (write-pattern n out)
  (let loop ([i 0])
    (when (< i n)
      (define end (min n (+ i 65536)))
      (write-bytes (pattern-bytes i end) out)
      (loop end))))

;; ---------------------------------------------------------------------------------------
;; The CGI trampoline (trampoline/).

;; build-trampoline! : [#:bin path-string] [#:default-connect string] -> path
;; Builds trampoline/fcgi-trampoline with its Makefile (a no-op when it is up to date), or a
;; copy at bin with another compiled-in default target; fails loudly without make or gcc.
(define (build-trampoline! #:bin [bin #f] #:default-connect [default-connect #f])
  (define make (require-program! "/usr/bin/make" "make"))
  (require-program! "/usr/bin/gcc" "gcc")
  (define dir (simplify-path (build-path (variable-reference->module-source (#%variable-reference))
                                         'up 'up 'up "trampoline")))
  (define args (append (list "-s" "-C" (path->string dir))
                       (if bin (list (format "BIN=~a" bin)) '())
                       (if default-connect (list (format "DEFAULT_CONNECT=~a" default-connect)) '())))
  (define-values (code out err) (run-program make args #:timeout 60))
  (unless (zero? code)
    (error 'integration "building the trampoline failed:\n~a~a" out err))
  (if bin (string->path bin) (build-path dir "fcgi-trampoline")))

(module+ test
  (require rackunit)
  (check-equal? (pattern-bytes 250 253) (bytes 250 252 253))
  (check-equal? (apply bytes-append (for/list ([i (in-range 0 1000 100)]) (pattern-bytes i (+ i 100))))
                (pattern-bytes 0 1000))
  (check-equal? (call-with-output-bytes (λ (o) (write-pattern 70000 o))) (pattern-bytes 0 70000))
  (check-exn #rx"missing: install the Debian package nope"
             (λ () (require-program! "/nonexistent/prog" "nope")))
  (check-exn #rx"timed out after 0.1 s: sleeping"
             (λ () (with-timeout 0.1 "sleeping" (λ () (sleep 10)))))
  (check-equal? (call-with-values (λ () (with-timeout 5 "values" (λ () (values 1 2)))) list)
                '(1 2))
  (check-exn #rx"inner" (λ () (with-timeout 5 "raise" (λ () (error "inner")))))
  (check-equal? (length (remove-duplicates (free-ports 3))) 3))
