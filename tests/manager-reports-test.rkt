#lang racket/base
;; manager-reports.rkt: the control socket's connections (keys first, then a worker's
;; lines reach the main loop, or the board is answered), and each line a worker sends
;; applied to the manager's state: ready (and a reload's generation taking over), stat,
;; recycle, failed, and a loader's refused. In this process (tests/lib/manager-fixture.rkt),
;; on the real control socket; the workers are `sleep` processes.
(require racket/list
         racket/port
         rackunit
         "../fastcgi/private/worker/control.rkt"
         "../fastcgi/private/worker/lines.rkt"
         "../fastcgi/private/manager/manager-reports.rkt"
         "../fastcgi/private/manager/manager-state.rkt"
         (submod "../fastcgi/private/manager/manager-state.rkt" for-tests)
         (only-in "../fastcgi/private/manager/lifecycle.rkt" loader-started!)
         (only-in "../fastcgi/private/os/child-process.rkt" adopt-child)
         "../fastcgi/private/manager/manager-status.rkt"
         "../fastcgi/private/os/signals.rkt"
         (only-in "../fastcgi/private/transport/transport.rkt" private-connect)
         "lib/manager-fixture.rkt")

;; connect : manager -> (values input-port output-port) ; keys read
(define (connect m)
  (define-values (in out) (private-connect (control-name (manager-prefix m))))
  (define-values (secret relay) (read-keys in 5))
  (check-equal? secret (manager-secret m))
  (check-equal? relay (manager-relay-key m))
  (values in out))

(define (next-message m) (sync/timeout 5 (manager-messages m)))

