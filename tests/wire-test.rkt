#lang racket/base
;; fastcgi/private/engine/wire.rkt: one connection's shared state and its single serialised
;; writer, over pipes (and once over a socket's descriptor): what conn-send! and
;; conn-send-records! put on the wire, the write deadline of a full connection, reads and
;; the wake, a broken connection, and the server's counters and sleepers.
(require racket/port
         rackunit
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         "../fastcgi/private/engine/wire.rkt"
         "integration/lib.rkt"
         "lib/pipe-conn.rkt"
         "lib/transport.rkt")

;; pipe-conn : [natural] -> (values conn input-port output-port)
(define (pipe-conn [limit #f]) (make-pipe-conn/ports #:limit limit))

(test-case "make-conn: no descriptor, a key of its own, nothing live"
  (define-values (a ai ao) (pipe-conn))
  (define-values (b bi bo) (pipe-conn))
  (check-false (conn-fd a))
  (check-not-equal? (conn-key a) (conn-key b))
  (check-false (conn-broken? a))
  (check-false (conn-deadline a))
  (check-false (conn-write-deadline a)))

(test-case "conn-send!: bs[start, end) in one write; #f without writing when still? says no"
  (define-values (c in out) (pipe-conn))
  (check-true (conn-send! c #"hello"))
  (check-true (conn-send! c #"..world.." 2 7))
  (check-false (conn-send! c #"late" 0 4 (λ () #f)) "the request has ended")
  (check-true (conn-send! c #"!" 0 1 (λ () #t)))
  (check-equal? (read-bytes 11 in) #"helloworld!"))

(test-case "conn-send-records!: k records, each a header and n bytes, nothing between them"
  (define-values (c in out) (pipe-conn))
  (check-true (conn-send-records! c #"HHHHHHH1HHHHHHH2HHHHHHH3" #"xxaaabbbccc" 2 3 3 #f))
  (check-equal? (read-bytes 33 in) #"HHHHHHH1aaaHHHHHHH2bbbHHHHHHH3ccc")
  (check-false (conn-send-records! c #"HHHHHHH1" #"a" 0 1 1 (λ () #f))))

(test-case "a full connection: the write deadline starts while it waits, and ends with the write"
  (define-values (c in out) (pipe-conn 16))
  (define big (make-bytes 100 65))
  (define writer (thread (λ () (conn-send! c big))))
  (check-not-false (wait-until 5 "the write deadline" (λ () (conn-write-deadline c))) "set while the write waits")
  (check-true (> (conn-write-deadline c) (now-ms)))
  (check-equal? (read-bytes 100 in) big)
  (check-not-false (sync/timeout 5 writer))
  (check-false (conn-write-deadline c) "cleared once the write is done"))

(test-case "conn-read!: the bytes once they come; conn-try-read!: 0 when none; the wake"
  (define-values (c in out) (pipe-conn))
  (define bs (make-bytes 8 0))
  (check-equal? (conn-try-read! c bs 0 8) 0)
  (define reader (thread (λ () (conn-read! c bs 2 8))))
  (sync/timeout 0.05 reader)
  (write-bytes #"abc" out)
  (flush-output out)
  (check-equal? (sync/timeout 5 (wrap-evt reader (λ (_) 'done))) 'done)
  (check-equal? (subbytes bs 2 5) #"abc")
  (define result (box #f))
  (define waiter (thread (λ () (set-box! result (conn-read! c bs 0 8 #t)))))
  (sync/timeout 0.05 waiter)
  (semaphore-post (conn-wake c))
  (sync/timeout 5 waiter)
  (check-equal? (unbox result) 'wake "a posted wake ends the wait"))

(test-case "conn-broken!: once; reads give eof, sends #f, the peer reads the end"
  (define-values (c in out) (pipe-conn))
  (define waiter (thread (λ () (conn-read! c (make-bytes 8) 0 8))))
  (conn-broken! c)
  (conn-broken! c)
  (check-true (conn-broken? c))
  (check-not-false (sync/timeout 0 (conn-broken-evt c)))
  (check-not-false (sync/timeout 5 waiter) "a blocked read wakes")
  (check-equal? (conn-read! c (make-bytes 8) 0 8) eof)
  (check-equal? (conn-try-read! c (make-bytes 8) 0 8) eof)
  (check-false (conn-input-pending? c))
  (check-false (conn-send! c #"x"))
  (check-equal? (port->bytes in) #"" "closed: the peer reads eof"))

(test-case "make-fd-conn: the connection owns the descriptor; its custodian's shutdown cuts it"
  (call-with-accepted-fd
   (λ (fd pin pout)
     (define dup (c-dup fd))                    ; the fixture closes fd; the conn owns dup
     (define cust (make-custodian))
     (define c (parameterize ([current-custodian cust]) (make-fd-conn dup "unix" (make-server void))))
     (check-equal? (conn-fd c) dup)
     (check-true (conn-send! c #"over fd"))
     (check-equal? (read-bytes 7 pin) #"over fd")
     (write-bytes #"x" pout)
     (flush-output pout)
     (check-not-false (wait-until 5 "pending input" (λ () (conn-input-pending? c))))
     (custodian-shutdown-all cust)
     (check-true (conn-broken? c))
     (check-false (link-exists? (format "/proc/self/fd/~a" dup)) "closed"))))

(test-case "counter-add!: atomic across threads"
  (define b (box 0))
  (for-each thread-wait (for/list ([i 8]) (thread (λ () (for ([j 1000]) (counter-add! b 1))))))
  (check-equal? (unbox b) 8000)
  (check-equal? (counter-add! b -8000) 0))

(test-case "the server's sleepers: registered only while idle, woken by the next request"
  (define srv (make-server void))
  (define s1 (make-semaphore 0))
  (check-false (server-on-next-request! srv s1 (λ () #f)) "not idle: nothing registered")
  (check-true (server-on-next-request! srv s1 (λ () #t)))
  (define sleeper (thread (λ () (server-sleep-until-request! srv (λ () #t)))))
  (check-false (sync/timeout 0.05 sleeper))
  (server-wake-sleepers! srv)
  (check-not-false (sync/timeout 5 sleeper))
  (check-true (semaphore-try-wait? s1))
  (server-wake-sleepers! srv)
  (check-false (semaphore-try-wait? s1) "woken once")
  (check-not-false (sync/timeout 5 (thread (λ () (server-sleep-until-request! srv (λ () #f)))))
                   "not idle: no wait"))
