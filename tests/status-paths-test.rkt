#lang racket/base
;; fastcgi/private/worker/status-paths.rkt: the answers a worker makes itself, before its app, on
;; requests over pipes (tests/lib/pipe-conn.rkt): the ping path, the status path in each
;; format (503 before any board), everything else to the app; and the board of a
;; single-process server. (The pool's board rendered: pool-status-test; the paths in
;; `raco fastcgi serve`: manager-test.)
(require json
         racket/os
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/util/clock.rkt"
         "../fastcgi/private/worker/config.rkt"
         (only-in "../fastcgi/private/engine/request.rkt" request-finish!)
         "../fastcgi/private/worker/status-paths.rkt"
         "../fastcgi/private/engine/wire.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

;; app : fastcgi-request -> void
(define (app r) (write-bytes (bytes-append ok-head #"the app") (fastcgi-request-stdout r)))

;; answer : handler (listof (cons string string)) -> bytes ; the CGI answer to these params
(define (answer h ps)
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:params ps))
  (h r)
  (request-finish! r 0 'request-complete)
  (answer-stdout (peer-answer p 1)))

(define board (hasheq 'pool "app" 'pm "static" 'workers '()))

(test-case "no status path and no ping path: the app's own handler, unwrapped"
  (check-eq? (wrap-status-paths app #:status-path #f #:ping-path #f #:board (λ () board)) app))

(test-case "the ping path: pong, never cached; its query does not matter; SCRIPT_NAME without REQUEST_URI"
  (define h (wrap-status-paths app #:status-path "/status" #:ping-path "/ping" #:board (λ () board)))
  (for ([ps (list (params "REQUEST_URI" "/ping") (params "REQUEST_URI" "/ping?full")
                  (params "SCRIPT_NAME" "/ping"))])
    (define a (answer h ps))
    (check-equal? (cgi-status a) 200)
    (check-equal? (cgi-header a "Cache-Control") "no-store")
    (check-equal? (cgi-header a "Content-Type") "text/plain")
    (check-equal? (cgi-body a) #"pong\n")))

(test-case "the status path: the board in the query's format, never cached"
  (define h (wrap-status-paths app #:status-path "/status" #:ping-path #f #:board (λ () board)))
  (define j (answer h (params "REQUEST_URI" "/status" "QUERY_STRING" "json")))
  (check-equal? (cgi-header j "Content-Type") "application/json")
  (check-equal? (cgi-header j "Cache-Control") "no-store")
  (check-equal? (bytes->jsexpr (cgi-body j)) (hasheq 'pool "app" 'pm "static" 'workers '()))
  (for ([q '("" "html" "openmetrics")]
        [type '("text/plain; charset=utf-8" "text/html; charset=utf-8"
                "application/openmetrics-text; version=1.0.0; charset=utf-8")])
    (check-equal? (cgi-header (answer h (params "REQUEST_URI" (string-append "/status?" q) "QUERY_STRING" q))
                              "Content-Type")
                  type q)))

(test-case "the status path before the manager has a board: 503"
  (define h (wrap-status-paths app #:status-path "/status" #:ping-path "/ping" #:board (λ () #f)))
  (check-equal? (cgi-status (answer h (params "REQUEST_URI" "/status"))) 503))

(test-case "every other path, and a path that only starts like one: the app"
  (define h (wrap-status-paths app #:status-path "/status" #:ping-path "/ping" #:board (λ () board)))
  (for ([uri '("/" "/status/x" "/pingx" "/app?/ping")])
    (check-equal? (cgi-body (answer h (params "REQUEST_URI" uri))) #"the app" uri))
  (check-equal? (cgi-body (answer h '())) #"the app" "no path at all"))

(test-case "single-board: a single-process server's status, from its counters"
  (define-values (c p) (make-pipe-conn))
  (define srv (conn-server c))
  (hash-set! (server-stats srv) 'requests 7)
  (hash-set! (server-stats srv) 'connections 3)
  (hash-set! (server-stats srv) 'shed 2)
  (define cfg (make-serve-config #:app "/srv/site/app.rkt" #:listen "127.0.0.1:9000"))
  (define b (single-board srv cfg (- (now-ms) 5000)))
  (check-equal? (for/list ([k '(pool pm listen master_pid requests accepted_connections shed_requests
                                    total_workers active_workers idle_workers)])
                  (hash-ref b k))
                (list "app.rkt" "single" "127.0.0.1:9000" (getpid) 7 3 2 1 0 1))
  (check-true (<= 4 (hash-ref b 'uptime) 6))
  (define w (car (hash-ref b 'workers)))
  (check-equal? (list (hash-ref w 'pid) (hash-ref w 'state) (hash-ref w 'requests) (hash-ref w 'active))
                (list (getpid) "idle" 7 0))
  (check-true (exact-positive-integer? (hash-ref w 'memory)) "VmRSS, in bytes")
  (set-box! (server-running srv) 1)
  (define busy (single-board srv (make-serve-config #:app "/a.rkt") (now-ms)))
  (check-equal? (list (hash-ref busy 'listen) (hash-ref busy 'active_workers)
                      (hash-ref (car (hash-ref busy 'workers)) 'state))
                '("inherited" 1 "busy"))
  (check-true (jsexpr? b) "written as JSON"))
