#lang racket/base
;; timer.rkt: the schedule by tables (no processes), then the timer thread itself.
(require rackunit
         fastcgi/private/engine/timer
         (only-in fastcgi/private/util/clock now-ms))

(define (index-of l x) (for/first ([y (in-list l)] [i (in-naturals)] #:when (eq? x y)) i))

(test-case "next-due and due-tasks, by table"
  ;; dues, now -> the earliest due, the indexes of the tasks due at now
  (define rows
    `(((100.0 50.0 75.0) 60.0 50.0 (1))
      ((100.0 50.0 75.0) 100.0 50.0 (0 1 2))
      ((100.0 50.0 75.0) 49.9 50.0 ())
      ((+inf.0 20.0) 20.0 20.0 (1))
      ((+inf.0) 1e12 +inf.0 ())
      (() 0.0 +inf.0 ())))
  (for ([row (in-list rows)])
    (define-values (dues now earliest due-idx) (apply values row))
    (define tasks (for/list ([d (in-list dues)]) (make-task d)))
    (check-equal? (next-due tasks) earliest (format "next-due of ~a" dues))
    (check-equal? (for/list ([t (in-list (due-tasks tasks now))]) (index-of tasks t))
                  due-idx (format "due at ~a of ~a" now dues))))

;; wait-for : (-> boolean) -> boolean ; polls for up to 5 s
(define (wait-for ok?)
  (define until (+ (now-ms) 5000))
  (let loop () (cond [(ok?) #t] [(> (now-ms) until) #f] [else (sleep 0.01) (loop)])))

(test-case "periodic tasks and one-shots run from one thread; a cancelled one-shot never runs"
  (define tm (make-timer))
  (define threads (make-hasheq))
  (define a 0)
  (define b 0)
  (define shot 0)
  (timer-every! tm 10 (λ () (hash-set! threads (current-thread) #t) (set! a (add1 a))))
  (timer-every! tm 25 (λ () (hash-set! threads (current-thread) #t) (set! b (add1 b))))
  (timer-at! tm (+ (now-ms) 30) (λ () (hash-set! threads (current-thread) #t) (set! shot (add1 shot))))
  (define never (timer-at! tm (+ (now-ms) 40) (λ () (error "cancelled one-shot ran"))))
  (timer-cancel! tm never)
  (timer-start! tm)
  (check-true (wait-for (λ () (and (>= a 10) (>= b 4) (= shot 1)))))
  (sleep 0.1)
  (timer-stop! tm)
  (check-equal? shot 1 "a one-shot runs once")
  (check-equal? (hash-count threads) 1 "every task ran in the timer's one thread")
  (check-true (> a b) "the shorter period ran more often"))

(test-case "a quiet task sleeps after its limit, if it can register, and timer-wake! wakes it"
  (define tm (make-timer))
  (define runs 0)
  (define registered #f)
  (timer-every! tm 5 (λ () (set! runs (add1 runs)) #f)
                #:quiet-limit 3
                #:sleep (λ (wake) (set! registered wake) #t))
  (timer-start! tm)
  (check-true (wait-for (λ () (and registered (>= runs 3)))))
  (sleep 0.1)
  (check-equal? runs 3 "asleep after three quiet runs")
  (timer-wake! tm)
  (check-true (wait-for (λ () (>= runs 6))) "woken, it runs again until quiet once more")
  (sleep 0.1)
  (check-equal? runs 6)
  (timer-stop! tm))

(test-case "a quiet task that cannot register (work may come at once) stays awake"
  (define tm (make-timer))
  (define runs 0)
  (timer-every! tm 5 (λ () (set! runs (add1 runs)) #f) #:quiet-limit 2 #:sleep (λ (wake) #f))
  (timer-start! tm)
  (check-true (wait-for (λ () (>= runs 10))))
  (timer-stop! tm))

(test-case "a task that raises does not stop the timer: it and the others run on"
  (define tm (make-timer))
  (define bad 0)
  (define good 0)
  (timer-every! tm 5 (λ () (set! bad (add1 bad)) (error 'task "boom")))
  (timer-every! tm 5 (λ () (set! good (add1 good))))
  (timer-start! tm)
  (check-true (wait-for (λ () (and (>= bad 3) (>= good 3)))))
  (timer-stop! tm))
