#lang racket/base
;; What the tests that start `raco fastcgi serve` share: the raco they start it with, and
;; the status its manager writes next to its pid file (the status page's source: reading
;; it sends no request, which would wake or count on a worker).
(require json
         "../integration/lib.rkt")
(provide raco
         pid-file->status-file
         read-status-file
         board-pids
         run-program*)

;; raco : string ; the raco on PATH
(define raco (path->string (find-executable-path "raco")))

;; pid-file->status-file : path-string -> string ; PID-FILE.status.json
(define (pid-file->status-file pid-file)
  (string-append (if (path? pid-file) (path->string pid-file) pid-file) ".status.json"))

;; read-status-file : path-string -> (or/c jsexpr #f)
;; The status in the file; #f while there is none or it cannot be read.
(define (read-status-file file)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (call-with-input-file file read-json)))

;; board-pids : (or/c hash #f) (listof string) -> (listof natural)
;; The pids of the status's workers whose state is one of states, in the status's order.
(define (board-pids board states)
  (for/list ([w (in-list (if board (hash-ref board 'workers '()) '()))]
             #:when (member (hash-ref w 'state #f) states))
    (hash-ref w 'pid)))

;; run-program* : path (listof string) -> (values natural string string)
;; run-program (integration/lib.rkt) with its output as text
(define (run-program* prog args)
  (define-values (code out err) (run-program prog args #:timeout 50))
  (values code (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))
