#lang racket/base
;; The manager watches its workers: a worker that stops reporting (its whole VM blocked in
;; a foreign call, or stopped by SIGSTOP) shows as late on the status, then, past the
;; request timeout plus a grace, is killed and replaced; a request queued behind it is
;; answered by the new worker. Real `raco fastcgi serve` on a unix socket, requests
;; straight to the socket; every wait is bounded.
(require racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

;; /block calls libc's sleep through the FFI without #:blocking?: no Racket thread of the
;; worker runs until it returns. Every answer is the worker's pid.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require ffi/unsafe racket/os fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define c-sleep (get-ffi-obj \"sleep\" #f (_fun _uint -> _uint)))\n"
   "(define (fastcgi-handler r)\n"
   "  (when (equal? (fastcgi-param r \"REQUEST_URI\" #\"/\") #\"/block\") (c-sleep 60))\n"
   "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n~a\\n\" (getpid))\n"
   "                (fastcgi-request-stdout r)))\n"))

;; call-with-pool : ((-> hash) string proc -> any) -> any
;; One worker, a request timeout of 1 s; body gets the status reader, the address and
;; the manager's process.
(define (call-with-pool body)
  (call-with-served-app app-source '("--workers" "1" "--request-timeout" "1") #:name "fcgi-wd"
                        (λ (s)
                          (define (board) (or (read-status-file (served-status-file s)) (hasheq)))
                          (body board (served-address s) (served-proc s)))))

;; states : (-> hash) (listof string) -> (listof natural) ; pids of workers in these states
(define (states board wanted) (board-pids (board) wanted))

;; request-evt : string string natural -> evt
;; A request in a thread of its own; the evt gives (list status body) or the error message.
(define (request-evt address uri secs)
  (define ch (make-channel))
  (thread (λ () (channel-put ch (with-handlers ([exn:fail? exn-message])
                                  (define-values (st hd body) (fastcgi-request address #:uri uri #:timeout secs))
                                  (list st (string-trim (bytes->string/utf-8 body #\?)))))))
  ch)

;; check-replaced : (-> hash) natural evt proc -> void
;; The worker shows late, then a request queued behind it is answered by a new worker.
(define (check-replaced board old queued mgr)
  (wait-until 10 "the silent worker shows late" (λ () (equal? (states board '("late")) (list old))))
  (define r (sync/timeout 40 queued))
  (check-true (pair? r) (format "the queued request: ~s" r))
  (when (pair? r)
    (check-equal? (car r) 200)
    (check-not-equal? (string->number (cadr r)) old "answered by the new worker"))
  (check-false (process-alive? old) "the silent worker was killed")
  (check-equal? (hash-ref (board) 'unresponsive_kills #f) 1)
  (check-regexp-match #rx"sent nothing for [0-9]+ s \\(frozen, stopped, or blocked in a foreign call\\): killing it"
                      (file->string (proc-stderr-file mgr))))

(test-case "a worker blocked in a foreign call is late, then killed and replaced; the queued request is answered"
  (call-with-pool
   (λ (board address mgr)
     (define old (car (states board '("idle"))))
     (define blocked (request-evt address "/block" 60))
     (sleep 1)
     (define queued (request-evt address "/" 40))
     (check-replaced board old queued mgr)
     (define b (sync/timeout 5 blocked))
     (check-true (string? b) (format "the blocked request failed with its worker, it did not wait: ~s" b)))))

(test-case "a SIGSTOPped worker is late, then killed and replaced"
  (call-with-pool
   (λ (board address mgr)
     (define old (car (states board '("idle"))))
     (check-true (send-signal! old 19))   ; SIGSTOP
     (define queued (request-evt address "/" 40))
     (check-replaced board old queued mgr))))
