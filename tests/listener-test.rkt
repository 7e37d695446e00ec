#lang racket/base
;; fastcgi/private/transport/listener.rkt: an open listener, accepting (in threads of their own, at
;; the descriptor limit) and closing, and the length of its queue.
(require racket/file
         racket/tcp
         rackunit
         "../fastcgi/private/transport/transport.rkt"
         (only-in "../fastcgi/private/transport/listener.rkt" file-id lstat)
         "lib/transport.rkt")

(test-case "listener-accept blocks only its thread; close wakes it with an error"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define ticks 0)
  (define ticker (thread (lambda () (let loop () (set! ticks (add1 ticks)) (sleep 0.01) (loop)))))
  (define result (make-channel))
  (define acceptor
    (thread (lambda ()
              (channel-put result (with-handlers ([(lambda (e) #t) values])
                                    (listener-accept l))))))
  (sleep 0.3)
  (kill-thread ticker)
  (check-true (> ticks 10))
  (check-false (thread-dead? acceptor))
  (listener-close! l)
  (define e (sync/timeout 2 result))
  (check-true ((transport-error? #rx"is closed") e))
  (check-exn (transport-error? #rx"is closed") (lambda () (listener-accept l))))

(test-case "several threads accept on one listener"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define results (make-channel))
  (for ([i 3])
    (thread (lambda ()
              (define-values (i o peer) (listener-accept l))
              (define line (read-line i))
              (close-input-port i)
              (close-output-port o)
              (channel-put results line))))
  (define clients
    (for/list ([n 3])
      (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
      (write-string (format "client ~a\n" n) co)
      (flush-output co)
      (list ci co)))
  (check-equal? (sort (for/list ([n 3]) (sync/timeout 2 results)) string<?)
                '("client 0" "client 1" "client 2"))
  (for-each close-port (apply append clients))
  (listener-close! l))

(test-case "accept at the descriptor limit: logs, waits 0.1 s between tries, recovers"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define warnings
    (at-fd-limit
     (lambda (release!)
       (define acceptor (thread (lambda () (listener-accept l))))
       (sleep 0.35)
       (check-false (thread-dead? acceptor))
       (release!)
       (check-not-false (sync/timeout 2 acceptor)))))
  (check-true (<= 2 warnings 6) (format "~a warnings in 0.35 s" warnings))
  (close-input-port ci)
  (close-output-port co)
  (listener-close! l))

(test-case "listener-queue-length: connections waiting to be accepted on TCP; none known for unix"
  ;; the status page's listen_queue (manager-status.rkt); read from TCP_INFO, not /proc/net/tcp
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (check-equal? (listener-queue-length l) 0)
  (define clients
    (for/list ([i 3])
      (define-values (in out) (tcp-connect "127.0.0.1" (listener-port l)))
      (cons in out)))
  (sleep 0.1)                             ; the handshakes complete in the kernel
  (check-equal? (listener-queue-length l) 3)
  (define-values (fd peer) (listener-try-accept l))
  (check-true (exact-integer? fd))
  (socket-close! fd)
  (check-equal? (listener-queue-length l) 2)
  (for ([c (in-list clients)]) (close-input-port (car c)) (close-output-port (cdr c)))
  (listener-close! l)
  (check-false (listener-queue-length l) "closed")
  (define dir (make-temporary-file "fcgi-queue-~a" 'directory))
  (define u (open-listener (parse-listen-address (string-append "unix:" (path->string (build-path dir "q.sock"))))))
  (check-false (listener-queue-length u))
  (listener-close! u)
  (delete-directory/files dir))

(test-case "listener-try-accept: #f and 'again with nobody waiting, a connection's fd, 'closed after close"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define-values (fd0 why0) (listener-try-accept l))
  (check-equal? (list fd0 why0) '(#f again))
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define-values (fd peer)
    (let loop ([n 250])
      (define-values (fd why) (listener-try-accept l))
      (if (or fd (zero? n)) (values fd why) (begin (sleep 0.02) (loop (sub1 n))))))
  (check-true (exact-integer? fd))
  (check-equal? peer "127.0.0.1")
  ;; fd->ports: the connection as ports, named after the peer
  (define-values (si so) (fd->ports fd peer))
  (write-string "hi\n" co)
  (flush-output co)
  (check-equal? (read-line si) "hi")
  (check-equal? (object-name si) '127.0.0.1)
  (for-each close-port (list ci co si so))
  (listener-close! l)
  (define-values (fd2 why2) (listener-try-accept l))
  (check-equal? (list fd2 why2) '(#f closed)))

(test-case "a listener is closed when its custodian is shut down"
  (define cust (make-custodian))
  (define l (parameterize ([current-custodian cust])
              (open-listener (parse-listen-address "127.0.0.1:0"))))
  (custodian-shutdown-all cust)
  (define-values (fd why) (listener-try-accept l))
  (check-equal? why 'closed)
  (check-exn (transport-error? #rx"is closed") (λ () (listener-accept-fd l))))

(test-case "file-id and lstat: a file's device and inode, without following a link; #f when none"
  (define dir (make-temporary-file "fcgi-listener-~a" 'directory))
  (define f (build-path dir "f"))
  (call-with-output-file f void)
  (define st (file-or-directory-stat f))
  (check-equal? (file-id f) (cons (hash-ref st 'device-id) (hash-ref st 'inode)))
  (make-file-or-directory-link f (build-path dir "link"))
  (check-not-equal? (file-id (build-path dir "link")) (file-id f) "the link itself")
  (check-equal? (hash-ref (lstat f) 'inode) (hash-ref st 'inode))
  (check-false (file-id (build-path dir "none")))
  (check-false (lstat (build-path dir "none")))
  (delete-directory/files dir))
