#lang racket/base
;; The runtime's own descriptors, which a forked child must not share with its forker
;; (fork.rkt): Racket CS's rktio opens, at start, an epoll set (its long-term poll set)
;; and a wake-up pipe (one process holding both ends). Racket does not document them, so
;; before the app loads they are found and probed (runtime-descriptors-probe): exactly one
;; epoll descriptor, in which the runtime registers a descriptor it is asked to watch; and
;; exactly one pipe of which this process holds a read end and a write end, from which
;; the runtime takes a byte written to it. Where that does not hold, the process does not
;; fork (the caller's fallback); where it does, a forked child puts fresh objects under
;; those numbers (fresh-runtime-descriptors!).
(require ffi/unsafe
         ffi/unsafe/port
         racket/list
         (only-in "ffi.rkt" define-libc fd-pair))
(provide open-descriptors
         runtime-descriptors-probe
         probe-runtime-descriptors!
         runtime-descriptors
         fresh-runtime-descriptors!)

(define F_GETFD 1)
(define F_SETFD 2)
(define F_GETFL 3)
(define F_SETFL 4)
(define O_ACCMODE 3)
(define O_RDONLY 0)
(define O_WRONLY 1)
(define O_NONBLOCK #o4000)
(define O_CLOEXEC #o2000000)
(define FIONREAD #x541B)

(define-libc c-epoll-create1 "epoll_create1" _int -> _int)
(define-libc c-pipe2 "pipe2" _bytes _int -> _int)
(define-libc c-dup2 "dup2" _int _int -> _int)
(define-libc c-close "close" _int -> _int)
(define-libc c-fcntl "fcntl" #:varargs-after 2 _int _int _int -> _int)
(define-libc c-write "write" _int _bytes _size -> _ssize)
(define-libc c-read "read" _int _bytes _size -> _ssize)
(define-libc c-fionread "ioctl" _int (_ulong = FIONREAD) (n : (_ptr o _int)) -> (r : _int) -> (if (< r 0) r n))

;; open-descriptors : -> (listof (cons fd (or/c string #f))) ; with what each refers to
(define (open-descriptors)
  (define fds (sort (for*/list ([p (in-list (directory-list "/proc/self/fd"))]
                                [n (in-value (string->number (path->string p)))]
                                #:when n)
                      n)
                    <))
  ;; (one of them listed the folder and is closed now: it resolves to itself)
  (for/list ([fd (in-list fds)])
    (define link (format "/proc/self/fd/~a" fd))
    (cons fd (with-handlers ([exn:fail? (λ (e) #f)])
               (define to (path->string (resolve-path link)))
               (and (not (equal? to link)) to)))))

;; pipe-pairs : (listof (cons fd string)) -> (listof (list read-fd write-fd))
;; Each pipe of which fds hold exactly one read end and one write end (standard output
;; and error on one pipe are two write ends, not a pair).
(define (pipe-pairs fds)
  (for*/list ([g (in-list (group-by cdr (filter (λ (d) (and (cdr d) (regexp-match? #rx"^pipe:" (cdr d)))) fds)))]
              #:when (= 2 (length g))
              [ends (in-value (map car g))]
              [r (in-value (findf (λ (fd) (= (access-mode fd) O_RDONLY)) ends))]
              [w (in-value (findf (λ (fd) (= (access-mode fd) O_WRONLY)) ends))]
              #:when (and r w))
    (list r w)))

;; access-mode : fd -> integer ; O_RDONLY, O_WRONLY or O_RDWR (-1: not open)
(define (access-mode fd)
  (define fl (c-fcntl fd F_GETFL 0))
  (if (< fl 0) -1 (bitwise-and fl O_ACCMODE)))

;; runtime-descriptors-probe : [(listof (cons fd (or/c string #f)))]
;;                             -> (or/c (list epoll-fd read-fd write-fd) string)
;; The runtime's epoll set and wake-up pipe among fds (this process's open descriptors),
;; or why they cannot be told: the runtime's own must be the only epoll set and the only
;; pipe held at both ends, as they are before the app loads.
(define (runtime-descriptors-probe [fds (open-descriptors)])
  (define epolls (for/list ([d (in-list fds)] #:when (equal? (cdr d) "anon_inode:[eventpoll]")) (car d)))
  (define pairs (pipe-pairs fds))
  (cond
    [(not (= 1 (length epolls)))
     (format "~a epoll descriptors~a, expected 1" (length epolls) (fd-list epolls))]
    [(not (= 1 (length pairs)))
     (format "~a pipes held at both ends~a, expected 1 (the wake-up pipe)" (length pairs)
             (fd-list (map car pairs)))]
    [else
     (define ep (car epolls))
     (define r (first (car pairs)))
     (define w (second (car pairs)))
     (define why (or (not-registered-in ep) (not-taken-from r w)))
     (or why (list ep r w))]))

;; fd-list : (listof fd) -> string ; " (6, 9)", or "" for none
(define (fd-list fds)
  (if (null? fds) "" (format " (~a)" (apply string-append (add-between (map number->string (sort fds <)) ", ")))))

;; not-registered-in : fd -> (or/c #f string)
;; #f when a descriptor the runtime is asked to watch (a fresh pipe's read end, through
;; unsafe-file-descriptor->semaphore) shows in ep's registrations (/proc/self/fdinfo).
(define (not-registered-in ep)
  (define b (make-bytes 8 0))
  (cond
    [(not (zero? (c-pipe2 b (bitwise-ior O_CLOEXEC O_NONBLOCK)))) "cannot make a pipe to probe the epoll set"]
    [else
     (define-values (r w) (fd-pair b))
     (dynamic-wind
      void
      (λ ()
        (unsafe-file-descriptor->semaphore r 'read)
        (define info (with-handlers ([exn:fail? (λ (e) "")])
                       (call-with-input-file (format "/proc/self/fdinfo/~a" ep) (λ (in) (read-string 100000 in)))))
        (and (not (regexp-match? (pregexp (format "(?m:^tfd:\\s+~a\\s)" r)) (if (string? info) info "")))
             (format "the epoll descriptor ~a is not the one the runtime watches descriptors in" ep)))
      (λ ()
        (unsafe-file-descriptor->semaphore r 'remove)
        (c-close r)
        (c-close w)))]))

;; not-taken-from : fd fd -> (or/c #f string)
;; #f when a byte written to w is taken from r by the runtime, as it takes its wake-up
;; bytes, within a second (the runtime takes it at its next sleep, which the loop's own
;; sleeps bring). A byte not taken is read back: the pipe is left as it was.
(define (not-taken-from r w)
  (cond
    [(not (= 1 (c-write w #"w" 1))) (format "cannot write to the pipe's write end ~a" w)]
    [else
     (define deadline (+ (current-inexact-monotonic-milliseconds) 1000))
     (let loop ()
       (define n (c-fionread r))
       (cond
         [(zero? n) #f]
         [(or (negative? n) (> (current-inexact-monotonic-milliseconds) deadline))
          (c-read r (make-bytes 1) 1)
          (format "the pipe (~a, ~a) is not the runtime's wake-up pipe: a byte written to it stays unread" r w)]
         [else (sleep 0.001) (loop)]))]))

;; The runtime's descriptors as probed (probe-runtime-descriptors!): (list epoll read write),
;; the reason they could not be told, or #f before the probe.
(define runtime-descriptors #f)

;; probe-runtime-descriptors! : -> (or/c #t string)
;; Probes this process's runtime descriptors, before the app opens any, and keeps them
;; for fresh-runtime-descriptors!: #t, or the reason (the process must not fork).
(define (probe-runtime-descriptors!)
  (set! runtime-descriptors (runtime-descriptors-probe))
  (if (string? runtime-descriptors) runtime-descriptors #t))

;; fresh-runtime-descriptors! : -> void
;; In a forked child: a new epoll set and a new wake-up pipe under the numbers of the
;; probed ones, shared with the forker and the siblings, with the same descriptor flags.
(define (fresh-runtime-descriptors!)
  (unless (pair? runtime-descriptors)
    (error 'fork "the runtime's descriptors were not probed: ~a" runtime-descriptors))
  (define-values (ep r w) (apply values runtime-descriptors))
  (onto! (c-epoll-create1 O_CLOEXEC) ep)
  (define b (make-bytes 8 0))
  (unless (zero? (c-pipe2 b O_CLOEXEC))
    (error 'fork "pipe2 failed (errno ~a)" (saved-errno)))
  (define-values (new-r new-w) (fd-pair b))
  (onto! new-r r)
  (onto! new-w w))

;; onto! : fd fd -> void ; new takes old's number and flags; new's own number is closed
(define (onto! new old)
  (when (negative? new) (error 'fork "cannot make a fresh descriptor for ~a (errno ~a)" old (saved-errno)))
  (define fd-flags (c-fcntl old F_GETFD 0))
  (define fl-flags (c-fcntl old F_GETFL 0))
  (when (negative? (c-dup2 new old)) (error 'fork "dup2 failed (errno ~a)" (saved-errno)))
  (c-close new)
  (c-fcntl old F_SETFD fd-flags)
  (c-fcntl old F_SETFL fl-flags)
  (void))
