#lang racket/base
;; Forking a worker from a process that loaded the app once (loader.rkt), on Racket CS
;; (Linux x86_64). What a fork copies that a worker must not share, and how each is dealt
;; with (DESIGN.md, forking workers):
;;   - the runtime's own descriptors: rktio's epoll set and its wake-up pipe are one kernel
;;     object for the loader and every child (a wake-up byte or a readiness event taken by
;;     the wrong process): the child puts fresh ones under the same numbers;
;;   - the pseudo-random generator's state: reseeded from the kernel's entropy;
;;   - the parent: a forked child is its forker's child, but the manager supervises it, so
;;     the fork goes through an intermediate that exits at once: the worker becomes the
;;     child of the manager, which made itself the subreaper (child-process.rkt), and the
;;     manager collects its exit status as for any child; the worker has a process group
;;     of its own, so that the runtime's SIGCHLD thread in the manager (which waits for any
;;     child of the manager's group) never takes that status first;
;;   - what the app opened at load (a file, a socket, a database connection), a
;;     subprocess, an OS thread: none of these can be shared, so fork-hazards names them
;;     and the loader does not fork.
;; The heap is made static before the first fork (make-heap-static!): the collector never
;; copies those objects again, so their pages stay shared with every child.
;; None of this is documented by Racket: the runtime's descriptors are found and probed
;; before the app loads (probe-runtime-descriptors!), and a process whose runtime is not
;; as expected, or where the fork's Chez Scheme code does not compile, does not fork.
(require ffi/unsafe
         ffi/unsafe/vm
         (only-in "ffi.rkt" define-libc)
         "runtime-fds.rkt"
         "../util/probes.rkt")
(provide fork-child!
         fork-refusal
         await-new-parent!
         make-heap-static!
         fresh-runtime-descriptors!
         reseed-random!
         fork-hazards
         set-process-name!
         move-descriptor!)

(define-libc c-dup2 "dup2" _int _int -> _int)
(define-libc c-close "close" _int -> _int)
(define-libc c-getppid "getppid" -> _int)
(define-libc c-prctl "prctl" _int _pointer _ulong _ulong _ulong -> _int)