;; A worker's line and a loader's, as the control thread hands them on (lines.rkt).
(define (wline s) (parse-line 'worker s))
(define (lline s) (parse-line 'loader s))

(test-case "a worker's connection: keys, then its port, each line, and its end reach the main loop"
  (call-with-manager
   (λ (m dir)
     (define t (start-control-thread! m))
     (define-values (in out) (connect m))
     (write-string "hello 4242\nstat requests=1 active=2\nready\nno such line\n" out)
     (flush-output out)
     (define first-msg (next-message m))
     (check-equal? (first first-msg) 4242)
     (check-pred output-port? (second first-msg))
     (check-equal? (next-message m) (list 4242 (cons 'stat (hasheq 'requests 1 'active 2))))
     (check-equal? (next-message m) (list 4242 (cons 'ready (hasheq))))
     (check-equal? (next-message m) (list 4242 #f) "a line that is no message of a worker's")
     (close-output-port out)
     (close-input-port in)
     (check-equal? (next-message m) (list 4242 eof))
     (kill-thread t))))

(test-case "asked for the board: the one last published is answered, and nothing reaches the main loop"
  (call-with-manager
   (λ (m dir)
     (define t (start-control-thread! m))
     (check-false (ask-board (control-name (manager-prefix m)) 5) "none published yet")
     (publish! m 0.)
     (check-equal? (hash-ref (ask-board (control-name (manager-prefix m)) 5) 'total_workers) 0)
     (define-values (in out) (connect m))
     (write-string "nonsense\n" out)
     (flush-output out)
     (check-true (eof-object? (sync/timeout 5 (read-line-evt in))) "a first line neither hello nor board: closed")
     (check-false (sync/timeout 0.2 (manager-messages m)))
     (kill-thread t))))

(test-case "message!: the control port, the end of the reports, and a line (heard)"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m #:heard-ms -1.))
     (define port (open-output-nowhere))
     (message! m (list (worker-pid w) port))
     (check-eq? (worker-control w) port)
     (message! m (list (worker-pid w) #f))
     (check-true (> (worker-heard-ms w) 0) "a line of any kind is heard")
     (message! m (list (worker-pid w) eof))
     (check-true (worker-reports-done? w))
     (message! m (list 1 (wline "ready")))            ; no such worker: nothing happens
     (check-eq? (worker-state w) 'starting))))

(test-case "stat: the counters it names are set, others stay; a bad one changes nothing"
  ;; line -> requests active connections slow shed queue-delay sessions log-dropped
  (define table
    '(("stat requests=1 active=2 connections=3 slow=4 shed=5 queue-delay=6" (1 2 3 4 5 6 0 0))
      ("stat requests=1 active=2 connections=3 slow=4 shed=5 queue-delay=6 sessions=7" (1 2 3 4 5 6 7 0))
      ("stat requests=1 active=2 connections=3 slow=4 shed=5 queue-delay=6 sessions=7 log-dropped=8 oldest-age-ms=0 newer=10"
       (1 2 3 4 5 6 7 8))
      ("stat connections=3 requests=1" (1 0 3 0 0 0 0 0))
      ("stat requests=1 active=2 connections=x slow=4 shed=5 queue-delay=6" (0 0 0 0 0 0 0 0))
      ("stat requests=1 active=2 connections=3 slow=4 shed=5 queue-delay=-6" (0 0 0 0 0 0 0 0))
      ("stat 1 2 3 4 5 6" (0 0 0 0 0 0 0 0))))
  (call-with-manager
   (λ (m dir)
     (for ([row (in-list table)])
       (define w (add-worker! m))
       (message! m (list (worker-pid w) (wline (first row))))
       (check-equal? (map (λ (get) (get w))
                          (list worker-requests worker-active worker-connections worker-slow
                                worker-shed worker-queue-delay worker-sessions worker-log-dropped))
                     (second row)
                     (first row))))))

(test-case "stat: busy (active, or more requests than before) marks when the worker was last busy"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m))
     (set-worker-last-busy-ms! w #f)
     (message! m (list (worker-pid w) (wline "stat requests=0 active=0")))
     (check-false (worker-last-busy-ms w))
     (message! m (list (worker-pid w) (wline "stat requests=0 active=1")))
     (check-true (real? (worker-last-busy-ms w)))
     (set-worker-last-busy-ms! w #f)
     (message! m (list (worker-pid w) (wline "stat requests=3 active=0")))
     (check-true (real? (worker-last-busy-ms w))))))

(test-case "failed, recycle and ready"
  (call-with-manager
   (λ (m dir)
     (define w (add-worker! m))
     (message! m (list (worker-pid w) (wline "failed cannot open /var/log/x: denied")))
     (check-equal? (worker-failure w) "cannot open /var/log/x: denied")
     (define-values (_ lines) (capture-log (λ () (message! m (list (worker-pid w) (wline "ready"))))))
     (check-eq? (worker-state w) 'ready)
     (check-true (real? (worker-ready-ms w)))
     (check-true (manager-ever-ready? m))
     (check-not-false (manager-last-board m) "ready publishes the board")
     (check-not-false (member (format "fastcgi: worker ~a ready (generation 1)" (worker-pid w)) lines))
     (message! m (list (worker-pid w) (wline "recycle max requests 50")))
     (check-equal? (worker-recycle w) "max requests 50")
     (check-equal? (hash-ref (manager-totals m) 'recycled) 1))))

(test-case "ready: a fresh worker replaces the oldest of its generation waiting to be recycled"
  (call-with-manager
   (λ (m dir)
     (define old (add-worker! m #:state 'ready #:now 1.))
     (define older (add-worker! m #:state 'ready #:now 0.))
     (for ([w (list old older)]) (set-worker-recycle! w "max requests"))
     (define fresh (add-worker! m))
     (message! m (list (worker-pid fresh) (wline "ready")))
     (check-eq? (worker-state older) 'draining)
     (check-equal? (worker-signalled older) SIGTERM "no control connection: drained by SIGTERM")
     (check-eq? (worker-state old) 'ready))))

(test-case "ready: the last of a reload's generation ready, the old one retires and the new serves"
  (call-with-manager
   (λ (m dir)
     (define old (add-worker! m #:state 'ready))
     (define control (open-output-bytes))
     (set-worker-control! old control)
     (set-manager-reload-gen! m 2)
     (set-manager-reload-covers! m 1)
     (define new1 (add-worker! m #:generation 2))
     (define new2 (add-worker! m #:generation 2))
     (message! m (list (worker-pid new1) (wline "ready")))
     (check-equal? (manager-gen m) 1 "one of two ready: the old generation serves")
     (check-eq? (worker-state old) 'ready)
     (define-values (_ lines) (capture-log (λ () (message! m (list (worker-pid new2) (wline "ready"))))))
     (check-equal? (manager-gen m) 2)
     (check-false (manager-reload-gen m))
     (check-equal? (manager-reload-settled m) 1)
     (check-equal? (hash-ref (manager-totals m) 'reloads) 1)
     (check-eq? (worker-state old) 'draining)
     (check-true (worker-retiring? old))
     (check-regexp-match (pregexp (format "^retire( ~a| ~a){2}\n$" (worker-id new1) (worker-id new2))) (get-output-string control))
     (check-not-false (member "fastcgi: reload done: generation 2 serves" lines)))))

(test-case "refused: a loader (or the base) whose Racket is not as a fork expects: one line naming the version, no fork"
  (call-with-manager
   (λ (m dir)
     (define why "the runtime's epoll set and wake-up pipe: 2 epoll descriptors (3, 6), expected 1")
     (define ld (make-loader #:generation 1 #:process #f #:now 0.))
     (loader-started! ld (adopt-child 4242) 0.)
     (hash-set! (manager-loaders m) 1 ld)
     (define-values (_ lines) (capture-log (λ () (message! m (list 4242 (lline (string-append "refused " why)))))))
     (check-eq? (loader-state ld) 'unsafe "its workers are started as processes of their own (spawn!)")
     (check-equal? (filter (λ (l) (regexp-match? #rx"Racket" l)) lines)
                   (list (format "fastcgi: generation 1: Racket ~a: forking from a loaded image: ~a: each worker loads the app itself"
                                 (version) why)))
     (define base (make-loader #:generation 0 #:process #f #:now 0.))
     (loader-started! base (adopt-child 4343) 0.)
     (set-manager-base! m base)
     (define-values (__ base-lines) (capture-log (λ () (message! m (list 4343 (lline (string-append "refused " why)))))))
     (check-eq? (loader-state base) 'unsafe)
     (check-equal? (filter (λ (l) (regexp-match? #rx"Racket" l)) base-lines)
                   (list (format "fastcgi: the base: Racket ~a: forking from a loaded image: ~a: each generation's loader loads the libraries itself"
                                 (version) why))))))
