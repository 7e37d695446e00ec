#lang racket/base
;; The event loop (poller.rkt, connection.rkt): one thread reads every connection on a
;; socket, so nothing one connection does may hold up the others. Each test makes one
;; connection block the loop's way in one place (a handler that waits, a body its handler
;; does not read, a peer that does not read its answer, a peer that never stops sending,
;; the write lock held by a handler thread), checks that a request on another connection
;; is answered meanwhile, and then that the first connection's own exchange completes.
(require racket/file
         racket/port
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/raw-peer.rkt")

(define-values (report! next-event) (make-event-log))
(define gate (make-semaphore 0))
(define big (make-bytes (* 8 1024 1024) 120))

(define (handler r)
  (define out (fastcgi-request-stdout r))
  (case (bytes->string/utf-8 (fastcgi-param r "MODE" #"hello"))
    [("hello") (write-bytes ok-head out) (write-bytes #"hello" out)]
    [("wait")                             ; an inline handler that blocks
     (report! 'waiting)
     (define got? (sync/timeout 10 gate))
     (write-bytes ok-head out)
     (write-bytes (if got? #"released" #"timed out") out)]
    [("read-late")                        ; reads its body only once released
     (report! 'reading-late)
     (sync/timeout 10 gate)
     (define n (let loop ([n 0])
                 (define bs (read-bytes 65536 (fastcgi-request-stdin r)))
                 (if (eof-object? bs) n (loop (+ n (bytes-length bs))))))
     (write-bytes ok-head out)
     (write-bytes (string->bytes/utf-8 (number->string n)) out)]
    [("big") (write-bytes ok-head out) (write-bytes big out)]
    [else (error 'handler "unknown mode")]))

(define (get id mode #:stdin [stdin #""] #:length [len #f])
  (request-bytes id #:params (if len
                                 (params "MODE" mode "CONTENT_LENGTH" (number->string len))
                                 (params "MODE" mode))
                 #:stdin stdin))

;; answered-meanwhile : path -> void ; another connection gets its answer at once
(define (check-answered-meanwhile path what)
  (with-peer path
    (λ (q)
      (define t0 (current-inexact-milliseconds))
      (q-send-hello q)
      (define a (peer-answer q 1 5))
      (check-status a 200)
      (define ms (- (current-inexact-milliseconds) t0))
      (printf "poller-test: ~a: another connection answered in ~a ms\n" what (round ms))
      ;; a loop held up would answer only once the test releases it (after 5 s: a timeout)
      (check-true (< ms 2000) (format "~a: the other connection waited ~a ms" what ms)))))

(define (q-send-hello q) (peer-send! q (get 1 "hello")))

(call-with-server
 handler
 #:limits (make-limits #:stdin-buffer 16384 #:idle-timeout 1)
 (λ (path)
   (test-case "a handler that waits does not hold up the other connections"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "wait"))
         (check-equal? (next-event) 'waiting)
         (check-answered-meanwhile path "handler waits")
         (semaphore-post gate)
         (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"released")
         (peer-send! p (get 2 "hello"))
         (check-status (peer-answer p 2) 200))))

   (test-case "a body its handler does not read yet does not hold up the loop"
     (with-peer path
       (λ (p)
         ;; 1 MiB against a 16 KiB stdin buffer: the reader has to wait for the handler
         (define body (make-bytes (* 1024 1024) 97))
         (define sender
           (thread (λ () (peer-send! p (get 1 "read-late" #:stdin body #:length (bytes-length body))))))
         (check-equal? (next-event) 'reading-late)
         (sleep 0.2)
         (check-answered-meanwhile path "body not read")
         (semaphore-post gate)
         (check-equal? (cgi-body (answer-stdout (peer-answer p 1 10)))
                       (string->bytes/utf-8 (number->string (bytes-length body))))
         (thread-wait sender)
         (peer-send! p (get 2 "hello"))
         (check-status (peer-answer p 2) 200))))

   (test-case "a peer that does not read its answer does not hold up the loop"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "big"))
         (sleep 0.3)                      ; the answer fills the socket buffers and waits
         (check-answered-meanwhile path "answer not read")
         (define a (peer-answer p 1 10))
         (check-equal? (bytes-length (cgi-body (answer-stdout a))) (bytes-length big))
         (peer-send! p (get 2 "hello"))
         (check-status (peer-answer p 2) 200))))

   (test-case "a peer that sends without pause does not keep the loop from the others"
     (with-peer path
       (λ (p)
         ;; GET_VALUES records, 10 MiB of them, as fast as the socket takes them; the
         ;; answers are read by a thread so that the server never waits on this peer
         (define one (record->bytes 'get-values 0 (pairs->bytes '((#"FCGI_MPXS_CONNS" . #"")))))
         (define chunk (apply bytes-append (for/list ([i (in-range 1000)]) one)))
         (define sender
           (thread (λ () (for ([i (in-range (quotient (* 10 1024 1024) (bytes-length chunk)))])
                           (peer-send! p chunk)))))
         (define results 0)
         (define drainer
           (thread (λ () (let loop ()
                           (define r (peer-read-record p 5))
                           (when (record? r)
                             (set! results (add1 results))
                             (loop))))))
         (sleep 0.2)
         (check-answered-meanwhile path "peer floods")
         (thread-wait sender)
         (sync/timeout 20 (thread-dead-evt drainer))
         (printf "poller-test: the flooding peer got ~a GET_VALUES_RESULT records\n" results)
         (check-true (> results 0)))))

   (test-case "a parked connection is closed at the idle timeout"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "hello"))
         (check-status (peer-answer p 1) 200)
         (check-true (peer-eof? p 4) "closed after the 1 s idle timeout"))))))

(test-case "a stopped server leaves no descriptor behind (its epoll set is closed)"
  (define (fds) (length (directory-list "/proc/self/fd")))
  (define (start-stop)
    (call-with-server handler (λ (path)
                                (with-peer path (λ (p)
                                                  (peer-send! p (get 1 "hello"))
                                                  (check-status (peer-answer p 1) 200))))))
  (start-stop)
  (define before (fds))
  (for ([i (in-range 20)]) (start-stop))
  (check-equal? (fds) before "descriptors after 20 servers started and stopped"))

(test-case "the loop's lease: a thread that wakes on a timer still runs once the loop is idle"
  ;; The loop may wait in epoll_wait itself, where no other thread of the process runs
  ;; (poller.rkt, run-loop), but only for a few milliseconds at a time. A client in another
  ;; process sends 4 bursts of 100 requests 3 ms apart, each followed by 2 s with its
  ;; connection open and idle. Between two requests of a burst every thread here mostly
  ;; waits (the server's inline watcher wakes every 10 ms), so the loop takes a lease after
  ;; most. A thread here ticks every 0.2 s for 10 s: no two ticks may be far apart. (With
  ;; no bound on the wait, the loop held the process from the end of a burst to the next
  ;; request, 2 s, now and then: this test failed in 2 runs of 3 so, and a third of a
  ;; burst alone in 1 of 3.) Nothing here waits on a port meanwhile: a
  ;; thread waiting on one is run on every pass of the scheduler, and the loop then never
  ;; takes a lease.
  (call-with-server
   handler
   (λ (path)
     (define script
       (string-append
        "#lang racket/base\n(require fastcgi/client)\n"
        (format "(define c (fastcgi-connect ~s))\n" (string-append "unix:" path))
        "(for ([burst 4])\n"
        "  (for ([i 100]) (sleep 0.003) (fastcgi-call c #:params '((\"MODE\" . \"hello\"))))\n"
        "  (sleep 2))\n"
        "(sleep 2)\n"))
     (define file (make-temporary-file "fcgi-lease-~a.rkt"))
     (with-output-to-file file #:exists 'truncate (λ () (write-string script)))
     (define-values (sp out in err)
       (subprocess (current-output-port) #f (current-error-port)
                   (find-executable-path "racket") (path->string file)))
     (close-output-port in)
     (define ticks '())
     (define ticker (thread (λ () (for ([i 50]) (set! ticks (cons (current-inexact-milliseconds) ticks)) (sleep 0.2)))))
     (check-true (and (sync/timeout 30 ticker) #t) "the ticker ran to its end")
     (define gaps (for/list ([a (in-list ticks)] [b (in-list (cdr ticks))]) (- a b)))
     (printf "poller-test: ticks every 200 ms, the longest gap ~a ms\n" (round (apply max gaps)))
     (check-true (< (apply max gaps) 1500) (format "the longest gap between ticks: ~a ms" (apply max gaps)))
     (subprocess-kill sp #t)
     (subprocess-wait sp)
     (delete-file file))))
