#lang racket/base
;; The process manager's policy (fastcgi/private/manager/pm.rkt), by tables and without processes:
;; each row is a pool (the plan, its workers, the time) and what pm.rkt decides for it.
;; The manager that applies the decisions is tested with real processes in
;; tests/manager-test.rkt.
(require racket/match
         (only-in racket/future processor-count)
         rackunit
         "../fastcgi/private/manager/pm.rkt"
         (only-in "../fastcgi/private/worker/config.rkt" make-serve-config))

;; Workers as the manager describes them to pm-decide: pid, state, requests in flight,
;; when last seen busy (milliseconds).
;; idle : natural natural -> pm-worker ; ready, nothing in flight
(define (idle pid last-busy) (pm-worker pid 'ready 0 last-busy))
;; busy : natural -> pm-worker ; ready, one request in flight, busy long ago
(define (busy pid) (pm-worker pid 'ready 1 0))
;; starting : natural -> pm-worker ; not ready yet
(define (starting pid) (pm-worker pid 'starting 0 0))

;; plans: kind workers min-spare max-spare max-workers idle-timeout
(define static-1 (pm-plan 'static 1 1 1 1 10))
(define static-4 (pm-plan 'static 4 1 4 4 10))
(define dynamic-2-3-5 (pm-plan 'dynamic 2 2 3 5 10))
(define ondemand-4 (pm-plan 'ondemand 2 1 2 4 10))

(test-case "make-pm-plan: a configuration -> the plan, with its defaults"
  (for ([row (in-list
              (list
               (list (make-serve-config #:workers 1) (pm-plan 'static 1 1 1 1 10))
               ;; the default pool is a worker per processor
               (let ([n (processor-count)]) (list (make-serve-config) (pm-plan 'static n 1 n n 10)))
               (list (make-serve-config #:workers 4) (pm-plan 'static 4 1 4 4 10))
               (list (make-serve-config #:pm 'dynamic #:workers 3) (pm-plan 'dynamic 3 1 3 6 10))
               (list (make-serve-config #:pm 'ondemand #:workers 2 #:idle-timeout 5) (pm-plan 'ondemand 2 1 2 4 5))
               (list (make-serve-config #:pm 'dynamic #:workers 2 #:min-spare 2 #:max-spare 3 #:max-workers 5 #:idle-timeout 7)
                     (pm-plan 'dynamic 2 2 3 5 7))
               ;; no workers asked for: one idle worker may still be kept
               (list (make-serve-config #:pm 'dynamic #:workers 0) (pm-plan 'dynamic 0 1 1 0 10))))])
    (check-equal? (make-pm-plan (car row)) (cadr row) (format "~s" (car row)))))

(test-case "pm-describe: the plan -> the log's words"
  (for ([row (in-list
              (list
               (list static-1 "pm static, 1 worker")
               (list static-4 "pm static, 4 workers")
               (list dynamic-2-3-5 "pm dynamic, 2 to 3 idle workers, at most 5")
               (list ondemand-4 "pm ondemand, at most 4 workers, idle ones stop after 10 s")))])
    (check-equal? (pm-describe (car row)) (cadr row))))

(test-case "pm-initial-count, pm-wants-pending?: the plan -> workers at start, watch the socket?"
  (for ([row (in-list
              (list
               (list static-1 1 #f)
               (list static-4 4 #f)
               (list dynamic-2-3-5 2 #f)
               ;; ondemand: one at start all the same, so that the code is known to load
               (list ondemand-4 1 #t)))])
    (check-equal? (pm-initial-count (car row)) (cadr row) (pm-describe (car row)))
    (check-equal? (pm-wants-pending? (car row)) (caddr row) (pm-describe (car row)))))

(test-case "pm-reload-count: the plan, workers serving -> the new generation's size"
  (for ([row (in-list
              (list
               (list static-4 2 4)
               (list static-4 6 4)
               (list dynamic-2-3-5 5 5)
               (list dynamic-2-3-5 1 2)
               (list ondemand-4 3 3)
               (list ondemand-4 1 1)
               ;; an idle ondemand pool reloads with one worker: the new code is loaded
               (list ondemand-4 0 1)))])
    (check-equal? (pm-reload-count (car row) (cadr row)) (caddr row)
                  (format "~a, ~a serving" (pm-describe (car row)) (cadr row)))))

;; rows: what, plan, workers, now (ms) -> start, stop, why, max-reached?
(define decide-rows
  (list
   ;; static: make up the count, never stop
   (list "static, none" static-4 '() 0 4 '() "" #f)
   (list "static, one busy one idle" static-4 (list (busy 1) (idle 2 0)) 0 2 '() "" #f)
   (list "static, all there" static-4 (list (busy 1) (busy 2) (idle 3 0) (starting 4)) 0 0 '() "" #f)
   (list "static, more than asked" static-1 (list (busy 1) (idle 2 0)) 0 0 '() "" #f)
   ;; dynamic: spare = idle + starting, kept between min-spare and max-spare
   (list "dynamic, none" dynamic-2-3-5 '() 0 2 '() "" #f)
   (list "dynamic, one starting" dynamic-2-3-5 (list (starting 1)) 0 1 '() "" #f)
   (list "dynamic, one starting one idle" dynamic-2-3-5 (list (starting 1) (idle 2 0)) 0 0 '() "" #f)
   (list "dynamic, three busy: room for the two wanted" dynamic-2-3-5 (for/list ([i 3]) (busy i)) 0 2 '() "" #f)
   (list "dynamic, four busy: room for one" dynamic-2-3-5 (for/list ([i 4]) (busy i)) 0 1 '() "" #t)
   (list "dynamic, five busy: no room" dynamic-2-3-5 (for/list ([i 5]) (busy i)) 0 0 '() "" #t)
   (list "dynamic, three idle, two busy" dynamic-2-3-5
         (list (idle 1 0) (idle 2 0) (idle 3 0) (busy 4) (busy 5)) 0 0 '() "" #f)
   (list "dynamic, four idle: the one idle longest stops" dynamic-2-3-5
         (list (idle 1 300) (idle 2 100) (idle 3 200) (idle 4 400)) 0
         0 '(2) "more than 3 idle workers" #f)
   (list "dynamic, four ready, one of them busy" dynamic-2-3-5
         (list (idle 1 300) (pm-worker 2 'ready 1 100) (idle 3 200) (idle 4 400)) 0 0 '() "" #f)
   ;; ondemand: nothing started here (the listening socket says when); idle past the
   ;; timeout stops
   (list "ondemand, none" ondemand-4 '() 0 0 '() "idle for 10 s" #f)
   (list "ondemand, idle exactly the timeout" ondemand-4 (list (idle 1 0)) 10000 0 '() "idle for 10 s" #f)
   (list "ondemand, idle past the timeout" ondemand-4 (list (idle 1 0)) 10001 0 '(1) "idle for 10 s" #f)
   (list "ondemand, busy or starting since long" ondemand-4 (list (busy 1) (starting 2)) 50000
         0 '() "idle for 10 s" #f)
   (list "ondemand, two expired and one fresh" ondemand-4 (list (idle 1 0) (idle 2 45000) (idle 3 1000)) 50000
         0 '(1 3) "idle for 10 s" #f)))

(test-case "pm-decide: the plan, the workers, the time -> start, stop, why, max reached"
  (for ([row (in-list decide-rows)])
    (match-define (list what plan workers now start stop why max-reached?) row)
    (check-equal? (pm-decide plan workers now) (pm-decision start stop why max-reached?) what)))
