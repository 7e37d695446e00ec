#lang racket/base
;; Signals that Racket does not expose, through the FFI (Linux x86_64).
;; Racket turns SIGINT, SIGTERM and SIGHUP into breaks of the main thread, but only when
;; they were not ignored at exec (under nohup SIGHUP is, and a non-interactive shell's
;; background job ignores SIGINT), and only when they are not blocked (a supervisor may
;; hand down a blocked mask, which survives exec too); for anything else the default
;; action (for SIGUSR1: terminate) applies. A process that must answer its signals
;; whatever it inherited takes them (take-signals!): it blocks them in its signal mask and
;; reads them from a signalfd, which a green thread waits on like any other fd (Linux
;; queues a blocked signal even when its disposition is to ignore it, and even for PID 1,
;; which otherwise gets only the signals it has a handler for). A signal mask is per OS
;; thread and inherited by the threads created later: the mask must be set while Racket
;; runs a single OS thread (before the first subprocess, which starts rktio's SIGCHLD
;; thread), or a thread that does not block the signal takes it. block-signals! checks
;; that.
(require ffi/unsafe
         ffi/unsafe/port
         racket/list
         (only-in "ffi.rkt" c-getpid define-libc))
(provide SIGHUP SIGINT SIGKILL SIGTERM SIGUSR1 SIGQUIT
         send-signal!
         process-alive?
         block-signals!
         take-signals!
         inherited-signals-note
         unblock-signals!
         die-with-parent!
         parent-pid
         signal-name)

(define SIGHUP 1)
(define SIGINT 2)
(define SIGQUIT 3)
(define SIGKILL 9)
(define SIGUSR1 10)
(define SIGTERM 15)
(define SIGCHLD 17)

