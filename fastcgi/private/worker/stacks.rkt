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
;; A forked worker's code was collected into the static generation (fork.rkt's
;; make-heap-static!), after which Racket CS gives its frames a source location but no
;; name: the name is then read from the source at that location (the procedure's own
;; define form), where the file is there to read.
(define (thread-stack t)
  (define sources (make-hash))
  (for/list ([frame (in-list (continuation-mark-set->context (continuation-marks t)))]
             [_ (in-range max-frames)])
    (define loc (cdr frame))
    (format "~a~a" (or (car frame) (and loc (source-name loc sources)) "?")
            (if (and loc (srcloc-source loc))
                (format " at ~a:~a" (srcloc-source loc) (or (srcloc-line loc) "?"))
                ""))))

;; source-name : srcloc hash -> (or/c string #f)
;; The name a define form at loc gives (define (NAME ...) or (define NAME ...)); sources:
;; the files read so far (path -> string or #f).
(define (source-name loc sources)
  (define src (srcloc-source loc))
  (define pos (srcloc-position loc))
  (define text (and (path? src) pos
                    (hash-ref! sources src
                               (λ () (with-handlers ([exn:fail? (λ (e) #f)])
                                       (call-with-input-file src (λ (in) (read-string 4000000 in))))))))
  (define m (and (string? text) (<= pos (string-length text))
                 (regexp-match #px"^\\((?:define|define/contract|define/public|define/private|define/override)\\s+\\(*([^\\s()\\[\\]{}\"]+)"
                               text (sub1 pos) (min (string-length text) (+ pos 200)))))
  (and m (cadr m)))

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
