#lang racket/base
;; fastcgi/private/transport/socket-io.rkt: reading and writing an accepted connection's
;; descriptor: what a read returns (bytes, none now, eof), writes, records in one call,
;; unread input, the half-close and the close.
(require racket/port
         racket/tcp
         rackunit
         "../fastcgi/private/transport/transport.rkt"
         "integration/lib.rkt"
         "lib/transport.rkt")

(test-case "socket-shutdown-write!: the peer reads EOF and can still send"
  (define l (open-listener (parse-listen-address "127.0.0.1:0")))
  (define-values (ci co) (tcp-connect "127.0.0.1" (listener-port l)))
  (define-values (si so peer) (listener-accept l))
  (write-string "bye" so)
  (socket-shutdown-write! so)
  (check-equal? (port->string ci) "bye")
  (write-string "more\n" co)
  (flush-output co)
  (check-equal? (read-line si) "more")
  (socket-shutdown-write! so)
  (for-each close-port (list ci co si so))
  (socket-shutdown-write! so)
  (listener-close! l))


;; read-until : fd bytes -> (or/c natural eof exn) ; the first read that is not 0 (bounded)
(define (read-until fd bs)
  (wait-until 5 "the socket has something to read"
              (λ () (define r (socket-read! fd bs 0 (bytes-length bs))) (and (not (eqv? r 0)) r))))

(test-case "socket-read!: 0 while nothing came, the bytes once they do, then eof"
  (call-with-accepted-fd
   (λ (fd pin pout)
     (define bs (make-bytes 16 0))
     (check-equal? (socket-read! fd bs 0 16) 0 "nothing sent yet: 0, not a wait")
     (check-false (socket-input-pending? fd))
     (write-bytes #"hello" pout)
     (flush-output pout)
     (check-true (wait-until 5 "pending" (λ () (socket-input-pending? fd))) "the bytes wait unread")
     (check-equal? (socket-read! fd bs 10 16) 5 "into bs[10, 16)")
     (check-equal? (subbytes bs 10 15) #"hello")
     (check-equal? (subbytes bs 0 10) (make-bytes 10 0) "nothing written before start")
     (check-false (socket-input-pending? fd) "all read")
     (write-bytes #"abcdef" pout)
     (flush-output pout)
     (check-true (wait-until 5 "pending" (λ () (socket-input-pending? fd))))
     (check-equal? (socket-read! fd bs 0 4) 4 "no more than end - start")
     (check-equal? (subbytes bs 0 4) #"abcd")
     (check-equal? (read-until fd bs) 2)
     (close-output-port pout)
     (check-equal? (read-until fd bs) eof "the peer's half-close"))))

(test-case "socket-write!: bs[start, end) reaches the peer; a gone peer is an error, not SIGPIPE"
  (call-with-accepted-fd
   (λ (fd pin pout)
     (check-equal? (socket-write! fd #"..hello.." 2 7) 5)
     (check-equal? (read-bytes 5 pin) #"hello")
     (close-input-port pin)
     (close-output-port pout)
     (define r (for/or ([i 1000])
                 (define r (socket-write! fd (make-bytes 4096 65) 0 4096))
                 (and (not (exact-integer? r)) r)))
     (check-pred exn:fail:fastcgi:transport? r)
     (check-regexp-match #rx"^fastcgi: write: " (exn-message r)))))

(test-case "socket-write-records!: k records, each a header and n bytes, in one call"
  (check-true (exact-positive-integer? sendrecs-max))
  (call-with-accepted-fd
   (λ (fd pin pout)
     (define heads #"HHHHHHH1HHHHHHH2")
     (define n (socket-write-records! fd heads 0 #"xxaaaabbbb" 2 4 2))
     ;; 0 means the caller goes on record by record (no sendmsg here); else all 24 left
     (check-not-false (memv n '(0 24)) (format "~a" n))
     (when (= n 24)
       (check-equal? (read-bytes 24 pin) #"HHHHHHH1aaaaHHHHHHH2bbbb")))))

(test-case "socket-shutdown-write! and socket-close! on a descriptor"
  (call-with-accepted-fd
   (λ (fd pin pout)
     (socket-write! fd #"last" 0 4)
     (socket-shutdown-write! fd)
     (check-equal? (port->bytes pin) #"last" "the peer reads eof after the bytes")
     (write-bytes #"still" pout)
     (flush-output pout)
     (check-equal? (read-until fd (make-bytes 8)) 5 "and can still send")
     (define dup (c-dup fd))
     (check-true (link-exists? (format "/proc/self/fd/~a" dup)))
     (socket-close! dup)
     (check-false (link-exists? (format "/proc/self/fd/~a" dup)) "closed"))))
