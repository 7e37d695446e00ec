#lang racket/base
;; fastcgi/private/os/signals.rkt: signal names, sending a signal and telling a live process
;; from a dead one (a `sleep` child), the parent's pid, and, in a racket child of
;; its own (the mask needs a process with one OS thread), signals blocked and read as an
;; event, and die-with-parent!.
(require racket/port
         racket/runtime-path
         racket/string
         rackunit
         "../fastcgi/private/os/signals.rkt")

(define-runtime-path signals-module "../fastcgi/private/os/signals.rkt")
(define racket-exe (path->string (find-executable-path "racket")))

(test-case "signal-name: the signals the manager names, the rest by number"
  (for ([row (in-list `((,SIGHUP "SIGHUP") (,SIGINT "SIGINT") (,SIGQUIT "SIGQUIT") (6 "SIGABRT")
                        (,SIGKILL "SIGKILL") (,SIGUSR1 "SIGUSR1") (11 "SIGSEGV") (,SIGTERM "SIGTERM")
                        (12 "signal 12")))])
    (check-equal? (signal-name (car row)) (cadr row))))

(test-case "send-signal! and process-alive?: alive, then not once killed"
  (define-values (p out in err) (subprocess #f #f #f "/bin/sleep" "30"))
  (close-output-port in)
  (define pid (subprocess-pid p))
  ;; a signal sent between the fork and the exec can be lost: wait for sleep to run
  (let loop ([n 250])
    (unless (or (zero? n) (regexp-match? #rx#"sleep" (with-handlers ([exn:fail? (λ (e) #"")])
                                                        (call-with-input-file (format "/proc/~a/cmdline" pid)
                                                          port->bytes))))
      (sleep 0.02)
      (loop (sub1 n))))
  (check-true (process-alive? pid))
  (check-true (send-signal! pid 0) "signal 0: the process exists")
  (check-true (send-signal! pid SIGTERM))
  ;; (Racket reaps its children as they end, so no zombie is seen here)
  (check-true (let loop ([n 250])
                (cond [(not (process-alive? pid)) #t]
                      [(zero? n) #f]
                      [else (sleep 0.02) (loop (sub1 n))])))
  (subprocess-wait p)
  (check-equal? (subprocess-status p) (+ 128 SIGTERM) "ended by the signal")
  (check-false (process-alive? pid))
  (check-false (send-signal! pid SIGTERM) "no such process any more")
  (close-input-port out)
  (close-input-port err))

(test-case "parent-pid: the PPid of /proc/self/status"
  (define m (regexp-match #rx"PPid:[ \t]*([0-9]+)" (call-with-input-file "/proc/self/status" port->string)))
  (check-equal? (parent-pid) (string->number (cadr m))))

;; racket-child : string -> (values string natural) ; what `racket -e expr` printed, its status
(define (racket-child expr)
  (define-values (p out in err)
    (subprocess #f #f (current-error-port) racket-exe "-e"
                (format "(require (file ~s)) (let () ~a (void))" (path->string signals-module) expr)))
  (close-output-port in)
  (define text (port->string out))
  (unless (sync/timeout 20 p) (subprocess-kill p #t))
  (close-input-port out)
  (values (string-trim text) (subprocess-status p)))

(test-case "block-signals!: blocked signals come as an event, not as their default action"
  (define-values (text status)
    (racket-child (format "(define e (block-signals! (list ~a ~a)))
                           (send-signal! (parent-pid) 0)
                           (define self (string->number (cadr (regexp-match #rx\"^([0-9]+)\" (call-with-input-file \"/proc/self/stat\" read-line)))))
                           (send-signal! self ~a) (send-signal! self ~a)
                           (define a (sync/timeout 5 e)) (define b (sync/timeout 5 e))
                           (unblock-signals! (list ~a))
                           (printf \"~~a ~~a\" a b)"
                          SIGUSR1 SIGHUP SIGHUP SIGUSR1 SIGUSR1)))
  (check-equal? status 0 "the process lived through SIGHUP and SIGUSR1")
  (check-equal? (sort (map string->number (string-split text)) <) (list SIGHUP SIGUSR1)))

(test-case "die-with-parent!: a parent other than the one expected is already gone: the signal now"
  (define-values (text status)
    (racket-child (format "(die-with-parent! (+ 1 (parent-pid)) ~a) (sleep 10) (display \"still here\")" SIGKILL)))
  (check-equal? text "")
  (check-equal? status (+ 128 SIGKILL))
  (define-values (text2 status2)
    (racket-child (format "(die-with-parent! (parent-pid) ~a) (display \"still here\")" SIGKILL)))
  (check-equal? (list text2 status2) '("still here" 0) "the parent expected: nothing now"))
