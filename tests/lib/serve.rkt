#lang racket/base
;; What the tests that start `raco fastcgi serve` share: the raco they start it with, the
;; status its manager writes next to its pid file (the status page's source: reading it
;; sends no request, which would wake or count on a worker), and a pool of an app's own
;; on a unix socket in a fresh folder (call-with-served-app).
(require compiler/find-exe
         json
         racket/file
         racket/runtime-path
         "../integration/lib.rkt")
(provide raco
         (struct-out served)
         call-with-served-app
         pid-file->status-file
         read-status-file
         board-pids
         run-program*
         exec-with-module)

;; raco : string ; the raco on PATH
(define raco (path->string (find-executable-path "raco")))
(define racket-exe (path->string (find-exe)))
(define-runtime-path exec-with-module "exec-with.rkt")

;; pid-file->status-file : path-string -> string ; PID-FILE.status.json
(define (pid-file->status-file pid-file)
  (string-append (if (path? pid-file) (path->string pid-file) pid-file) ".status.json"))

;; read-status-file : path-string -> (or/c jsexpr #f)
;; The status in the file; #f while there is none or it cannot be read.
(define (read-status-file file)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (call-with-input-file file read-json)))

;; board-pids : (or/c hash #f) (listof string) -> (listof natural)
;; The pids of the status's workers whose state is one of states, in the status's order.
(define (board-pids board states)
  (for/list ([w (in-list (if board (hash-ref board 'workers '()) '()))]
             #:when (member (hash-ref w 'state #f) states))
    (hash-ref w 'pid)))

;; run-program* : path (listof string) -> (values natural string string)
;; run-program (integration/lib.rkt) with its output as text
(define (run-program* prog args)
  (define-values (code out err) (run-program prog args #:timeout 50))
  (values code (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))

;; A pool started by call-with-served-app: its folder, the address it serves
;; ("unix:DIR/app.sock"), its pid file and status file, and the process (integration/lib).
(struct served (dir address pid-file status-file proc))

;; call-with-served-app : string (or/c (listof string) (path -> (listof string)))
;;                        (served -> any) #:name string #:ready natural
;;                        #:exec-with (listof string) -> any
;; `raco fastcgi serve DIR/app.rkt --listen unix:DIR/app.sock --pid-file DIR/manager.pid`
;; with the options (or those for the folder), source written to app.rkt in a fresh
;; temporary folder; body runs once the socket is there and ready workers (idle or busy on
;; the status) are at least ready; the pool is stopped after it. A failure while waiting
;; says what serve wrote on stderr. exec-with: options of lib/exec-with.rkt, which starts
;; serve with what it names inherited (signals ignored or blocked, a descriptor open).
(define (call-with-served-app source opts body #:name [name "fcgi-serve"] #:ready [ready 1]
                              #:exec-with [exec-with '()])
  (call-with-temp-dir
   name
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define sock (path->string (build-path dir "app.sock")))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (display-to-file source app)
     (define serve-args (append (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                      "--pid-file" pid-file)
                                (if (procedure? opts) (opts dir) opts)))
     (define p (if (null? exec-with)
                   (start-process "serve" raco serve-args #:dir dir)
                   (start-process "serve" racket-exe
                                  (append (list (path->string exec-with-module)) exec-with
                                          (list "--" raco) serve-args)
                                  #:dir dir)))
     (define status-file (pid-file->status-file pid-file))
     (dynamic-wind
      void
      (λ ()
        (with-handlers ([exn:fail? (λ (e) (raise (exn:fail (format "~a\nserve's stderr:\n~a" (exn-message e)
                                                                   (file->string (proc-stderr-file p)))
                                                           (exn-continuation-marks e))))])
          (wait-for-unix-socket sock 30)
          (wait-until 60 (format "~a ready worker(s)" ready)
                      (λ () (>= (length (board-pids (read-status-file status-file) '("idle" "busy"))) ready))))
        (body (served dir (string-append "unix:" sock) pid-file status-file p)))
      (λ () (stop-process! p #:timeout 10))))))