(define O_CLOEXEC #o2000000)
(define PR_SET_NAME 15)

;; address : string -> integer ; a libc function's address, for Chez's foreign-procedure
(define (address name) (cast (ffi-obj-ref name #f) _pointer _intptr))

;; fork-child! : -> integer
;; In the caller: the new worker's pid (or a negative number: no child was made). In the
;; worker: 0.
(define (fork-child!)
  (if (procedure? fork-code) (fork-code) -1))

;; fork-refusal : -> (or/c #f string)
;; Why this process must not fork, or #f. It probes the runtime's descriptors and keeps
;; them for fresh-runtime-descriptors! (runtime-fds.rkt): call it before the app loads.
(define (fork-refusal)
  (cond
    [(string? fork-code) fork-code]
    [else
     (define r (probe-runtime-descriptors!))
     (and (string? r) (string-append "the runtime's epoll set and wake-up pipe: " r))]))

;; fork-code : (or/c (-> integer) string) ; fork-child!'s work, or why it does not compile
;; Chez Scheme code with interrupts off from the first fork to the intermediate's exit:
;; no collection and no thread switch runs in the intermediate. The intermediate passes
;; the worker's pid back through a pipe, having put the worker in a process group of its
;; own (before its exit, so before the worker can become the manager's child).
(define fork-code
  (with-handlers ([exn:fail? (λ (e) (format "the fork's Chez Scheme code does not compile: ~a" (exn-message e)))])
  (vm-eval
   `(let ([fork (foreign-procedure ,(address "fork") () int)]
          [exit (foreign-procedure ,(address "_exit") (int) void)]
          [pipe2 (foreign-procedure ,(address "pipe2") (uptr int) int)]
          [write (foreign-procedure ,(address "write") (int uptr size_t) ssize_t)]
          [read (foreign-procedure ,(address "read") (int uptr size_t) ssize_t)]
          [close (foreign-procedure ,(address "close") (int) int)]
          [setpgid (foreign-procedure ,(address "setpgid") (int int) int)]
          [waitpid (foreign-procedure ,(address "waitpid") (int uptr int) int)]
          [buf (foreign-alloc 16)])
      ;; again : (-> integer) -> integer ; a call retried while it fails (EINTR), 1000 times at most
      (define (again thunk)
        (let loop ([i 0])
          (let ([r (thunk)])
            (if (and (< r 0) (< i 1000)) (loop (+ i 1)) r))))
      (lambda ()
        (with-interrupts-disabled
         (if (< (pipe2 buf ,O_CLOEXEC) 0)
             -1
             (let ([r (foreign-ref 'int buf 0)] [w (foreign-ref 'int buf 4)])
               (let ([p (fork)])
                 (cond
                   [(< p 0) (close r) (close w) -1]
                   [(= p 0)
                    ;; the intermediate
                    (let ([q (fork)])
                      (cond
                        [(= q 0)
                         (close r)
                         (close w)
                         (setpgid 0 0)
                         0]
                        [else
                         (when (> q 0) (setpgid q q))
                         (foreign-set! 'int buf 8 q)
                         (write w (+ buf 8) 4)
                         (exit 0)
                         -1]))]
                   [else
                    (close w)
                    (foreign-set! 'int buf 8 -1)
                    (again (lambda () (read r (+ buf 8) 4)))
                    (close r)
                    (again (lambda () (waitpid p 0 0)))
                    (foreign-ref 'int buf 8)]))))))))))

;; await-new-parent! : natural real -> boolean
;; In a worker just forked: waits until the manager (parent) is its parent (its
;; intermediate has exited), for at most timeout seconds; #f when that did not happen.
(define (await-new-parent! parent timeout)
  (define deadline (+ (current-inexact-monotonic-milliseconds) (* 1000 timeout)))
  (let loop ()
    (cond
      [(= (c-getppid) parent) #t]
      [(> (current-inexact-monotonic-milliseconds) deadline) #f]
      [else (sleep 0.001) (loop)])))

;; make-heap-static! : -> void
;; A full collection, then every live object moves to the static generation, which is
;; never collected again: its pages stay shared with the processes forked afterwards
;; (with a plain fork, a child's first major collection copies the old generations and
;; they become private). What is garbage at that moment would stay: collect first.
;; Where Chez Scheme's collect refuses, the heap stays as it is (forks work, their pages
;; are shared until a child's major collection copies them), with one line.
(define (make-heap-static!)
  (collect-garbage 'major)
  (collect-garbage 'major)
  (void (assumption-holds? "Chez Scheme's collect into the static generation"
                           (λ () (vm-eval '(collect (collect-maximum-generation) 'static)) #t)
                           "the workers share less of the loaded image")))

;; fork-hazards : (listof fd) -> (listof string)
;; What this process holds that a fork cannot share, each as a phrase: descriptors other
;; than the standard three, the runtime's own (as probed) and those in `ours` (open files, sockets,
;; pipes: a database connection made at load), OS threads besides this one (places,
;; futures, the runtime's SIGCHLD thread once a subprocess ran), and child processes.
(define (fork-hazards ours)
  (define fds (open-descriptors))
  (define known (append '(0 1 2) ours (if (pair? runtime-descriptors) runtime-descriptors '())))
  (define open
    (for/list ([d (in-list fds)]
               #:unless (memv (car d) known)
               #:when (cdr d))
      (format "descriptor ~a open on ~a" (car d) (cdr d))))
  (define threads (sub1 (length (directory-list "/proc/self/task"))))
  (define children (child-pids))
  (append open
          (if (positive? threads)
              (list (format "~a OS thread~a besides the main one (places, futures, or the runtime's own after a subprocess)"
                            threads (if (= threads 1) "" "s")))
              '())
          (for/list ([p (in-list children)]) (format "child process ~a" p))))

;; child-pids : -> (listof natural)
(define (child-pids)
  (with-handlers ([exn:fail? (λ (e) '())])
    (for*/list ([t (in-list (directory-list "/proc/self/task"))]
                [p (in-list (call-with-input-file (build-path "/proc/self/task" t "children")
                              (λ (in) (let loop () (define x (read in)) (if (eof-object? x) '() (cons x (loop)))))))])
      p)))

;; move-descriptor! : fd fd -> void ; from takes to's number (dup2), and from is closed
(define (move-descriptor! from to)
  (when (negative? (c-dup2 from to)) (error 'fork "dup2 failed (errno ~a)" (saved-errno)))
  (c-close from)
  (void))

;; reseed-random! : -> void
;; The current pseudo-random generator (web-server's continuation salts, apps' ids) from
;; the kernel's entropy: two workers forked from one image never draw the same sequence.
(define (reseed-random!)
  (define b (call-with-input-file "/dev/urandom" (λ (in) (read-bytes 48 in))))
  (define (part i limit) (add1 (modulo (integer-bytes->integer b #f #f (* 8 i) (* 8 (add1 i))) (sub1 limit))))
  (vector->pseudo-random-generator!
   (current-pseudo-random-generator)
   (vector (part 0 4294967087) (part 1 4294967087) (part 2 4294967087)
           (part 3 4294944443) (part 4 4294944443) (part 5 4294944443))))

;; set-process-name! : string -> void ; the name ps -o comm and top show (15 bytes)
(define (set-process-name! name)
  (define b (bytes-append (let ([s (string->bytes/utf-8 name)]) (subbytes s 0 (min 15 (bytes-length s)))) #"\0"))
  (define p (malloc (bytes-length b) 'raw))
  (memcpy p b (bytes-length b))
  (c-prctl PR_SET_NAME p 0 0 0)
  (free p))
