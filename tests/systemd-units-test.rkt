#lang racket/base
;; The systemd units in deploy/systemd, as far as they run without systemd as PID 1:
;; `systemd-analyze verify` accepts them, and their ExecStart and ExecReload lines, run as
;; written (the paths under /srv and /run moved to a temporary folder, no User=), serve,
;; reload and stop, telling a notify socket of the test's own what systemd's Type=notify
;; expects (READY, RELOADING, STOPPING). The socket-activated service gets its socket as systemd passes it:
;; fd 3 with LISTEN_FDS=1 and LISTEN_PID set to the service's own pid.
(require ffi/unsafe/port
         racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "../fastcgi/private/transport/transport.rkt"
         "integration/lib.rkt"
         "lib/notify-socket.rkt")

(define here (let-values ([(dir _n _d) (split-path (syntax-source #'here))]) dir))
(define units (build-path here ".." "deploy" "systemd"))
(define systemd-analyze (require-program! "/usr/bin/systemd-analyze" "systemd"))

;; unit-command : path string -> (listof string) ; an Exec line, continuations joined
(define (unit-command file key)
  (define text (regexp-replace* #rx"\\\\\n[ \t]*" (file->string file) " "))
  (define m (regexp-match (pregexp (string-append "(?m:^" key "=(.*)$)")) text))
  (string-split (cadr m)))

;; relocate : (listof string) path -> (listof string) ; /srv/racket-app and /run, /var/log moved
(define (relocate args dir)
  (for/list ([a (in-list args)])
    (for/fold ([a a]) ([from '("/srv/racket-app/" "/run/" "/var/log/")]
                       [to (list "app/" "run/" "log/")])
      (string-replace a from (path->string (build-path dir to))))))

(define app-source
  "#lang racket/base\n(require fastcgi)\n(provide fastcgi-handler)\n(define (fastcgi-handler r)\n  (write-string \"Content-Type: text/plain\\r\\n\\r\\nfrom systemd\\n\" (fastcgi-request-stdout r)))\n")

;; has-line? : string -> (datagram -> boolean) ; a datagram with this line
(define ((has-line? line) d) (and (member line (string-split (datagram-text d) "\n")) #t))

(test-case "systemd-analyze verify accepts the units"
  (for ([f (in-list (directory-list units #:build? #t))]
        #:when (regexp-match? #rx"[.](service|socket)$" f))
    (define-values (code out err) (run-program systemd-analyze (list "verify" "--man=no" (path->string f))))
    (check-equal? code 0 (format "~a: ~a~a" f out err))))

(test-case "racket-app.service: ExecStart serves, ExecReload reloads, SIGTERM stops"
  (call-with-temp-dir
   "fcgi-sd"
   (λ (dir)
     (for ([d '("app" "run/racket-app" "log/racket-app")]) (make-directory* (build-path dir d)))
     (display-to-file app-source (build-path dir "app" "app.rkt"))
     (define start (relocate (unit-command (build-path units "racket-app.service") "ExecStart") dir))
     ;; no www-data group needed here: the test runs the line as the current user
     (define args (let loop ([as (cdr start)])
                    (cond [(null? as) '()]
                          [(equal? (car as) "--socket-group") (loop (cddr as))]
                          [else (cons (car as) (loop (cdr as)))])))
     ;; as systemd sets them for Type=notify and WatchdogSec=
     (define ns (open-notify-socket (path->string (build-path dir "notify.sock"))))
     (define watchdog-usec (* 1000000 (string->number (cadr (regexp-match #rx"(?m:^WatchdogSec=([0-9]+)s$)" (file->string (build-path units "racket-app.service")))))))
     (define env (environment-variables-copy (current-environment-variables)))
     (environment-variables-set! env #"NOTIFY_SOCKET" (string->bytes/utf-8 (path->string (build-path dir "notify.sock"))))
     (environment-variables-set! env #"WATCHDOG_USEC" (string->bytes/utf-8 (number->string watchdog-usec)))
     (parameterize ([current-environment-variables env])
     (call-with-process
      "service" (car start) args #:dir dir
      (λ (p)
        ;; Type=notify: READY=1 from the service's own pid (NotifyAccess=main), the exec
        ;; from raco to racket keeping it
        (define ready (wait-for-datagram ns 0 (has-line? "READY=1") 60 "READY=1"))
        (check-equal? (datagram-pid (list-ref (notify-datagrams ns) ready)) (proc-pid p))
        (define sock (path->string (build-path dir "run" "racket-app" "app.sock")))
        (wait-for-unix-socket sock 30)
        (define pid-file (build-path dir "run" "racket-app" "manager.pid"))
        (wait-until 60 "workers ready"
                    (λ () (regexp-match? #rx"idle workers: +[1-9]"
                                         (with-handlers ([exn:fail? (λ (e) "")])
                                           (let-values ([(c o e) (run-program (car start) (list "fastcgi" "ctl" "status" "--pid-file" (path->string pid-file)))])
                                             (bytes->string/utf-8 o))))))
        (define-values (st hd body) (fastcgi-request (string-append "unix:" sock) #:uri "/" #:timeout 10))
        (check-equal? body #"from systemd\n")
        (define reload (relocate (unit-command (build-path units "racket-app.service") "ExecReload") dir))
        (define-values (rc rout rerr) (run-program (car reload) (cdr reload) #:timeout 100))
        (check-equal? rc 0 (bytes->string/utf-8 rerr))
        (check-regexp-match #rx"reloaded: generation 2" (bytes->string/utf-8 rout))
        (define reloading (wait-for-datagram ns ready (has-line? "RELOADING=1") 20 "RELOADING=1"))
        (wait-for-datagram ns reloading (has-line? "READY=1") 60 "READY=1 after the reload")
        (check-true (send-signal! (proc-pid p) SIGTERM))
        (check-equal? (sync/timeout 40 (proc-subprocess p)) (proc-subprocess p))
        (check-equal? (subprocess-status (proc-subprocess p)) 0)
        (check-true (file-exists? (build-path dir "log" "racket-app" "access.log")) "access log written")
        (wait-for-datagram ns ready (has-line? "STOPPING=1") 5 "STOPPING=1")
        (close-notify-socket! ns)))))))


(test-case "racket-app-activated: the manager takes systemd's socket (fd 3) and serves on it"
  (call-with-temp-dir
   "fcgi-sda"
   (λ (dir)
     (for ([d '("app" "run/racket-app-activated")]) (make-directory* (build-path dir d)))
     (display-to-file app-source (build-path dir "app" "app.rkt"))
     (define socket-unit (file->string (build-path units "racket-app-activated.socket")))
     (define listen-path (cadr (regexp-match #rx"(?m:^ListenStream=(.*)$)" socket-unit)))
     (define sock (path->string (build-path dir "run" (let-values ([(b n d) (split-path listen-path)]) n))))
     (define l (open-listener (parse-listen-address (string-append "unix:" sock))))
     (define start (relocate (unit-command (build-path units "racket-app-activated.service") "ExecStart") dir))
     ;; as systemd does: the socket on fd 3, LISTEN_FDS=1, LISTEN_PID the service's pid
     (define stdin (unsafe-file-descriptor->port (listener-fd l) 'listener '(read)))
     (define log (open-output-file (build-path dir "service.log")))
     (define-values (sp out in err)
       (subprocess log stdin log "/bin/sh" "-c"
                   (string-append "exec 3<&0 0</dev/null; LISTEN_PID=$$ LISTEN_FDS=1 exec "
                                  (string-join (map (λ (a) (string-append "'" a "'")) start)))))
     (close-output-port log)
     (dynamic-wind
      void
      (λ ()
        (define body
          (wait-until 60 "served on systemd's socket"
                      (λ () (with-handlers ([exn:fail? (λ (e) #f)])
                              (define-values (st hd b) (fastcgi-request (string-append "unix:" sock) #:uri "/" #:timeout 5))
                              b))))
        (check-equal? body #"from systemd\n")
        (send-signal! (subprocess-pid sp) SIGTERM)
        (check-equal? (sync/timeout 40 sp) sp)
        (check-equal? (subprocess-status sp) 0))
      (λ ()
        (when (eq? (subprocess-status sp) 'running) (subprocess-kill sp #t))
        (listener-close! l))))))