(define SIG_BLOCK 0)
(define SIG_UNBLOCK 1)
(define SIG_SETMASK 2)
(define SIG_DFL 0)
(define SIG_IGN 1)
(define sigaction-size 152)       ; sizeof(struct sigaction) in glibc: handler, mask, flags, restorer
(define SFD_NONBLOCK #o4000)
(define SFD_CLOEXEC #o2000000)
(define PR_SET_PDEATHSIG 1)
(define EPERM 1)
(define sigset-size 128)          ; sizeof(sigset_t) in glibc
(define siginfo-size 128)         ; sizeof(struct signalfd_siginfo)

(define-libc c-kill "kill" _int _int -> _int)
(define-libc c-sigemptyset "sigemptyset" _bytes -> _int)
(define-libc c-sigaddset "sigaddset" _bytes _int -> _int)
(define-libc c-sigprocmask "sigprocmask" _int _bytes _pointer -> _int)
(define-libc c-sigismember "sigismember" _bytes _int -> _int)
(define-libc c-sigaction "sigaction" _int _bytes _bytes -> _int)
(define-libc c-signalfd "signalfd" _int _bytes _int -> _int)
(define-libc c-read "read" _int _bytes _size -> _ssize)
(define-libc c-prctl "prctl" _int _ulong _ulong _ulong _ulong -> _int)
(define-libc c-getppid "getppid" -> _int)

;; signal-name : natural -> string
(define (signal-name n)
  (case n
    [(1) "SIGHUP"] [(2) "SIGINT"] [(3) "SIGQUIT"] [(6) "SIGABRT"] [(9) "SIGKILL"]
    [(10) "SIGUSR1"] [(11) "SIGSEGV"] [(15) "SIGTERM"]
    [else (format "signal ~a" n)]))

;; send-signal! : natural natural -> boolean ; #f when there is no such process
(define (send-signal! pid sig)
  (zero? (c-kill pid sig)))

;; process-alive? : natural -> boolean
;; Signal 0 checks existence (EPERM: exists, not ours); a zombie (exited, not yet reaped by
;; its parent) counts as gone.
(define (process-alive? pid)
  (and (or (zero? (c-kill pid 0)) (= (saved-errno) EPERM))
       (not (zombie? pid))))

;; zombie? : natural -> boolean ; state Z in /proc/PID/stat (after the parenthesised name)
(define (zombie? pid)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define stat (call-with-input-file (format "/proc/~a/stat" pid) (λ (in) (read-string 512 in))))
    (define m (regexp-match #rx"\\) ([A-Za-z])" stat))
    (and m (equal? (cadr m) "Z"))))

;; make-sigset : (listof natural) -> bytes
(define (make-sigset signals)
  (define set (make-bytes sigset-size 0))
  (c-sigemptyset set)
  (for ([s (in-list signals)]) (c-sigaddset set s))
  set)

;; os-thread-count : -> natural
(define (os-thread-count)
  (with-handlers ([exn:fail? (λ (e) 1)])
    (length (directory-list "/proc/self/task"))))

;; block-signals! : (listof natural) -> evt
;; Blocks the signals and returns an event that is ready with the number of a signal that
;; arrived (each arrival is reported once). Raises when more than one OS thread runs.
(define (block-signals! signals)
  (define n (os-thread-count))
  (unless (= n 1)
    (error 'block-signals! "~a OS threads run already: the signal mask would not cover them" n))
  (define set (make-sigset signals))
  (unless (zero? (c-sigprocmask SIG_BLOCK set #f))
    (error 'block-signals! "sigprocmask failed (errno ~a)" (saved-errno)))
  (define fd (c-signalfd -1 set (bitwise-ior SFD_NONBLOCK SFD_CLOEXEC)))
  (when (negative? fd) (error 'block-signals! "signalfd failed (errno ~a)" (saved-errno)))
  (define buf (make-bytes siginfo-size 0))
  (define queue '())
  ;; read-one : -> (or/c natural #f) ; the next pending signal, without blocking
  (define (read-one)
    (cond
      [(pair? queue) (begin0 (first queue) (set! queue (rest queue)))]
      [(= siginfo-size (c-read fd buf siginfo-size))
       (integer-bytes->integer buf #f #f 0 4)]
      [else #f]))
  (define ready (unsafe-fd->evt fd 'read))
  (let poll ()
    (guard-evt
     (λ ()
       (define s (read-one))
       (if s
           (wrap-evt always-evt (λ (_) s))
           (replace-evt ready (λ (_) (poll))))))))

;; take-signals! : (listof natural) -> evt
;; For a process that answers these signals itself (the manager, a single process, the
;; dev front), whatever it inherited across exec: they are blocked and come as the event
;; block-signals! returns; their dispositions become the default ones, so that no child
;; inherits an ignored SIGHUP (the child's Racket then catches it as usual); an ignored
;; SIGCHLD (which would let the kernel reap every child before Racket reads its status)
;; becomes the default one too; and every other signal is unblocked but SIGCHLD, which
;; Racket's main thread blocks itself (its SIGCHLD thread takes it).
(define (take-signals! signals)
  (define evt (block-signals! signals))
  (for ([s (in-list signals)]) (set-disposition! s SIG_DFL))
  (when (= (disposition SIGCHLD) SIG_IGN) (set-disposition! SIGCHLD SIG_DFL))
  (define now (make-bytes sigset-size 0))
  (c-sigprocmask SIG_BLOCK (make-sigset '()) now)
  (define keep (if (= 1 (c-sigismember now SIGCHLD)) (list SIGCHLD) '()))
  (unless (zero? (c-sigprocmask SIG_SETMASK (make-sigset (append keep signals)) #f))
    (error 'take-signals! "sigprocmask failed (errno ~a)" (saved-errno)))
  evt)

;; disposition : natural -> natural ; the handler's address: SIG_DFL, SIG_IGN or a handler
(define (disposition sig)
  (define old (make-bytes sigaction-size 0))
  (c-sigaction sig #f old)
  (integer-bytes->integer old #f #f 0 8))

;; set-disposition! : natural natural -> void ; SIG_DFL or SIG_IGN, no flags, empty mask
(define (set-disposition! sig handler)
  (define new (make-bytes sigaction-size 0))
  (integer->integer-bytes handler 8 #f #f new 0)
  (unless (zero? (c-sigaction sig new #f))
    (error 'take-signals! "sigaction ~a failed (errno ~a)" (signal-name sig) (saved-errno))))

;; inherited-signals-note : (listof natural) -> (or/c string #f)
;; Which of these signals came ignored or blocked (to be read before take-signals!), as
;; "SIGHUP ignored, SIGTERM blocked", or #f when none did.
(define (inherited-signals-note signals)
  (define now (make-bytes sigset-size 0))
  (c-sigprocmask SIG_BLOCK (make-sigset '()) now)
  (define notes
    (for*/list ([s (in-list signals)]
                [what (in-list (list (and (= (disposition s) SIG_IGN) "ignored")
                                     (and (= 1 (c-sigismember now s)) "blocked")))]
                #:when what)
      (format "~a ~a" (signal-name s) what)))
  (and (pair? notes) (apply string-append (add-between notes ", "))))

;; unblock-signals! : (listof natural) -> void ; undo an inherited block (in a worker)
(define (unblock-signals! signals)
  (void (c-sigprocmask SIG_UNBLOCK (make-sigset signals) #f)))

;; parent-pid : -> natural
(define (parent-pid) (c-getppid))

;; die-with-parent! : natural natural -> void
;; Asks the kernel to send sig when our parent (expected-ppid) dies; if it is already gone
;; (we were re-parented before the call), sends sig to ourselves now.
(define (die-with-parent! expected-ppid sig)
  (c-prctl PR_SET_PDEATHSIG sig 0 0 0)
  (unless (= (c-getppid) expected-ppid)
    (c-kill (c-getpid) sig)))
