#lang racket/base
;; The manager (manager.rkt) under systemd's Type=notify (sd-notify.rkt): READY=1 once the
;; first generation serves, RELOADING=1 and READY=1 around each reload, STOPPING=1 when a
;; graceful stop begins, a STATUS= line while it runs, and WATCHDOG=1 at half of
;; WATCHDOG_USEC while the pool is healthy. A pool whose every worker is late (frozen,
;; stopped, blocked in a foreign call: manager-watch.rkt) withholds it, so that systemd
;; restarts a pool that is wholly stuck; a frozen manager sends nothing at all. Everything
;; runs from the manager's loop: notify-tick! after each of its events.
(require racket/string
         "../util/clock.rkt"
         "../util/log.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" notify)
         "../os/sd-notify.rkt")
(provide open-manager-notify!
         notify-tick!
         notify-reloading!
         notify-reload-settled!
         notify-stopping!
         close-manager-notify!
         first-generation-serves?)

;; The STATUS line is sent again when it changes, at most once per status-interval ms
;; (at once when the pool becomes stuck, or is no longer).
(define status-interval 1000.)

;; sd: the notifier; ready?: READY=1 was sent for the first generation; status: the last
;; STATUS text sent, status-ms when; watchdog-ms: the last WATCHDOG=1; frozen?: every
;; worker was late at the last look.
(struct notify (sd [ready? #:mutable] [status #:mutable] [status-ms #:mutable]
                   [watchdog-ms #:mutable] [frozen? #:mutable]))

;; open-manager-notify! : manager -> void ; from NOTIFY_SOCKET, before any worker starts
(define (open-manager-notify! m)
  (define sd (open-notifier))
  (when sd
    (log-fastcgi-info "systemd notify: NOTIFY_SOCKET ~a~a" (log-escape (notifier-address sd))
                      (if (notifier-watchdog-ms sd)
                          (format ", WATCHDOG=1 every ~a s" (/ (round (notifier-watchdog-ms sd)) 1000.))
                          ""))
    (set-manager-notify! m (notify sd #f #f -inf.0 -inf.0 #f))))

;; notify-tick! : manager flonum flonum -> void
;; After each event of the loop: READY=1 once the first generation serves, the STATUS line
;; when it changed, WATCHDOG=1 when the next tick (tick-ms away) would come too late (but
;; not more often than twice per interval, however short WATCHDOG_USEC is).
(define (notify-tick! m now tick-ms)
  (define n (manager-notify m))
  (when n
    (define sd (notify-sd n))
    (define stuck? (frozen? m))
    (define flipped? (not (eq? stuck? (notify-frozen? n))))
    (set-notify-frozen?! n stuck?)
    (when flipped?
      (if stuck?
          (log-fastcgi-error "every worker is late: the pool is stuck~a"
                             (if (notifier-watchdog-ms sd) "; systemd's watchdog is not fed" ""))
          (log-fastcgi-info "the pool is no longer stuck")))
    (cond
      [(and (not (notify-ready? n)) (first-generation-serves? m))
       (set-notify-ready?! n #t)
       (send-status! n m now "READY=1")]
      [(or flipped? (> (- now (notify-status-ms n)) status-interval))
       (unless (equal? (status-line m) (notify-status n)) (send-status! n m now))])
    (define every (notifier-watchdog-ms sd))
    (when (and every (not stuck?)
               (>= (- now (notify-watchdog-ms n)) (max (- every tick-ms) (/ every 2))))
      (set-notify-watchdog-ms! n now)
      (notify! sd "WATCHDOG=1"))))

;; notify-reloading! : manager -> void
;; A reload starts generation (manager-gen + 1), once the pool was ready (systemd
;; ignores a reload before it).
(define (notify-reloading! m)
  (define n (manager-notify m))
  (when (and n (notify-ready? n))
    (send-status! n m (now-ms) "RELOADING=1" (format "MONOTONIC_USEC=~a" (monotonic-usec))
                  #:prefix (format "reloading: generation ~a starting; " (add1 (manager-gen m))))))

;; notify-reload-settled! : manager -> void
;; The new generation serves, or the reload failed and the old one goes on serving (the
;; STATUS line says so): either way the service is ready again.
(define (notify-reload-settled! m)
  (define n (manager-notify m))
  (when (and n (notify-ready? n) (not (manager-stopping? m))) (send-status! n m (now-ms) "READY=1")))

;; notify-stopping! : manager -> void
(define (notify-stopping! m)
  (define n (manager-notify m))
  (when n (send-status! n m (now-ms) "STOPPING=1")))

;; close-manager-notify! : manager -> void
(define (close-manager-notify! m)
  (define n (manager-notify m))
  (when n (close-notifier! (notify-sd n))))

;; send-status! : notify manager flonum string ... [#:prefix string] -> void
;; These lines, then STATUS= with the status line (after prefix)
(define (send-status! n m now #:prefix [prefix ""] . lines)
  (define text (status-line m))
  (set-notify-status! n text)
  (set-notify-status-ms! n now)
  (apply notify! (notify-sd n) (append lines (list (string-append "STATUS=" prefix text)))))

;; first-generation-serves? : manager -> boolean
;; Every worker of the generation that serves is ready, none is still on its way from the
;; loader (a fork asked and not yet answered: manager-workers.rkt), and an ondemand pool's
;; idle workers may all have stopped since: the point from which a worker that dies no
;; longer ends the manager (manager-exits.rkt).
(define (first-generation-serves? m)
  (define ws (serving m (manager-gen m)))
  (and (not (manager-stopping? m))
       (manager-ever-ready? m)
       (zero? (pending-forks m (manager-gen m)))
       (andmap (λ (w) (eq? (worker-state w) 'ready)) ws)))

;; frozen? : manager -> boolean ; there are workers, and every one not stopping is late
(define (frozen? m)
  (define ws (filter (λ (w) (not (eq? (worker-state w) 'draining))) (live-workers m)))
  (and (pair? ws) (andmap (λ (w) (eq? (worker-late w) #t)) ws)))

;; status-line : manager -> string
;; "3 workers (2 idle, 1 busy), 120 requests served, generation 1", then what else holds:
;; starting, late and stopping workers, a reload under way, the last reload's failure, a stop.
(define (status-line m)
  (define ws (live-workers m))
  (define (count ok?) (for/sum ([w (in-list ws)]) (if (ok? w) 1 0)))
  (define (ready? w) (and (eq? (worker-state w) 'ready) (not (worker-late w))))
  (define late (count (λ (w) (and (worker-late w) (not (eq? (worker-state w) 'draining))))))
  (define starting (count (λ (w) (eq? (worker-state w) 'starting))))
  (define draining (count (λ (w) (eq? (worker-state w) 'draining))))
  (define requests (+ (hash-ref (manager-totals m) 'requests 0)
                      (for/sum ([w (in-list ws)]) (worker-requests w))))
  (define parts
    (list (format "~a worker~a (~a idle, ~a busy" (length ws) (if (= 1 (length ws)) "" "s")
                  (count (λ (w) (and (ready? w) (zero? (worker-active w)))))
                  (count (λ (w) (and (ready? w) (positive? (worker-active w))))))
          (if (positive? starting) (format ", ~a starting" starting) "")
          (if (positive? late) (format ", ~a late" late) "")
          (if (positive? draining) (format ", ~a stopping" draining) "")
          (format "), ~a requests served, generation ~a" requests (manager-gen m))
          (if (manager-reload-gen m)
              (format "; reloading: generation ~a ~a" (manager-reload-gen m)
                      (if (manager-canary m) "on trial through a canary" "starting"))
              "")
          (if (manager-last-reload-error m)
              (format "; last reload failed, generation ~a goes on serving: ~a" (manager-gen m)
                      (manager-last-reload-error m))
              "")
          (if (frozen? m) "; every worker is late: the pool is stuck" "")
          (if (manager-stopping? m) "; stopping: workers finish in-flight requests" "")))
  (one-line (apply string-append parts)))

;; one-line : string -> string ; no newline or NUL can end the datagram's line early
(define (one-line s) (string-normalize-spaces (regexp-replace* #rx"[\0-\37]" s " ")))
