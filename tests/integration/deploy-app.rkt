#lang racket/base
;; The app behind the deployment tests (deploy-nginx, haproxy, lighttpd, cluster), served
;; by `raco fastcgi serve` like any app. /info (and below) describes the request on one
;; line: the worker's pid, which FastCGI connection carried it and the most requests that
;; connection has had in flight at once (2 or more: the front multiplexes), FCGI_KEEP_CONN,
;; the CGI path params; with ?sleep=S it first sleeps S seconds (at most 5), so that requests
;; overlap. Every answer carries X-App-Host: $APP_HOST (the cluster's host name). Anything
;; else is a 404.
(require racket/os
         "../../fastcgi/main.rkt"
         ;; White box, for one figure only: which FastCGI connection carried a request.
         (only-in "../../fastcgi/private/engine/request.rkt" fastcgi-request-conn))
(provide fastcgi-handler)

(define host (or (getenv "APP_HOST") "-"))

;; Per FastCGI connection: its number (in order of first use), the requests in flight on
;; it, and the most ever in flight at once.
(struct conn-stats (number [live #:mutable] [peak #:mutable]))
(define conns (make-weak-hasheq))
(define conn-lock (make-semaphore 1))

;; request-started! : fastcgi-request -> conn-stats
(define (request-started! r)
  (call-with-semaphore
   conn-lock
   (λ ()
     (define s (hash-ref! conns (fastcgi-request-conn r)
                          (λ () (conn-stats (add1 (hash-count conns)) 0 0))))
     (set-conn-stats-live! s (add1 (conn-stats-live s)))
     (set-conn-stats-peak! s (max (conn-stats-peak s) (conn-stats-live s)))
     s)))

;; request-done! : conn-stats -> void
(define (request-done! s)
  (call-with-semaphore conn-lock (λ () (set-conn-stats-live! s (sub1 (conn-stats-live s))))))

;; route-path : fastcgi-request -> bytes
;; PATH_INFO when the front split the path (a prefix mount), else REQUEST_URI's path.
(define (route-path r)
  (define info (fastcgi-param r "PATH_INFO" #""))
  (if (positive? (bytes-length info))
      info
      (car (regexp-match #rx#"^[^?]*" (fastcgi-param r "REQUEST_URI" #"")))))

;; sleep-seconds : fastcgi-request -> real
(define (sleep-seconds r)
  (define m (regexp-match #rx#"(?:^|&)sleep=([0-9.]+)" (fastcgi-param r "QUERY_STRING" #"")))
  (define s (and m (string->number (bytes->string/latin-1 (cadr m)))))
  (if (real? s) (min s 5) 0))

;; param-text : fastcgi-request string -> string ; written with ~s, so a newline shows as \n
(define (param-text r name)
  (format "~s" (bytes->string/latin-1 (fastcgi-param r name #"-"))))

(define (fastcgi-handler r)
  (define out (fastcgi-request-stdout r))
  (cond
    [(regexp-match? #rx#"^/info(/|$)" (route-path r))
     (define stats (request-started! r))
     (sleep (sleep-seconds r))
     (request-done! stats)
     (write-string (format "Status: 200 OK\r\nContent-Type: text/plain\r\nX-App-Host: ~a\r\n\r\n" host) out)
     (write-string (format "pid=~a conn=~a peak=~a keep=~a script-name=~a path-info=~a uri=~a\n"
                           (getpid) (conn-stats-number stats) (conn-stats-peak stats)
                           (fastcgi-request-keep-conn? r)
                           (param-text r "SCRIPT_NAME") (param-text r "PATH_INFO")
                           (param-text r "REQUEST_URI"))
                   out)]
    [else
     (write-string (format "Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-App-Host: ~a\r\n\r\nnot found\n" host)
                   out)]))
