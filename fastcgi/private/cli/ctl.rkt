#lang racket/base
;; `raco fastcgi ctl status|reload|stop|stacks --pid-file FILE`: for scripts and systemd
;; units. status prints the pool's status (from FILE.status.json, which the manager keeps
;; fresh); stacks asks the manager (on its control socket, named in that file) for what
;; every running request does now: each one's handler stack (manager-stacks.rkt);
;; reload sends SIGHUP and waits for the reload that answers it (one asked while another
;; is under way runs after that one): exit 0 when its generation serves, 1 with the reason
;; when it failed; stop sends SIGTERM and waits until the manager has exited.
(require racket/cmdline racket/file racket/string
         "cli-args.rkt" "../util/clock.rkt" "../status/pool-status.rkt" "../os/signals.rkt"
         "../status/stacks-text.rkt" (only-in "../worker/control.rkt" ask-stacks ask-canary-reload))
(provide ctl-command)

;; ctl-command : (vectorof string) -> void
(define (ctl-command argv)
  (define pid-file #f)
  (define timeout 60)
  (define fmt 'text)
  (define canary #f)
  (define action
    (command-line
     #:program "raco fastcgi ctl"
     #:argv argv
     #:once-each
     [("--pid-file" "-p") file "The manager's pid file (its --pid-file)" (set! pid-file file)]
     [("--timeout") secs "Seconds to wait for reload or stop (default 60)"
      (set! timeout (seconds-arg "--timeout" secs))]
     [("--json") "status, stacks: print JSON instead of text" (set! fmt 'json)]
     [("--canary") secs "reload: through a canary on trial for SECS (serve's --canary)"
      (set! canary (seconds-arg "--canary" secs))]
     #:args (command) command))
  (unless pid-file (raise-user-error 'raco-fastcgi "ctl: give --pid-file FILE (the manager's --pid-file)"))
  (define pid (read-pid pid-file))
  (define board-file (string-append pid-file ".status.json"))
  (case action
    [("status")
     (define board (read-scoreboard board-file))
     (unless board (raise-user-error 'raco-fastcgi "ctl: no status in ~a yet" board-file))
     (write-bytes (render-status board fmt))
     (when (eq? fmt 'json) (newline))]
    [("reload") (ctl-reload pid pid-file board-file timeout canary)]
    [("stop")
     (check-manager! pid pid-file)
     (send-signal! pid SIGTERM)
     (cond
       [(wait-until timeout (λ () (not (process-alive? pid)))) (printf "stopped\n")]
       [else (eprintf "raco fastcgi ctl: pid ~a still running after ~a s\n" pid timeout) (exit 1)])]
    [("stacks") (ctl-stacks pid pid-file board-file fmt)]
    [else (raise-user-error 'raco-fastcgi "ctl: expected status, reload, stop or stacks, got ~s" action)]))

;; ctl-reload : natural string string real (or/c real #f) -> void
;; SIGHUP (or, with canary, the control socket's reload ask), then the wait for the reload
;; that answers it: exit 0 when its generation serves, 1 with the reason when it failed.
(define (ctl-reload pid pid-file board-file timeout canary)
  ;; the manager counts the reloads asked and publishes how many of them the last
  ;; finished reload answers: ours is answered once that passes the count before it
  (define before (or (read-scoreboard board-file) (hasheq)))
  (define asked (hash-ref before 'reload_asks 0))
  ;; a manager started before this version counts no asks: any reload that ends answers
  (define (answered? b)
    (if (hash-has-key? b 'reload_settled)
        (> (hash-ref b 'reload_settled) asked)
        (for/or ([k (in-list '(reloads reload_failures))])
          (> (hash-ref b k 0) (hash-ref before k 0)))))
  (check-manager! pid pid-file)
  (cond
    [canary
     (define control (hash-ref before 'control #f))
     (unless (and (string? control) (ask-canary-reload control (inexact->exact (round (* 1000 canary)))))
       (raise-user-error 'raco-fastcgi "ctl reload --canary: cannot ask the manager (pid ~a) on its control socket; ctl must run as the pool's user" pid))]
    [else (send-signal! pid SIGHUP)])
  ;; a canary's trial lasts up to 3 x its seconds once its worker is ready
  (define wait-secs (if canary (max timeout (+ (* 3 canary) 60)) timeout))
  (define result
    (wait-until wait-secs
                (λ ()
                  (define b (read-scoreboard board-file))
                  (cond
                    [(not (process-alive? pid)) 'gone]
                    [(and b (answered? b)) b]
                    [else #f]))))
  (cond
    [(hash? result)
     (define why (hash-ref result 'last_reload_error
                           (and (> (hash-ref result 'reload_failures 0) (hash-ref before 'reload_failures 0))
                                "see the manager's log")))
     (cond
       [(string? why)
        (eprintf "raco fastcgi ctl: reload failed: ~a; generation ~a goes on serving\n"
                 why (hash-ref result 'generation "?"))
        (exit 1)]
       [else (printf "reloaded: generation ~a serves\n" (hash-ref result 'generation "?"))])]
    [(eq? result 'gone) (eprintf "raco fastcgi ctl: the manager (pid ~a) exited\n" pid) (exit 1)]
    [else (eprintf "raco fastcgi ctl: reload not done after ~a s\n" wait-secs) (exit 1)]))

;; ctl-stacks : natural string string symbol -> void
;; What every running request does now, asked of the manager on its control socket.
(define (ctl-stacks pid pid-file board-file fmt)
  (define board (read-scoreboard board-file))
  (unless board (raise-user-error 'raco-fastcgi "ctl: no status in ~a yet" board-file))
  (define control (hash-ref board 'control #f))
  (unless (string? control)
    (raise-user-error 'raco-fastcgi "ctl stacks: ~a does not name the manager's control socket (a manager of an older version)" board-file))
  (check-manager! pid pid-file)
  (define answer (ask-stacks control 5))
  (unless answer
    (raise-user-error 'raco-fastcgi "ctl stacks: no answer from the manager (pid ~a) within 5 s; ctl stacks must run as the pool's user" pid))
  (void (write-bytes (render-stacks answer fmt))))

;; read-pid : path-string -> natural ; a live manager's pid, or a clear error
(define (read-pid file)
  (define text (with-handlers ([exn:fail? (λ (e) (raise-user-error 'raco-fastcgi "ctl: cannot read ~a: ~a" file (exn-message e)))])
                 (file->string file)))
  (define pid (string->number (string-trim text)))
  (unless (exact-positive-integer? pid)
    (raise-user-error 'raco-fastcgi "ctl: ~a does not hold a pid: ~s" file text))
  (unless (process-alive? pid)
    (raise-user-error 'raco-fastcgi "ctl: no process ~a (from ~a): the manager is not running" pid file))
  pid)

;; check-manager! : natural path-string -> void
;; Before a signal: a pid file written inside a container (another PID namespace) names a
;; pid of that namespace, which here may be any process, the host's init among them.
(define (check-manager! pid file)
  (define cmdline (process-command-line pid))
  (when (and cmdline (not (regexp-match? #rx"fastcgi" cmdline)))
    (raise-user-error 'raco-fastcgi "ctl: process ~a (from ~a) is not a raco fastcgi manager (it runs ~a): a pid file written in another PID namespace (a container) holds a pid of that namespace; run ctl inside it"
                      pid file (car (regexp-split #rx" " cmdline)))))

;; process-command-line : natural -> (or/c string #f) ; its arguments joined by spaces
(define (process-command-line pid)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define bs (file->bytes (format "/proc/~a/cmdline" pid)))
    (string-trim (bytes->string/utf-8 (regexp-replace* #rx#"\0" bs #" ") #\?))))

;; wait-until : real (-> any) -> any ; polls every 50 ms; #f at the deadline
(define (wait-until timeout probe)
  (define deadline (+ (now-ms) (* 1000 timeout)))
  (let loop ()
    (or (probe)
        (and (< (now-ms) deadline)
             (begin (sleep 0.05) (loop))))))
