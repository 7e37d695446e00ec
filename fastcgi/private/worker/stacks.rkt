#lang racket/base
;; What a worker's running requests are doing now: each one's id, method and URI, age, and
;; its handler thread's current stack, taken without stopping it (continuation-marks of
;; another thread; procedure names with source locations where Racket has them). For
;; `raco fastcgi ctl stacks` and the status path's ?stacks (the manager asks each worker:
;; manager-reports.rkt), and for the slow log's stack (request-watch.rkt).
(require "../util/clock.rkt"
         "../util/table.rkt"
         "../engine/request.rkt"
         "../engine/wire.rkt")
(provide thread-stack
         running-stacks)

;; How many frames of a stack are shown.
(define max-frames 30)

;; thread-stack : thread -> (listof string)
;; Its frames now, innermost first: "name at file:line", "name", or "? at file:line".
(define (thread-stack t)
  (for/list ([frame (in-list (continuation-mark-set->context (continuation-marks t)))]
             [_ (in-range max-frames)])
    (format "~a~a" (or (car frame) "?")
            (let ([loc (cdr frame)])
              (if (and loc (srcloc-source loc))
                  (format " at ~a:~a" (srcloc-source loc) (or (srcloc-line loc) "?"))
                  "")))))

;; running-stacks : server -> (listof hash)
;; Each request whose handler runs, oldest first: id, method, uri, peer, age_ms, stack
;; (the tables change under the scan: what was read so far).
(define (running-stacks srv)
  (define now (now-ms))
  (define found
    (with-handlers ([exn:fail? (λ (e) '())])
      (for*/list ([c (in-list (table-values (server-connections srv)))]
                  [r (in-list (table-values (conn-requests c)))]
                  #:when (let ([t (fastcgi-request-handler r)]) (and t (not (thread-dead? t)))))
        r)))
  (for/list ([r (in-list (sort found < #:key fastcgi-request-start-ms))])
    (hasheq 'id (fastcgi-request-id r)
            'method (text (request-param r #"REQUEST_METHOD"))
            'uri (text (or (request-param r #"REQUEST_URI") (request-param r #"SCRIPT_NAME")))
            'peer (fastcgi-request-peer r)
            'age_ms (max 0 (inexact->exact (round (- now (fastcgi-request-start-ms r)))))
            'stack (thread-stack (fastcgi-request-handler r)))))

;; text : (or/c bytes #f) -> string
(define (text b) (if b (bytes->string/utf-8 b #\?) "-"))
