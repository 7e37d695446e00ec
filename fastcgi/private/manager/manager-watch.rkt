#lang racket/base
;; The manager's tick (manager.rkt): what it watches in its workers between their reports.
;; A draining worker past its deadline and a worker that does not start in time are
;; killed; a ready worker that falls silent is late, then killed (the watchdog); resident
;; memory past --max-memory recycles a worker, past the hard ceiling stops it at once; and
;; the pool is maintained and its status published. And the orphans that come to the
;; manager as the subreaper of its descendants (or as PID 1) are reaped.
(require "../os/child-process.rkt"
         "../util/clock.rkt"
         "../worker/config.rkt"
         "../util/limits.rkt"
         "../util/log.rkt"
         "manager-loader.rkt"
         (only-in "manager-reports.rkt" expire-strangers!)
         (only-in "manager-stacks.rkt" stacks-deadlines!)
         (only-in "manager-canary.rkt" canary-tick!)
         "lifecycle.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" watch)
         "manager-status.rkt"
         "manager-workers.rkt"
         "manager-forks.rkt"
         "../os/signals.rkt")
(provide tick!)

;; The watchdog (watch-beats!). A ready worker reports every second (its heartbeat); one
;; that falls silent shows late past late-ms. With a request timeout, it is killed and
;; replaced once its oldest request (as its last stat line said) has run past the request
;; timeout plus outside-grace seconds, or once it has been silent that long (it froze
;; before it could report the request: its last heartbeat came before the request began);
;; either way its requests are settled within the request timeout plus outside-grace
;; seconds and a tick. A worker that works reports every second, and answers a request
;; past its timeout itself; the silence that outside-grace must outlast is a collection's:
;; a major collection of a servlet worker holding 1.4 GiB took 1.5 s here (bench/
;; OPTIMISATIONS.md), and the request rule needs late-ms of silence too. With no request
;; timeout, a silent worker is killed past default-watchdog plus watchdog-grace seconds.
(define late-ms 3000.)
(define outside-grace 4)
(define watchdog-grace 10)
(define default-watchdog 60)

