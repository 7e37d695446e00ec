#lang racket/base
;; The manager's loop never waits on one child (issue 40): the serving generation's loader
;; is stopped (SIGSTOP) and a worker is killed, so that the manager asks the stopped loader
;; for its replacement; a reload asked right after goes through all the same (the base,
;; which is not stopped, forks the new generation's loader, which forks its workers) before
;; the stopped loader's fork deadline (5 s) passes. Then the stuck loader is killed, and in
;; the end every worker process that is a child of the manager is one the status lists:
;; none serves untracked. On a manager that waited for the fork's answer, the deadline
;; passed first and the reload came after it.
(require racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/app-sources.rkt"
         "lib/serve.rkt")

(define SIGSTOP 19)
(define SIGCONT 18)

(define (board s) (or (read-status-file (served-status-file s)) (hasheq)))
(define (stderr-text s) (file->string (proc-stderr-file (served-proc s))))

;; line-index : string regexp -> (or/c natural #f) ; where the first line matching rx is
(define (line-index text rx)
  (for/first ([l (in-list (string-split text "\n"))] [i (in-naturals)] #:when (regexp-match? rx l)) i))

;; children : natural string -> (listof natural) ; pid's children whose name is comm
(define (children pid comm)
  (for/list ([d (in-list (directory-list "/proc"))]
             #:when (regexp-match? #rx"^[0-9]+$" (path->string d))
             #:when (with-handlers ([exn:fail? (λ (e) #f)])
                      (define stat (file->string (format "/proc/~a/stat" d)))
                      (define r (regexp-match #px"^[0-9]+ \\((.*)\\) . ([0-9]+) " stat))
                      (and r (equal? (cadr r) comm) (= (string->number (caddr r)) pid))))
    (string->number (path->string d))))

(test-case "a stopped loader asked to fork holds up nothing: a reload goes through before its deadline"
  (call-with-served-app
   good-source '("--workers" "2" "--log-level" "debug" "--graceful-timeout" "5")
   #:name "fcgi-fork-stall" #:ready 2
   (λ (s)
     (define manager (string->number (string-trim (file->string (served-pid-file s)))))
     (define loader (hash-ref (board s) 'loader_pid #f))
     (check-true (exact-positive-integer? loader) "the pool is preloaded")
     (define victim (first (board-pids (board s) '("idle" "busy"))))
     (send-signal! loader SIGSTOP)
     (dynamic-wind
      void
      (λ ()
        (send-signal! victim SIGKILL)
        ;; the manager has seen the exit (and asked the stopped loader) before the reload
        (wait-until 10 "the killed worker's exit seen"
                    (λ () (regexp-match? (pregexp (format "worker ~a (?:exited|was killed|died)" victim))
                                         (stderr-text s))))
        (send-signal! manager SIGHUP)
        (wait-until 30 "the reload done"
                    (λ () (regexp-match? #rx"reload done: generation 2 serves" (stderr-text s))))
        (wait-until 30 "the stopped loader's deadline"
                    (λ () (regexp-match? #rx"did not answer within 5 s" (stderr-text s))))
        (define text (stderr-text s))
        (check-true (< (line-index text #rx"reload done: generation 2 serves")
                       (line-index text #rx"did not answer within 5 s"))
                    "the reload went through while the loader was stopped")
        ;; every worker of the manager's is tracked
        (wait-until 30 "2 ready workers of generation 2"
                    (λ () (= 2 (length (for/list ([w (in-list (hash-ref (board s) 'workers '()))]
                                                   #:when (and (member (hash-ref w 'state #f) '("idle" "busy"))
                                                               (= 2 (hash-ref w 'generation 0))))
                                          w)))))
        (wait-until 30 "every worker process of the manager's on the status"
                    (λ () (equal? (sort (children manager "fastcgi-worker") <)
                                  (sort (board-pids (board s) '("idle" "busy" "starting" "draining" "late")) <)))))
      (λ () (send-signal! loader SIGCONT)))
     (void))))
