#lang racket/base
;; One timer per server: every deadline and periodic task of a server process runs from
;; this one thread, on the monotonic clock (clock.rkt). Tasks are few and fixed (the sweep
;; of connection and request deadlines, the inline handlers' take-over watch, the
;; queue-delay estimate) plus one-shot deadlines (a refused connection's bound); a
;; connection's own deadlines are fields the sweep reads, so setting one costs a store,
;; not a registration.
;;
;; A periodic task runs every period ms. One made with #:quiet-limit sleeps once its
;; action has found nothing to do (returned #f) that many times in a row, provided
;; #:sleep registers the timer's wake semaphore with whoever will have work for it (the
;; server, at its next request: server-on-next-request!); timer-wake! (that semaphore)
;; wakes it. A timer whose only pending tasks are far apart lets Racket's scheduler wait
;; without polling.
(require ffi/unsafe/atomic
         "../util/clock.rkt"
         "../util/log.rkt")
(provide make-timer
         timer?
         timer-every!
         timer-at!
         timer-cancel!
         timer-start!
         timer-stop!
         timer-wake!
         next-due
         due-tasks
         task?
         (rename-out [make-task* make-task]))

;; period: ms, or #f for a one-shot; action: -> any (a quiet task's: -> boolean, busy?);
;; due: the monotonic ms it runs next (+inf.0: asleep or cancelled).
(struct task (period action [due #:mutable] quiet-limit [quiet #:mutable] sleep))

;; make-task* : real (-> any) real -> task ; a bare task, for the table tests
(define (make-task* due [period #f] [action void])
  (task period action due #f 0 #f))

;; tasks: list, changed in atomic mode (others add one-shots); wake: posted to make the
;; timer thread look again (a new earlier task, a sleeping task's work came).
(struct timer ([tasks #:mutable] [thread #:mutable] wake))

(define (make-timer) (timer '() #f (make-semaphore 0)))

;; next-due : (listof task) -> real ; the earliest due time, +inf.0 with none
(define (next-due tasks)
  (for/fold ([m +inf.0]) ([t (in-list tasks)]) (min m (task-due t))))

;; due-tasks : (listof task) real -> (listof task) ; those due at now, in order
(define (due-tasks tasks now)
  (for/list ([t (in-list tasks)] #:when (<= (task-due t) now)) t))

(define (add-task! tm t)
  (start-atomic)
  (set-timer-tasks! tm (cons t (timer-tasks tm)))
  (end-atomic)
  (semaphore-post (timer-wake tm)))

;; timer-every! : timer ms (-> any) [#:quiet-limit #:sleep] -> void
(define (timer-every! tm period action #:quiet-limit [limit #f] #:sleep [sleep (λ (s) #f)])
  (add-task! tm (task period action (+ (now-ms) period) limit 0 sleep)))

;; timer-at! : timer ms (-> any) -> task ; action once, at the monotonic time ms
(define (timer-at! tm ms action)
  (define t (task #f action ms #f 0 #f))
  (add-task! tm t)
  t)

;; timer-cancel! : timer task -> void
(define (timer-cancel! tm t)
  (start-atomic)
  (set-task-due! t +inf.0)
  (set-timer-tasks! tm (remq t (timer-tasks tm)))
  (end-atomic))

;; timer-wake! : timer -> void ; sleeping quiet tasks run again from now
(define (timer-wake! tm) (semaphore-post (timer-wake tm)))

;; timer-start! : timer -> void
(define (timer-start! tm)
  (set-timer-thread! tm (thread (λ () (run tm)))))

;; timer-stop! : timer -> void
(define (timer-stop! tm)
  (when (timer-thread tm) (kill-thread (timer-thread tm))))

;; run : timer -> none
(define (run tm)
  (let loop ()
    (define now (now-ms))
    (for ([t (in-list (due-tasks (timer-tasks tm) now))])
      (run-task! tm t now))
    (define next (next-due (timer-tasks tm)))
    ;; sync/timeout, not an alarm-evt beside the semaphore: a thread blocked on a
    ;; semaphore with a timeout is parked by Racket's scheduler, where one syncing on a
    ;; choice with an alarm costs every other thread's turns something (bench/OPTIMISATIONS.md,
    ;; the one timer); sync/timeout's timeout is not moved by a wall-clock step
    (when (sync/timeout (and (< next +inf.0) (max 0.0 (/ (- next (now-ms)) 1000.0)))
                        (timer-wake tm))
      (wake-sleepers! tm))
    (loop)))

;; run-task! : timer task real -> void
(define (run-task! tm t now)
  (define period (task-period t))
  (cond
    [(not period)
     (timer-cancel! tm t)
     (run-action t)]
    [else
     ;; the next run from now, not from the due time: a late run does not bunch up
     (set-task-due! t (+ now period))
     (define busy? (run-action t))
     (when (task-quiet-limit t)
       (set-task-quiet! t (if busy? 0 (add1 (task-quiet t))))
       (when (and (>= (task-quiet t) (task-quiet-limit t)) ((task-sleep t) (timer-wake tm)))
         (set-task-due! t +inf.0)))]))

;; run-action : task -> any
;; A task that raises is logged and runs again at its next time: one failing task must
;; not stop the timer, which every other deadline of the server needs.
(define (run-action t)
  (with-handlers ([exn:fail? (λ (e)
                               (log-fastcgi-error "timer task failed: ~a" (log-escape (exn-message e)))
                               #t)])
    ((task-action t))))

;; wake-sleepers! : timer -> void ; the wake semaphore was posted
(define (wake-sleepers! tm)
  (define now (now-ms))
  (for ([t (in-list (timer-tasks tm))]
        #:when (and (task-period t) (eqv? (task-due t) +inf.0)))
    (set-task-quiet! t 0)
    (set-task-due! t (+ now (task-period t)))))
