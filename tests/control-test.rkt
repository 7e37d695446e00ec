#lang racket/base
;; fastcgi/private/worker/control.rkt: what the manager and its workers share with no file: the
;; names of their private sockets, the keys line, the board asked for and answered (over
;; a real private socket of this process), and a --secret-file's secret.
(require racket/file
         racket/os
         rackunit
         "../fastcgi/private/worker/control.rkt"
         "../fastcgi/private/transport/transport.rkt")

(test-case "the keys line and relay names"
  (define-values (in out) (make-pipe))
  (write-keys! out (bytes 1 2 255) (bytes 16 32))
  (define-values (secret key) (read-keys in 1))
  (check-equal? (list secret key) (list (bytes 1 2 255) (bytes 16 32)))
  (check-exn #rx"did not start with its keys" (λ () (read-keys (open-input-string "hello\n") 1)))
  (check-exn #rx"did not start with its keys" (λ () (let-values ([(i o) (make-pipe)]) (read-keys i 0.1))))
  (define a (relay-name "p" #"key-1" 7))
  (check-regexp-match #px"^p/w7-[0-9a-f]{16}$" a)
  (check-equal? (relay-name "p" #"key-1" 7) a "the same for every worker of the pool")
  (check-not-equal? (relay-name "p" #"key-2" 7) a "unknown without the pool's key"))

(test-case "make-pool-prefix and control-name: fastcgi-PID-RANDOM, a new one each time"
  (define a (make-pool-prefix 42))
  (check-regexp-match #px"^fastcgi-42-[0-9a-f]{16}$" a)
  (check-not-equal? (make-pool-prefix 42) a)
  (check-equal? (control-name "p") "p/control"))

(test-case "answer-board! and ask-board: the keys line, then the board as one line of JSON"
  (define name (string-append (make-pool-prefix (getpid)) "/control"))
  (define l (open-private-listener name))
  (define (serve-one board)
    (thread (λ ()
              (define-values (in out peer) (listener-accept l))
              (write-keys! out #"0123456789abcdef" #"k")
              (check-equal? (read-line in) "board" "the worker asks with one word")
              (answer-board! out board)
              (close-output-port out)
              (close-input-port in))))
  (define t (serve-one (hasheq 'pool "app" 'workers '())))
  (check-equal? (ask-board name 5) (hasheq 'pool "app" 'workers '()))
  (thread-wait t)
  (define t2 (serve-one #f))
  (check-false (ask-board name 5) "null before the first board")
  (thread-wait t2)
  (define-values (in out) (make-pipe))
  (answer-board! out #f)
  (check-equal? (read-line in) "null")
  (listener-close! l)
  (check-false (ask-board name 1) "nothing listening"))

(test-case "read-secret: the file's bytes less trailing white space, at least 16"
  (define f (make-temporary-file "fcgi-secret-~a"))
  (call-with-output-file f #:exists 'truncate (λ (o) (write-bytes #"0123456789abcdef \n\t\n" o)))
  (check-equal? (read-secret f) #"0123456789abcdef")
  (call-with-output-file f #:exists 'truncate (λ (o) (write-bytes #"short secret   \n" o)))
  (check-exn (λ (e) (and (exn:fail:user? e)
                         (regexp-match? #rx"--secret-file .*: the secret must have at least 16 bytes"
                                        (exn-message e))))
             (λ () (read-secret f)))
  (call-with-output-file f #:exists 'truncate void)
  (check-exn exn:fail:user? (λ () (read-secret f)) "an empty file")
  (delete-file f))
