#lang racket/base
;; handover.rkt: a connection's socket passed to another receiver (SCM_RIGHTS) keeps
;; working there, with its peer, the bytes read of it so far and its deadline's state; a
;; receiver of another user is never sent one. (The servers' side, that the receiver
;; enforces that deadline, is tests/handover-deadlines-test.rkt; the pool-level behaviour,
;; reloads and recycles under a front, is tests/integration/lossless-test.rkt.)
(require racket/file
         racket/os
         racket/port
         racket/runtime-path
         racket/unix-socket
         rackunit
         "../fastcgi/private/os/handover.rkt"
         "../fastcgi/private/transport/transport.rkt"
         "integration/lib.rkt")

(define-runtime-path handover-module "../fastcgi/private/os/handover.rkt")
(define setpriv (path->string (require-program! "/usr/bin/setpriv" "util-linux")))
(define racket-exe (path->string (find-executable-path "racket")))

;; an id no other test run uses: the names are (manager pid, worker id)
(define (fresh-address) (handover-address (format "fcgi-test-~a" (getpid)) (+ 1000000 (random 1000000000))))

;; call-with-accepted : path (fd input-port output-port -> any) -> any
;; A connection over a unix socket in dir: the accepted end's fd, and the client's ports.
(define (call-with-accepted dir proc)
  (define path (path->string (build-path dir "s.sock")))
  (define l (open-listener (parse-listen-address (string-append "unix:" path))))
  (define-values (client-in client-out) (unix-socket-connect path))
  (define-values (fd peer) (listener-accept-fd l))
  (begin0 (proc fd client-in client-out)
          (close-output-port client-out)
          (close-input-port client-in)
          (listener-close! l)))

(test-case "a socket handed over keeps working at the receiver, with its peer, bytes and deadline"
  (call-with-temp-dir
   "fcgi-handover"
   (λ (dir)
    (call-with-accepted dir (λ (fd client-in client-out)
     (define got (make-channel))
     (define address (fresh-address))
     (define receiver (start-handover-receiver! address (λ (fd peer h) (channel-put got (list fd peer h)))))
     (check-true (thread? receiver))
     (define h (handed #"\1\2\3partial" 'read 1234 #t #f))
     (check-true (hand-over! fd "peer-of-test" h (list (fresh-address) address))
                 "the first address has no receiver: the second takes it")
     ;; this process's copy is closed, as a retiring worker closes its own
     (socket-close! fd)
     (define r (sync/timeout 5 got))
     (check-true (list? r) "the receiver got it")
     (check-equal? (cadr r) "peer-of-test")
     (check-equal? (caddr r) h)
     ;; what the client sends reaches the new owner, and its answer the client
     (write-string "ping\n" client-out)
     (flush-output client-out)
     (define-values (in out) (fd->ports (car r) "unix"))
     (check-equal? (read-line in) "ping")
     (write-string "pong\n" out)
     (flush-output out)
     (check-equal? (sync/timeout 5 (read-line-evt client-in)) "pong")
     (close-output-port out)
     (close-input-port in)
     (kill-thread receiver))))))

(test-case "what a connection awaits, its ms left and its flags arrive as sent"
  (define got (make-channel))
  (define address (fresh-address))
  (define receiver (start-handover-receiver! address (λ (fd peer h) (socket-close! fd) (channel-put got h))))
  (call-with-temp-dir
   "fcgi-handover"
   (λ (dir)
     (for ([h (list (handed #"" 'first-byte 2999 #f #f)
                    (handed #"\1\6" 'first-byte 0 #f #f)   ; passed: closed at the next sweep
                    (handed #"" 'idle 120000 #t #t)
                    (handed (make-bytes 20000 7) 'read 30000 #t #t)
                    (handed #"" 'idle #f #t #f)            ; that timeout off where it was
                    (handed #"" #f #f #t #t)
                    ;; past what 4 bytes hold: held at 49 days
                    (handed #"" 'idle (expt 2 40) #t #t))])
       (call-with-accepted dir (λ (fd client-in client-out)
         (check-true (hand-over! fd (make-string 2000 #\p) h (list address)))
         (socket-close! fd)
         (define r (sync/timeout 5 got))
         (check-equal? r (if (equal? (handed-left-ms h) (expt 2 40))
                             (struct-copy handed h [left-ms (- (expt 2 32) 2)])
                             h)))))))
  (kill-thread receiver))

(test-case "no receiver at all: not handed over"
  (call-with-temp-dir
   "fcgi-handover"
   (λ (dir)
     (call-with-accepted dir (λ (fd client-in client-out)
       (check-false (hand-over! fd "p" (handed #"" 'idle 1000 #t #t) (list (fresh-address) (fresh-address))))
       (socket-close! fd))))))

(test-case "a name another user holds is never sent a connection"
  (call-with-temp-dir
   "fcgi-handover"
   (λ (dir)
     (define address (fresh-address))
     (define expr
       (format "(require (file ~s)) (void (start-handover-receiver! ~s (λ (fd peer h) (displayln \"got one\") (flush-output)))) (displayln \"listening\") (flush-output) (sleep 30)"
               (path->string handover-module) address))
     (call-with-process
      "nobody" setpriv (list "--reuid=65534" "--regid=65534" "--clear-groups" racket-exe "-e" expr)
      #:dir dir #:stdout-pipe? #t
      (λ (p)
        (check-equal? (read-line/timeout (proc-stdout p) 60 "nobody's receiver") "listening")
        (call-with-accepted dir (λ (fd client-in client-out)
          (check-false (hand-over! fd "p" (handed #"" 'idle 1000 #t #t) (list address))
                       "refused: the receiver is nobody's")
          (socket-close! fd)
          (check-false (sync/timeout 1 (read-line-evt (proc-stdout p))) "nobody got nothing"))))))))
