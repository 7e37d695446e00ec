#lang racket/base
;; The manager's handle on a worker process, whichever way it started: a Racket
;; subprocess (spawned), or a process forked by a loader (fork.rkt) that became the
;; manager's child when its intermediate exited, since the manager is the subreaper of
;; its descendants. For the latter, an event ready when it exits (a pidfd, Linux 5.3) and
;; its exit status by waitpid, as subprocess-status reports it (the code, or 128 + the
;; signal).
(require ffi/unsafe
         ffi/unsafe/port
         (only-in "ffi.rkt" c-close define-libc)
         (only-in "signals.rkt" signal-name))
(provide become-subreaper!
         reap-orphans!
         adopt-child
         child-pid
         child-status
         describe-exit-status
         process-rss
         process-shared)

(define-libc c-prctl "prctl" _int _ulong _ulong _ulong _ulong -> _int)
(define-libc c-syscall-pidfd-open "syscall" _long _int _uint -> _int)
(define-libc c-waitpid "waitpid" _int _bytes _int -> _int)
(define-libc c-waitid "waitid" _int _int _bytes _int -> _int)

(define PR_SET_CHILD_SUBREAPER 36)
(define SYS_pidfd_open 434)
(define WNOHANG 1)
(define ECHILD 10)
(define P_ALL 0)
(define WEXITED 4)
(define WNOWAIT #x01000000)
(define siginfo-size 128)
(define si-pid-offset 16)         ; siginfo_t's si_pid (x86_64: after signo, errno, code, pad)

;; become-subreaper! : -> boolean
;; Orphaned descendants (forked workers whose intermediate exited) become this process's
;; children. #f when the kernel refused.
(define (become-subreaper!)
  (zero? (c-prctl PR_SET_CHILD_SUBREAPER 1 0 0 0)))

;; reap-orphans! : (natural -> boolean) -> natural
;; Reaps the children that have exited and that ours? does not claim: processes that a
;; handler's program left behind when it daemonized, re-parented to this process as the
;; subreaper of its descendants, or as PID 1 of a PID namespace. Returns how many. A child
;; is looked at first without being reaped (WNOWAIT): one that ours? claims is left for
;; its owner (Racket's subprocess, adopt-child's child-status) to reap with its status,
;; and the rest wait for the next call, since waitid shows one child at a time.
(define (reap-orphans! ours?)
  (define info (make-bytes siginfo-size 0))
  (let loop ([n 0])
    (bytes-fill! info 0)
    (define r (c-waitid P_ALL 0 info (bitwise-ior WEXITED WNOHANG WNOWAIT)))
    (define pid (integer-bytes->integer info #t #f si-pid-offset (+ si-pid-offset 4)))
    (cond
      [(or (negative? r) (zero? pid) (ours? pid)) n]
      [(= pid (c-waitpid pid (make-bytes 4 0) WNOHANG)) (loop (add1 n))]
      [else n])))

;; An adopted (forked) child: its pid, its pidfd (or #f when it could not be opened: the
;; process had already gone), its exit status once collected (#f before), and the event
;; that is ready once it exited (a child process is such an event, as a subprocess is).
(struct adopted (pid fd [status #:mutable] evt)
  #:property prop:evt (λ (a) (adopted-evt a)))

;; adopt-child : natural -> adopted
(define (adopt-child pid)
  (define fd (c-syscall-pidfd-open SYS_pidfd_open pid 0))
  (adopted pid (and (>= fd 0) fd) #f (if (>= fd 0) (unsafe-fd->evt fd 'read) always-evt)))

;; child-pid : child-process -> natural
(define (child-pid p) (if (subprocess? p) (subprocess-pid p) (adopted-pid p)))

;; child-status : child-process -> (or/c 'running natural)
;; subprocess-status's answer. An adopted child is reaped here (once); one whose status
;; is gone (reaped by another) reads as 255.
(define (child-status p)
  (cond
    [(subprocess? p) (subprocess-status p)]
    [(adopted-status p) (adopted-status p)]
    [else
     (define buf (make-bytes 4 0))
     (define r (c-waitpid (adopted-pid p) buf WNOHANG))
     (cond
       [(zero? r) 'running]
       [(and (negative? r) (not (= (saved-errno) ECHILD))) 'running]
       [else
        (define st (if (negative? r) (* 255 256) (integer-bytes->integer buf #t #f)))
        (define code (if (zero? (bitwise-and st #x7f))
                         (bitwise-and (arithmetic-shift st -8) #xff)
                         (+ 128 (bitwise-and st #x7f))))
        (set-adopted-status! p code)
        (when (adopted-fd p)
          (unsafe-fd->evt (adopted-fd p) 'remove)
          (c-close (adopted-fd p)))
        code])]))

;; describe-exit-status : any -> string ; a child-status answer for a log line
(define (describe-exit-status st)
  (cond
    [(not (exact-integer? st)) (format "~a" st)]
    [(> st 128) (format "killed by ~a" (signal-name (- st 128)))]
    [else (format "exit status ~a" st)]))

;; process-rss : natural -> (or/c natural #f) ; resident memory in bytes, from /proc
(define (process-rss pid)
  (proc-kb (format "/proc/~a/status" pid) #rx"VmRSS:[ \t]*([0-9]+) kB"))

;; process-shared : natural -> (or/c natural #f)
;; Resident memory shared with other processes (a forked worker's loaded image). Costly:
;; the kernel walks every page (milliseconds for a servlet worker).
(define (process-shared pid)
  (define f (format "/proc/~a/smaps_rollup" pid))
  (define clean (proc-kb f #rx"Shared_Clean:[ \t]*([0-9]+) kB"))
  (define dirty (proc-kb f #rx"Shared_Dirty:[ \t]*([0-9]+) kB"))
  (and clean dirty (+ clean dirty)))

;; proc-kb : path regexp -> (or/c natural #f) ; a "N kB" figure of a /proc file, in bytes
(define (proc-kb file rx)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define m (call-with-input-file file (λ (in) (regexp-match rx in))))
    (and m (* 1024 (string->number (bytes->string/latin-1 (cadr m)))))))
