#lang racket/base
;; The running requests' stacks (manager-stacks.rkt's answer) as people read them, for
;; `raco fastcgi ctl stacks` and the status path's ?stacks (JSON: the answer as it is).
(require racket/string
         "../util/jsexpr.rkt"
         (only-in "../util/log.rkt" log-escape))
(provide render-stacks)

;; render-stacks : hash (or/c 'text 'json) -> bytes
(define (render-stacks answer fmt)
  (if (eq? fmt 'json)
      (bytes-append (jsexpr->bytes answer) #"\n")
      (string->bytes/utf-8 (stacks->text answer))))

;; stacks->text : hash -> string
(define (stacks->text answer)
  (define workers (hash-ref answer 'workers '()))
  (if (null? workers)
      "no worker\n"
      (string-append*
       (for/list ([w (in-list workers)])
         (define head (format "worker ~a (id ~a, generation ~a, ~a)" (hash-ref w 'pid "?")
                              (hash-ref w 'id "?") (hash-ref w 'generation "?") (hash-ref w 'state "?")))
         (define requests (hash-ref w 'requests '()))
         (cond
           [(not (hash-ref w 'answered #f))
            (format "~a: did not answer within 1 s (stopped, or busy in a foreign call)\n" head)]
           [(null? requests) (format "~a: no request running\n" head)]
           [else
            (string-append*
             (format "~a: ~a running\n" head (if (= 1 (length requests)) "1 request" (format "~a requests" (length requests))))
             (for/list ([r (in-list requests)])
               (string-append*
                (format "  request ~a ~a ~a from ~a, running for ~a s\n"
                        (hash-ref r 'id "?") (clean (hash-ref r 'method "-")) (clean (hash-ref r 'uri "-"))
                        (clean (hash-ref r 'peer "-"))
                        (/ (round (/ (hash-ref r 'age_ms 0) 100)) 10.0))
                (for/list ([f (in-list (hash-ref r 'stack '()))])
                  (format "    ~a\n" (clean f))))))])))))

;; clean : any -> string ; what a request or a stack says, its control characters escaped
;; (a URI is the client's: it must not drive the reader's terminal)
(define (clean v) (log-escape (if (string? v) v (format "~a" v))))
