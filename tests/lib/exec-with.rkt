#lang racket/base
;; racket exec-with.rkt [--ignore SIG,...] [--block SIG,...] [--open-fd N:PATH] -- PROGRAM ARG ...
;; Runs PROGRAM in this process (execv) with what a server may inherit from the way it is
;; started: signals ignored (as nohup leaves SIGHUP, as a non-interactive shell leaves a
;; background job's SIGINT), signals blocked in the mask (as a supervisor may hand down),
;; a descriptor open without close-on-exec (as a shell may hold). Both survive exec. Signal
;; names: HUP INT QUIT TERM USR1. Exactly what is asked: the signals not named in --ignore
;; take their default action (whatever this process inherited: a test run under nohup
;; leaves SIGHUP ignored), and the mask is set to exactly --block's signals.
(require ffi/unsafe
         racket/cmdline
         racket/string
         (only-in "../../fastcgi/private/os/exec.rkt" exec-program!))

(define libc (ffi-lib #f))
(define (c name type) (get-ffi-obj name libc type))
(define c-signal (c "signal" (_fun _int _intptr -> _intptr)))
(define c-sigemptyset (c "sigemptyset" (_fun _bytes -> _int)))
(define c-sigaddset (c "sigaddset" (_fun _bytes _int -> _int)))
(define c-sigprocmask (c "sigprocmask" (_fun _int _bytes _pointer -> _int)))
(define c-open (c "open" (_fun _path _int -> _int)))
(define c-dup2 (c "dup2" (_fun _int _int -> _int)))
(define c-close (c "close" (_fun _int -> _int)))
(define c-fcntl (c "fcntl" (_fun _int _int _int -> _int)))

(define numbers (hash "HUP" 1 "INT" 2 "QUIT" 3 "USR1" 10 "PIPE" 13 "TERM" 15))
(define (signals s) (for/list ([n (in-list (string-split s ","))]) (hash-ref numbers n)))

;; in main: raco test (which loads every module under tests/) runs nothing of it
(module+ main
  (define ignore '())
  (define block '())
  (define fds '())
  (define argv
    (command-line
     #:once-each
     [("--ignore") s "signals to ignore" (set! ignore (signals s))]
     [("--block") s "signals to block" (set! block (signals s))]
     #:multi
     [("--open-fd") spec "N:PATH: PATH open for reading and writing as descriptor N"
      (set! fds (cons (string-split spec ":") fds))]
     #:args (program . args) (cons program args)))

  ;; this racket's own descriptors (its event poll, its pipes) are not the program's
  (for ([name (in-list (directory-list "/proc/self/fd"))])
    (define fd (string->number (path->string name)))
    (when (and fd (>= fd 3)) (c-fcntl fd 2 1)))          ; F_SETFD FD_CLOEXEC
  ;; Racket ignores SIGPIPE itself: the program gets it as a shell would give it
  (void (c-signal 13 0))
  (for ([s (in-list (hash-values numbers))] #:unless (= s 13)) (c-signal s 0))   ; SIG_DFL
  (for ([s (in-list ignore)]) (c-signal s 1))
  (define set (make-bytes 128 0))
  (void (c-sigemptyset set))
  (for ([s (in-list block)]) (c-sigaddset set s))
  (void (c-sigprocmask 2 set #f))
  (for ([spec (in-list fds)])
    (define fd (c-open (string->path (cadr spec)) 2))
    (when (negative? fd) (error 'exec-with "cannot open ~a" (cadr spec)))
    (void (c-dup2 fd (string->number (car spec))))
    (unless (= fd (string->number (car spec))) (void (c-close fd))))
  (exec-program! (car argv) (cdr argv))
  (error 'exec-with "cannot run ~a" (car argv)))
