#lang racket/base
;; The answers to the forks the manager asked of a loader or of the base (manager-workers.rkt's
;; ask-fork!), and their absence: a forked process is tracked from its answer on; one
;; that comes too late, or is no longer wanted, is stopped; what a stuck or dead forker
;; was asked starts as a process of its own. The manager never waits for an answer.
(require "../os/child-process.rkt"
         "../util/clock.rkt"
         "../util/log.rkt"
         "lifecycle.rkt"
         "manager-state.rkt"
         "manager-workers.rkt"
         "../os/signals.rkt")
(provide fork-reply!
         fork-deadlines!
         forks-of-exited!)

;; fork-reply! : manager loader (cons symbol hash) -> (or/c natural #f)
;; A forker's answer (forked ID PID, forked-loader GEN PID). The process it forked is
;; tracked from now: a worker is added, a loader gets its process; its pid is returned
;; (the messages it sent first are the caller's to replay). One that is no longer wanted
;; (a stop, or its loader replaced meanwhile) is stopped at once; one whose ask passed
;; its deadline (fork-deadlines! started another in its place) is killed. A failed fork
;; (PID -1): what was asked starts as a process of its own.
(define (fork-reply! m forker msg)
  (define n (hash-ref (cdr msg) (if (eq? (car msg) 'forked) 'id 'gen)))
  (define pid (hash-ref (cdr msg) 'pid))
  (define key (cons (car msg) n))
  (define a (hash-ref (manager-forks m) key #f))
  (cond
    [(not (and a (eq? (fork-ask-forker a) forker)))
     (when (positive? pid)
       (log-fastcgi-warning "~a answered a fork after its deadline (~a ~a): stopping process ~a"
                            (forker-name m forker) (car msg) n pid)
       (total-add! m 'untracked_stopped 1)
       (send-signal! pid SIGKILL))
     #f]
    [else
     (hash-remove! (manager-forks m) key)
     (cond
       [(positive? pid) (adopt-forked! m a (adopt-child pid)) pid]
       [else
        (log-fastcgi-error "~a could not fork: starting ~a as a process of its own"
                           (forker-name m forker) (if (eq? (fork-ask-kind a) 'worker) "the worker" "the loader"))
        (instead-of-fork! m a)
        #f])]))

;; adopt-forked! : manager fork-ask child-process -> void
(define (adopt-forked! m a sp)
  (case (fork-ask-kind a)
    [(worker)
     (define w (add-worker! m (make-worker #:id (fork-ask-n a) #:process sp #:generation (fork-ask-gen a)
                                           #:now (now-ms) #:forked? #t)))
     (unless (wanted-generation? m (fork-ask-gen a)) (drain! m w "its generation no longer serves"))]
    [else
     (define ld (fork-ask-ld a))
     (cond
       [(and (eq? (generation-loader m (fork-ask-gen a)) ld) (eq? (loader-state ld) 'forking)
             (not (manager-stopping? m)))
        (loader-process-started! m ld sp)]
       [else
        (log-fastcgi-debug "loader ~a of generation ~a is no longer wanted: stopping it" (child-pid sp) (fork-ask-gen a))
        (send-signal! (child-pid sp) SIGTERM)])]))

;; instead-of-fork! : manager fork-ask -> void ; what was asked, as a process of its own
(define (instead-of-fork! m a)
  (case (fork-ask-kind a)
    [(worker) (when (wanted-generation? m (fork-ask-gen a)) (spawn-process! m (fork-ask-gen a)))]
    [else
     (define ld (fork-ask-ld a))
     (when (and (eq? (generation-loader m (fork-ask-gen a)) ld) (eq? (loader-state ld) 'forking)
                (not (manager-stopping? m)))
       (start-loader-as-process! m ld))]))

;; fork-deadlines! : manager flonum -> void
;; Asks not answered by their deadline: the forker is stuck (stopped, or lost in a long
;; collection); it is killed (the manager replaces it when it sees it exit) and what it
;; was asked for starts as a process of its own. An answer that comes after all is
;; fork-reply!'s: its process is killed.
(define (fork-deadlines! m now)
  (for ([(key a) (in-hash (hash-copy (manager-forks m)))]
        #:when (> now (fork-ask-deadline-ms a)))
    (hash-remove! (manager-forks m) key)
    (define forker (fork-ask-forker a))
    (log-fastcgi-error "~a did not answer within ~a s: starting ~a as a process of its own"
                       (forker-name m forker) fork-timeout
                       (if (eq? (fork-ask-kind a) 'worker) "the worker" "the loader"))
    (when (loader-move-if! forker 'die)
      (send-signal! (loader-pid forker) SIGKILL))
    (instead-of-fork! m a)))

;; forks-of-exited! : manager loader -> void
;; A forker exited: what it was asked and did not answer starts as a process of its own.
(define (forks-of-exited! m forker)
  (for ([(key a) (in-hash (hash-copy (manager-forks m)))]
        #:when (eq? (fork-ask-forker a) forker))
    (hash-remove! (manager-forks m) key)
    (instead-of-fork! m a)))

;; forker-name : manager loader -> string
(define (forker-name m forker)
  (if (eq? forker (manager-base m))
      (format "the base ~a" (loader-pid forker))
      (format "loader ~a" (loader-pid forker))))
