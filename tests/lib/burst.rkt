#lang racket/base
;; Bursts of FastCGI requests for the load-shedding tests (server-test): from this process,
;; or from a process of their own (burst/process), as a front sends them. The server's
;; estimate of what a request costs counts its process's CPU outside the handlers
;; (engine/queue-delay.rkt), so a client in the server's own process has its work, 300
;; connections opened and read, charged to the server's requests; a front is always
;; another process.
(require compiler/find-exe
         racket/port
         racket/runtime-path
         "../../fastcgi/client.rkt")
(provide burst
         burst/process)

;; burst : address string natural [#:rate (or/c #f real)] -> (listof (cons status ms))
;; n requests, all at once or started at a fixed rate (open loop: a slow answer does not
;; delay the next start); a request that got no answer in 60 s is (cons #f ms)
(define (burst addr uri n #:rate [rate #f])
  (define results (make-vector n #f))
  (define t-start (current-inexact-milliseconds))
  (define ths
    (for/list ([i (in-range n)])
      (when rate
        (define due (+ t-start (* 1000.0 (/ i rate))))
        (sync (alarm-evt due)))
      (thread (λ ()
                (define t0 (current-inexact-milliseconds))
                (define status
                  (with-handlers ([exn:fail? (λ (e) #f)])
                    (define-values (status headers body)
                      (fastcgi-request addr #:uri uri #:timeout 60))
                    status))
                (vector-set! results i (cons status (- (current-inexact-milliseconds) t0)))))))
  (for-each thread-wait ths)
  (vector->list results))

(define-runtime-path this-module "burst.rkt")

;; burst/process : string string natural -> (listof (cons status ms))
;; The same burst, all at once, sent by a racket process of its own; addr as
;; fastcgi-request takes it ("unix:PATH" or "host:port").
(define (burst/process addr uri n)
  (define-values (p out in err)
    (subprocess #f #f #f (find-exe) (path->string this-module) addr uri (number->string n)))
  (close-output-port in)
  (define errors (make-channel))
  (thread (λ () (channel-put errors (port->string err))))
  (define results (read out))
  (subprocess-wait p)
  (close-input-port out)
  (define error-text (channel-get errors))
  (close-input-port err)
  (unless (and (zero? (subprocess-status p)) (list? results))
    (error 'burst/process "the client process failed (exit ~a): ~a"
           (subprocess-status p) error-text))
  results)

(module+ main
  (define args (current-command-line-arguments))
  (write (burst (vector-ref args 0) (vector-ref args 1) (string->number (vector-ref args 2)))))
