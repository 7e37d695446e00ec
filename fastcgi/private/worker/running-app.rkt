#lang racket/base
;; A pool worker's running app (worker.rkt), and what the worker reports of it to its
;; manager: a heartbeat every second, and its counters (stat lines) and request metrics
;; when they change.
(require "../util/clock.rkt"
         (only-in "../engine/connection.rkt" queue-delay-ms)
         "../engine/request.rkt"
         "../engine/server.rkt"
         "../engine/wire.rkt"
         (only-in "../os/log-file.rkt" log-lines-dropped)
         "../status/metrics.rkt"
         "../util/table.rkt")
(provide (except-out (struct-out app) new-app)
         make-app
         app-server
         heartbeat
         report-loop
         report-stat!)

;; A running app: the server, its slow-request count and its log files; for a servlet
;; that keeps continuations in a pool of workers, the server on the worker's private socket
;; (relay.rkt) and the routed manager with the live-session count (a box, as of the last
;; sweep); the last stat line reported (a box); the request metrics (metrics.rkt) and how
;; many requests they had when last reported (a box).
(struct app (running slow access slow-log private sessions last-stat metrics last-observed)
  #:constructor-name new-app)

;; make-app : keyword ... -> app ; one that has reported nothing yet
(define (make-app #:running running #:slow slow #:access access #:slow-log slow-log
                  #:private private #:sessions sessions #:metrics metrics)
  (new-app running slow access slow-log private sessions (box #f) metrics (box 0)))
;; app-server : app -> server
(define (app-server a) (running-server-server (app-running a)))

;; heartbeat : (string any ... -> any) -> none
;; A line every second from a thread of its own, whatever the other threads do. It stops
;; exactly when the worker cannot serve: the process is frozen or stopped (SIGSTOP), or
;; the whole Racket VM is held by a foreign call made without #:blocking? (no Racket
;; thread runs until it returns). The manager replaces a worker that falls silent.
(define (heartbeat report!)
  (let loop ()
    (sleep 1)
    (report! 'beat)
    (loop)))

;; report-loop : app (or/c natural #f) (string any ... -> void) -> none
;; Every 0.1 s, the counters if they changed: cheap for the manager, prompt enough for
;; its process manager (idle or busy) and its status page. Requests are those handed to
;; the app (the server's own count); past max-requests, the worker asks to be replaced,
;; once. After a second with nothing changed and no handler running, it waits for the
;; next request instead (an idle worker then wakes only for the server's deadline sweep,
;; every deadline-sweep-ms).
(define (report-loop a max-requests report!)
  (define srv (app-server a))
  (let loop ([last #f] [asked? #f] [quiet 0])
    (if (< quiet 10)
        (sleep 0.1)
        (server-sleep-until-request! srv (λ () (zero? (unbox (server-running srv))))))
    (define now (report-stat! a report!))
    (define requests (car now))
    (define ask? (and max-requests (not asked?) (>= requests max-requests)))
    (when ask? (report! 'recycle #:why (format "after ~a requests (--max-requests)" requests)))
    (loop now (or asked? ask?) (if (and (equal? now last) (zero? (cadr now))) (add1 quiet) 0))))

;; report-stat! : app (string any ... -> void) -> list
;; The counters now; reported when they differ from the last ones reported.
(define (report-stat! a report!)
  (define srv (app-server a))
  (define oldest (oldest-request-ms srv))
  (define now (list (hash-ref (server-stats srv) 'requests 0) (unbox (server-running srv))
                    (hash-ref (server-stats srv) 'connections 0) (unbox (app-slow a))
                    (hash-ref (server-stats srv) 'shed 0)
                    (inexact->exact (round (queue-delay-ms srv)))
                    (let ([s (app-sessions a)]) (if s (unbox (cdr s)) 0))
                    (log-lines-dropped)
                    oldest))
  (define last (app-last-stat a))
  (unless (equal? now (unbox last))
    (set-box! last now)
    ;; the oldest request's age, in ms (0: none): the manager's clock is not this one
    (define age (if oldest (max 1 (inexact->exact (round (- (now-ms) oldest)))) 0))
    (apply (λ (requests active connections slow shed queue-delay sessions log-dropped _)
             (report! 'stat #:requests requests #:active active #:connections connections
                      #:slow slow #:shed shed #:queue-delay queue-delay #:sessions sessions
                      #:log-dropped log-dropped #:oldest-age-ms age))
           now))
  (define observed (metrics-observed (app-metrics a)))
  (unless (eqv? observed (unbox (app-last-observed a)))
    (set-box! (app-last-observed a) observed)
    (report! 'metrics #:counts (metrics->counts (app-metrics a))))
  now)

;; oldest-request-ms : server -> (or/c flonum #f)
;; When the oldest request of the server's connections began (this process's clock), or
;; #f when none is under way: what the manager's watchdog times from (manager-watch.rkt).
(define (oldest-request-ms srv)
  (for*/fold ([oldest #f]) ([c (in-list (table-values (server-connections srv)))]
                            [r (in-list (table-values (conn-requests c)))]
                            #:unless (eq? (fastcgi-request-state r) 'done))
    (define t (fastcgi-request-start-ms r))
    (if (or (not oldest) (< t oldest)) t oldest)))
