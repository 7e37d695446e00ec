#lang racket/base
;; `raco fastcgi serve` under systemd's notify protocol (sd-notify.rkt, manager-notify.rkt),
;; against a notify socket of the test's own (tests/lib/notify-socket.rkt): READY=1 once
;; the pool serves, STATUS= lines, WATCHDOG=1 again and again, RELOADING=1 with
;; MONOTONIC_USEC then READY=1 on SIGHUP, STOPPING=1 on SIGTERM; every datagram sent by
;; the manager (the kernel's credentials), none by a worker, whose environment holds none
;; of the variables; no WATCHDOG=1 while every worker is frozen; an abstract-namespace
;; address; --single-process (READY=1, WATCHDOG=1, STOPPING=1). Real processes, every
;; wait bounded, no timing assertions.
(require racket/file
         racket/list
         racket/os
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/sd-notify.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/notify-socket.rkt"
         "lib/serve.rkt")

;; Every answer: the worker's pid, then each notify variable as the worker sees it.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require racket/os fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n~a ~s\\n\" (getpid)\n"
   "                        (map getenv '(\"NOTIFY_SOCKET\" \"WATCHDOG_USEC\" \"WATCHDOG_PID\")))\n"
   "                (fastcgi-request-stdout r)))\n"))

;; call-with-notified-pool : string (listof (cons string (or/c string #f))) (listof string)
;;                           (notify-socket proc string path -> any) -> any
;; The app served under NOTIFY_SOCKET=address (a path in the temporary folder when it is
;; "notify.sock"), with env's variables set (#f: unset) and these serve options; body
;; gets the notify socket, the manager, the address it serves and the folder.
(define (call-with-notified-pool address env options body)
  (call-with-temp-dir
   "fcgi-sdn"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define app (path->string (build-path dir "app.rkt")))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (define notify-address (if (regexp-match? #rx"^@" address) address (path->string (build-path dir address))))
     (display-to-file app-source app)
     (define ns (open-notify-socket notify-address))
     (define vars (environment-variables-copy (current-environment-variables)))
     (for ([kv (in-list (cons (cons "NOTIFY_SOCKET" notify-address) env))])
       (environment-variables-set! vars (string->bytes/utf-8 (car kv)) (and (cdr kv) (string->bytes/utf-8 (cdr kv)))))
     (define mgr (parameterize ([current-environment-variables vars])
                   (start-process "manager" raco
                                  (append (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                                "--pid-file" pid-file)
                                          options)
                                  #:dir dir)))
     (dynamic-wind
      void
      (λ () (body ns mgr (string-append "unix:" sock) dir))
      (λ ()
        (stop-process! mgr #:timeout 10)
        (close-notify-socket! ns))))))

;; has-line? : string -> (datagram -> boolean) ; a datagram with this line
(define ((has-line? line) d) (and (member line (string-split (datagram-text d) "\n")) #t))

;; status-of : datagram -> (or/c string #f) ; its STATUS= line's text
(define (status-of d)
  (for/first ([l (in-list (string-split (datagram-text d) "\n"))]
              #:when (string-prefix? l "STATUS="))
    (substring l 7)))

;; status-matches? : regexp -> (datagram -> boolean)
(define ((status-matches? rx) d) (let ([s (status-of d)]) (and s (regexp-match? rx s))))

;; ask : string -> (list natural string) ; the worker's pid and what it sees of the variables
(define (ask address)
  (define-values (st hd body) (fastcgi-request address #:uri "/" #:timeout 10))
  (check-equal? st 200)
  (define m (regexp-match #rx"^([0-9]+) (.*)\n$" (bytes->string/utf-8 body)))
  (list (string->number (cadr m)) (caddr m)))

;; check-only-manager-sent : notify-socket proc -> void
(define (check-only-manager-sent ns mgr)
  (define ds (notify-datagrams ns))
  (check-true (pair? ds))
  (for ([d (in-list ds)])
    (check-equal? (datagram-pid d) (proc-pid mgr) (format "sent by the manager: ~s" d))))

;; opened : (listof (cons string string)) -> (list boolean (or/c real #f) boolean)
;; open-notifier in an environment of just these variables: whether it opened a notifier,
;; its watchdog interval (ms), and whether any of the three variables is left.
(define (opened vars)
  (parameterize ([current-environment-variables (make-environment-variables)])
    (for ([kv (in-list vars)]) (putenv (car kv) (cdr kv)))
    (define n (open-notifier))
    (begin0 (list (and n #t) (and n (notifier-watchdog-ms n))
                  (and (ormap getenv '("NOTIFY_SOCKET" "WATCHDOG_USEC" "WATCHDOG_PID")) #t))
            (close-notifier! n))))

(test-case "open-notifier: the addresses and watchdog settings it takes; the variables go"
  (define me (number->string (getpid)))
  (define long-path (string-append "/" (make-string 107 #\a)))
  (for ([c (in-list
            `(([("WATCHDOG_USEC" . "1000000")] #f #f)                         ; no NOTIFY_SOCKET
              ([("NOTIFY_SOCKET" . "")] #f #f)
              ([("NOTIFY_SOCKET" . "relative/notify")] #f #f)
              ([("NOTIFY_SOCKET" . "@")] #f #f)
              ([("NOTIFY_SOCKET" . ,long-path)] #f #f)
              ([("NOTIFY_SOCKET" . ,(substring long-path 1))] #f #f)
              ([("NOTIFY_SOCKET" . ,(substring long-path 0 107))] #t #f)
              ([("NOTIFY_SOCKET" . "/run/systemd/notify")] #t #f)
              ([("NOTIFY_SOCKET" . "@abstract")] #t #f)
              ([("NOTIFY_SOCKET" . "/n") ("WATCHDOG_USEC" . "1000000")] #t 500.)
              ([("NOTIFY_SOCKET" . "/n") ("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . ,me)] #t 500.)
              ([("NOTIFY_SOCKET" . "/n") ("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . "1")] #t #f)
              ([("NOTIFY_SOCKET" . "/n") ("WATCHDOG_USEC" . "soon")] #t #f)
              ([("NOTIFY_SOCKET" . "/n") ("WATCHDOG_USEC" . "0")] #t #f)))])
    (check-equal? (opened (car c)) (list (cadr c) (caddr c) #f) (format "~s" (car c)))))

(test-case "READY once it serves, STATUS, WATCHDOG, RELOADING then READY on SIGHUP, STOPPING on SIGTERM; only the manager sends"
  (call-with-notified-pool
   "notify.sock" '(("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . #f)) '("--workers" "2")
   (λ (ns mgr address dir)
     (define ready (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1"))
     ;; ready means serving: a request now is answered, by a worker that sees no variable
     (define answer (ask address))
     (check-equal? (cadr answer) "(#f #f #f)" "the worker's environment has no notify variable")
     (check-true ((status-matches? #rx"^2 workers \\(2 idle, 0 busy\\), 0 requests served, generation 1$")
                  (list-ref (notify-datagrams ns) ready))
                 (format "READY=1 comes with the status: ~s" (list-ref (notify-datagrams ns) ready)))
     (for/fold ([from (add1 ready)]) ([_ (in-range 3)])
       (add1 (wait-for-datagram ns from (has-line? "WATCHDOG=1") 10 "WATCHDOG=1, again")))
     (for ([_ (in-range 4)]) (ask address))
     (wait-for-datagram ns ready (status-matches? #rx"^2 workers .*, 5 requests served, generation 1$") 10
                        "a STATUS line with the requests served")
     ;; SIGHUP: RELOADING=1 with CLOCK_MONOTONIC between the test's readings, then READY=1
     (define before (test-monotonic-usec))
     (define from (length (notify-datagrams ns)))
     (check-true (send-signal! (proc-pid mgr) SIGHUP))
     (define reloading (wait-for-datagram ns from (has-line? "RELOADING=1") 20 "RELOADING=1"))
     (define after (test-monotonic-usec))
     (define text (datagram-text (list-ref (notify-datagrams ns) reloading)))
     (define usec (let ([m (regexp-match #rx"(?m:^MONOTONIC_USEC=([0-9]+)$)" text)]) (and m (string->number (cadr m)))))
     (check-true (and usec (<= before usec after)) (format "MONOTONIC_USEC in [~a, ~a]: ~s" before after text))
     (check-regexp-match #rx"(?m:^STATUS=reloading: generation 2 starting; )" text)
     (define reloaded (wait-for-datagram ns reloading (has-line? "READY=1") 60 "READY=1 after the reload"))
     (check-true ((status-matches? #rx"generation 2$") (list-ref (notify-datagrams ns) reloaded))
                 (format "the new generation serves: ~s" (list-ref (notify-datagrams ns) reloaded)))
     (check-equal? (cadr (ask address)) "(#f #f #f)")
     ;; a reload that fails: READY=1 all the same, and the status says the old one serves
     (display-to-file "#lang racket/base\n" (build-path dir "app.rkt") #:exists 'truncate)
     (check-true (send-signal! (proc-pid mgr) SIGHUP))
     (define reloading2 (wait-for-datagram ns (add1 reloaded) (has-line? "RELOADING=1") 20 "RELOADING=1 again"))
     (define failed (wait-for-datagram ns reloading2 (has-line? "READY=1") 60 "READY=1 after the failed reload"))
     (check-true ((status-matches? #rx"generation 2; last reload failed, generation 2 goes on serving: (a worker of generation 3 died|cannot load .*app[.]rkt)")
                  (list-ref (notify-datagrams ns) failed))
                 (format "the status says the reload failed: ~s" (list-ref (notify-datagrams ns) failed)))
     (check-true (send-signal! (proc-pid mgr) SIGTERM))
     (wait-for-datagram ns failed (has-line? "STOPPING=1") 20 "STOPPING=1")
     (check-equal? (sync/timeout 40 (proc-subprocess mgr)) (proc-subprocess mgr))
     (check-equal? (subprocess-status (proc-subprocess mgr)) 0)
     (check-only-manager-sent ns mgr))))

(test-case "no WATCHDOG=1 while every worker is frozen; again once it is replaced"
  (call-with-notified-pool
   "notify.sock" '(("WATCHDOG_USEC" . "1000000")) '("--workers" "1" "--request-timeout" "1")
   (λ (ns mgr address dir)
     (define ready (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1"))
     (define fed (wait-for-datagram ns ready (has-line? "WATCHDOG=1") 10 "WATCHDOG=1"))
     (define old (car (ask address)))
     (check-true (send-signal! old 19))   ; SIGSTOP
     (define stuck (wait-for-datagram ns fed (status-matches? #rx"every worker is late: the pool is stuck") 20
                                      "a STATUS saying the pool is stuck"))
     (define unstuck (wait-for-datagram ns stuck (λ (d) (and (status-of d) (not ((status-matches? #rx"stuck") d)))) 40
                                        "a STATUS once the frozen worker is replaced"))
     (define between (take (drop (notify-datagrams ns) stuck) (- unstuck stuck)))
     (check-false (ormap (has-line? "WATCHDOG=1") between)
                  (format "no WATCHDOG=1 while stuck: ~s" between))
     (wait-for-datagram ns unstuck (has-line? "WATCHDOG=1") 10 "WATCHDOG=1 again")
     (check-not-equal? (car (ask address)) old "a new worker serves")
     (check-regexp-match #rx"every worker is late: the pool is stuck; systemd's watchdog is not fed"
                         (file->string (proc-stderr-file mgr)))
     (check-only-manager-sent ns mgr))))

(test-case "an abstract address (@name); WATCHDOG_PID not the manager's: no WATCHDOG=1"
  (define name (format "@fcgi-sd-notify-test-~a-~a" (getpid) (random 1000000)))
  (call-with-notified-pool
   name '(("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . "1")) '("--workers" "1")
   (λ (ns mgr address dir)
     (define ready (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1"))
     (check-equal? (cadr (ask address)) "(#f #f #f)")
     (sleep 2)
     (check-true (send-signal! (proc-pid mgr) SIGTERM))
     (wait-for-datagram ns ready (has-line? "STOPPING=1") 20 "STOPPING=1")
     (check-equal? (sync/timeout 40 (proc-subprocess mgr)) (proc-subprocess mgr))
     (check-false (ormap (has-line? "WATCHDOG=1") (notify-datagrams ns)) "WATCHDOG_PID names another process")
     (check-only-manager-sent ns mgr))))

(test-case "a notify socket that goes away: logged once, and the pool serves on"
  (call-with-notified-pool
   "notify.sock" '(("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . #f)) '("--workers" "1")
   (λ (ns mgr address dir)
     (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1")
     (close-notify-socket! ns)
     (define (failures)
       (length (regexp-match* #rx"cannot notify systemd at [^\n]*notify.sock: " (file->string (proc-stderr-file mgr)))))
     (wait-until 10 "the failure logged" (λ () (positive? (failures))))
     ;; WATCHDOG=1 goes on failing, unlogged
     (sleep 2)
     (check-equal? (failures) 1)
     (check-equal? (subprocess-status (proc-subprocess mgr)) 'running)
     (check-equal? (cadr (ask address)) "(#f #f #f)"))))

(test-case "--single-process: READY once it serves, WATCHDOG again and again, STOPPING on SIGTERM"
  (call-with-notified-pool
   "notify.sock" '(("WATCHDOG_USEC" . "1000000") ("WATCHDOG_PID" . #f)) '("--single-process")
   (λ (ns mgr address dir)
     (define ready (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1"))
     ;; ready means serving, by the process systemd started (raco exec()s into racket)
     (define answer (ask address))
     (check-equal? (car answer) (proc-pid mgr) "the process systemd started serves")
     (check-equal? (cadr answer) "(#f #f #f)" "a handler's environment has no notify variable")
     (check-true ((status-matches? #rx"^serving .*app\\.sock, single process$") (list-ref (notify-datagrams ns) ready))
                 (format "READY=1 comes with the status: ~s" (list-ref (notify-datagrams ns) ready)))
     (for/fold ([from (add1 ready)]) ([_ (in-range 3)])
       (add1 (wait-for-datagram ns from (has-line? "WATCHDOG=1") 10 "WATCHDOG=1, again")))
     (check-true (send-signal! (proc-pid mgr) SIGTERM))
     (wait-for-datagram ns ready (has-line? "STOPPING=1") 20 "STOPPING=1")
     (check-equal? (sync/timeout 40 (proc-subprocess mgr)) (proc-subprocess mgr))
     (check-equal? (subprocess-status (proc-subprocess mgr)) 0)
     (check-only-manager-sent ns mgr))))