;; reap-orphans-of! : manager -> void
;; A program a handler starts that daemonizes (a report job, a tool that forks) leaves a
;; process whose parent exits: it becomes the manager's child, and a zombie once it ends
;; unless the manager reaps it. Its own workers and loaders it leaves to their owners.
(define (reap-orphans-of! m)
  (define loader-pids (map loader-pid (running-loaders m)))
  (define n (reap-orphans! (λ (pid) (or (hash-has-key? (manager-workers m) pid)
                                         (memv pid loader-pids)))))
  (when (positive? n)
    (total-add! m 'orphans_reaped n)
    (log-fastcgi-debug "reaped ~a exited process~a left behind by a handler's program"
                       n (if (= n 1) "" "es"))))

;; tick! : manager -> void
(define (tick! m)
  (define now (now-ms))
  (define start-timeout (manager-cfg m serve-config-start-timeout))
  (for ([w (in-list (live-workers m))])
    (cond
      [(and (eq? (worker-state w) 'draining) (> now (worker-drain-deadline w)))
       (log-fastcgi-warning "worker ~a did not stop in time: killing it" (worker-pid w))
       (send-signal! (worker-pid w) SIGKILL)
       (worker-killed! w now)]
      [(and (eq? (worker-state w) 'starting) (> (- now (worker-started-ms w)) (* 1000 start-timeout))
            (not (worker-failure w)))
       (log-fastcgi-error "worker ~a not ready after ~a s: killing it" (worker-pid w) start-timeout)
       (worker-failed! w (format "not ready after ~a s (--start-timeout)" start-timeout))
       (send-signal! (worker-pid w) SIGKILL)]))
  (watch-beats! m now)
  (watch-loaders! m now)
  (fork-deadlines! m now)
  (expire-strangers! m now)
  (stacks-deadlines! m now)
  (canary-tick! m now)
  ;; a worker started after the last crash has lasted: workers start again
  (when (and (positive? (manager-failures m))
             (for/or ([w (in-list (live-workers m))])
               (and (> (worker-started-ms w) (manager-last-failure-ms m)) (worker-ready-ms w)
                    (> (- now (worker-started-ms w)) crash-window-ms))))
    (start-failures-over! m))
  (watch-memory! m now)
  (reap-orphans-of! m)
  (define active-now (for/sum ([w (in-list (live-workers m))]) (if (positive? (worker-active w)) 1 0)))
  (set-manager-max-active! m (max (manager-max-active m) active-now))
  (maintain! m)
  (publish! m now))

;; watch-beats! : manager flonum -> void
;; A ready worker that falls silent is frozen, stopped (SIGSTOP), or its whole VM is
;; held by a foreign call: late on the status, then killed (SIGKILL: it can take no
;; other signal) and replaced at once. The connections it holds fail with it; those
;; still in the listen queue go to the other workers and its replacement.
(define (watch-beats! m now)
  (define request-timeout (limits-request-timeout (manager-cfg m serve-config-limits)))
  (define watchdog-ms (* 1000 (if request-timeout
                                  (+ request-timeout outside-grace)
                                  (+ default-watchdog watchdog-grace))))
  (for ([w (in-list (live-workers m))]
        #:when (and (worker-ready-ms w) (not (worker-reports-done? w))
                    (not (eq? (worker-late w) 'killed))))
    (define silent (- now (worker-heard-ms w)))
    (define oldest (worker-oldest-ms w))
    (define overdue? (and request-timeout oldest (> silent late-ms) (> (- now oldest) watchdog-ms)))
    (cond
      [(or (> silent watchdog-ms) overdue?)
       (log-fastcgi-error "worker ~a sent nothing for ~a s (frozen, stopped, or blocked in a foreign call): killing it~a"
                          (worker-pid w) (exact-floor (/ silent 1000))
                          (if oldest
                              (format " (its oldest request has run ~a s; --request-timeout ~a)"
                                      (exact-floor (/ (- now oldest) 1000)) request-timeout)
                              ""))
       (set-worker-late! w 'killed)
       (total-add! m 'unresponsive_kills 1)
       (worker-move! w 'drain #:deadline (+ now 5000))
       (send-signal! (worker-pid w) SIGKILL)
       (maintain! m)]
      [(> silent late-ms)
       (unless (worker-late w)
         (log-fastcgi-warning "worker ~a is late: nothing from it for ~a s" (worker-pid w)
                              (exact-floor (/ silent 1000)))
         (set-worker-late! w #t))]
      [else (set-worker-late! w #f)])))

;; watch-memory! : manager flonum -> void
;; With a memory limit, memory is read at every tick (a runaway grows fast), else once a
;; second, for the status. The limits apply to a worker's private memory, what it costs
;; alone: its resident memory less what it shares (a forked worker shares its loader's
;; image). Resident memory is cheap to read (/proc/PID/status); the shared part is not
;; (/proc/PID/smaps_rollup walks every page: milliseconds for a servlet worker), so it is
;; read every shared-every-ms. Pages shared at the fork only ever become private, so
;; resident memory less the shared part last read never overstates private memory: a
;; limit passed by that reading is passed (manager-state.rkt's read-memory!).
(define (watch-memory! m now)
  (define cfg (manager-config m))
  (define max-memory (serve-config-max-memory cfg))
  (define ceiling (config-memory-ceiling cfg))
  (when (or ceiling (> (- now (manager-last-memory-ms m)) 1000))
    (set-manager-last-memory-ms! m now)
    (for ([ld (in-hash-values (manager-loaders m))])
      (set-loader-rss! ld (process-rss (loader-pid ld))))
    (for ([w (in-list (live-workers m))])
      (read-memory! w now)
      (define private (worker-private w))
      (cond
        [(and ceiling private (> private ceiling) (memq (worker-state w) '(ready draining)))
         (cut! m w (format "memory ~a MiB over the hard ceiling of ~a MiB (~a)"
                           (quotient private 1048576) (quotient ceiling 1048576)
                           (if (serve-config-max-memory-hard cfg) "--max-memory-hard" "2 x --max-memory")))]
        [(and max-memory private (> private max-memory) (eq? (worker-state w) 'ready))
         (recycle! m w (format "memory ~a MiB over --max-memory ~a MiB"
                               (quotient private 1048576) (quotient max-memory 1048576)))]))))

