#lang racket/base
;; The process manager's policy, pure: given the pool, how many workers to start and which
;; to stop. The manager applies the decision; nothing here touches a process.
;; - static: always `workers` processes.
;; - dynamic: keep between min-spare and max-spare idle workers, at most max-workers;
;;   one idle worker past max-spare is stopped per decision (4 per second at most).
;; - ondemand: one is started when a connection waits and no worker is idle (the manager
;;   watches the listening socket), at most max-workers; a worker idle for idle-timeout
;;   seconds is stopped. One starts at start and at each reload all the same, so that the
;;   code is known to load (fail fast, a truthful reload); it stops when idle like any.
(require racket/list
         "../worker/config.rkt")
(provide (struct-out pm-plan)
         (struct-out pm-worker)
         (struct-out pm-decision)
         make-pm-plan
         pm-initial-count
         pm-reload-count
         pm-wants-pending?
         pm-decide
         pm-describe)

(struct pm-plan (kind workers min-spare max-spare max-workers idle-timeout) #:transparent)
;; state: 'starting or 'ready; active: requests in flight; last-busy-ms: when last seen busy
(struct pm-worker (pid state active last-busy-ms) #:transparent)
;; start: how many to start; stop: pids to stop; why: for the log; max-reached?: the pool
;; wanted more than max-workers
(struct pm-decision (start stop why max-reached?) #:transparent)

;; make-pm-plan : serve-config -> pm-plan ; the plan of a configuration (its defaults are
;; config.rkt's)
(define (make-pm-plan cfg)
  (pm-plan (serve-config-pm cfg) (serve-config-workers cfg) (serve-config-min-spare cfg)
           (serve-config-max-spare cfg) (serve-config-max-workers cfg) (serve-config-idle-timeout cfg)))

;; pm-describe : pm-plan -> string
(define (pm-describe p)
  (case (pm-plan-kind p)
    [(static) (format "pm static, ~a worker~a" (pm-plan-workers p) (if (= 1 (pm-plan-workers p)) "" "s"))]
    [(dynamic) (format "pm dynamic, ~a to ~a idle workers, at most ~a"
                       (pm-plan-min-spare p) (pm-plan-max-spare p) (pm-plan-max-workers p))]
    [else (format "pm ondemand, at most ~a workers, idle ones stop after ~a s"
                  (pm-plan-max-workers p) (pm-plan-idle-timeout p))]))

;; pm-initial-count : pm-plan -> natural ; at least 1
(define (pm-initial-count p)
  (case (pm-plan-kind p)
    [(static) (pm-plan-workers p)]
    [(dynamic) (pm-plan-min-spare p)]
    [else 1]))

;; pm-reload-count : pm-plan natural -> natural ; size of a reloaded generation, at least 1
(define (pm-reload-count p serving)
  (case (pm-plan-kind p)
    [(static) (pm-plan-workers p)]
    [(dynamic) (max serving (pm-plan-min-spare p))]
    [else (max serving 1)]))

;; pm-wants-pending? : pm-plan -> boolean ; should the manager watch the listening socket
(define (pm-wants-pending? p) (eq? (pm-plan-kind p) 'ondemand))

;; pm-decide : pm-plan (listof pm-worker) flonum -> pm-decision
;; workers: the current generation's workers that are starting or ready and not waiting to
;; be recycled.
(define (pm-decide p workers now)
  (define (idle? w) (and (eq? (pm-worker-state w) 'ready) (zero? (pm-worker-active w))))
  (define total (length workers))
  (case (pm-plan-kind p)
    [(static)
     (pm-decision (max 0 (- (pm-plan-workers p) total)) '() "" #f)]
    [(dynamic)
     (define idle (filter idle? workers))
     (define starting (count (λ (w) (eq? (pm-worker-state w) 'starting)) workers))
     (define spare (+ (length idle) starting))
     (cond
       [(< spare (pm-plan-min-spare p))
        (define want (- (pm-plan-min-spare p) spare))
        (define room (max 0 (- (pm-plan-max-workers p) total)))
        (pm-decision (min want room) '() "" (> want room))]
       [(> (length idle) (pm-plan-max-spare p))
        (define longest (argmin pm-worker-last-busy-ms idle))
        (pm-decision 0 (list (pm-worker-pid longest))
                     (format "more than ~a idle workers" (pm-plan-max-spare p)) #f)]
       [else (pm-decision 0 '() "" #f)])]
    [else
     (define limit (* 1000 (pm-plan-idle-timeout p)))
     (define expired (filter (λ (w) (and (idle? w) (> (- now (pm-worker-last-busy-ms w)) limit))) workers))
     (pm-decision 0 (map pm-worker-pid expired)
                  (format "idle for ~a s" (pm-plan-idle-timeout p)) #f)]))
