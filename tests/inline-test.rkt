#lang racket/base
;; Inline handlers (connection.rkt): a request whose input has all arrived, alone on a
;; connection that never multiplexed, runs in the connection's reading thread (the event
;; loop's, for a socket); a new reading thread takes over when the handler waits on
;; abort-evt or runs for long. Each
;; test checks which way a request ran (the handler's thread) and that what the peer sees
;; is what a thread per request gives: answers, aborts, multiplexing, timeouts, bodies.
(require rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/raw-peer.rkt")

(define-values (report! next-event) (make-event-log))
(define threads (make-hash))               ; request tag -> the thread its handler ran in
(define gate (make-semaphore 0))

(define (handler r)
  (define out (fastcgi-request-stdout r))
  (define mode (bytes->string/utf-8 (fastcgi-param r "MODE" #"hello")))
  (hash-set! threads (fastcgi-param r "TAG" #"-") (current-thread))
  (case mode
    [("hello") (write-bytes ok-head out) (write-bytes #"hello" out)]
    [("body")
     (define body (let loop ([acc #""])
                    (define bs (read-bytes 4096 (fastcgi-request-stdin r)))
                    (if (eof-object? bs) acc (loop (bytes-append acc bs)))))
     (write-bytes ok-head out)
     (write-bytes body out)]
    [("abort-evt")
     (report! 'started)
     (report! (if (sync/timeout 5 (fastcgi-request-abort-evt r)) 'aborted 'not-aborted))]
    [("wait")
     (report! 'waiting)
     (define got? (sync/timeout 5 gate))
     (write-bytes ok-head out)
     (write-bytes (if got? #"released" #"timed out") out)]
    [("spin")                             ; computes, never waits: only a break stops it
     (report! 'spinning)
     (let loop ([i 0]) (when (< i 4000000000) (loop (add1 i))))]
    [("set-param") (print-graph #t) (write-bytes ok-head out)]
    [("unset-param") (print-graph #f) (write-bytes ok-head out)]
    [("get-param") (write-bytes ok-head out) (write-bytes (if (print-graph) #"#t" #"#f") out)]
    [else (error 'handler "unknown mode ~a" mode)]))

(define (get id tag #:mode [mode "hello"] #:keep? [keep? #t])
  (request-bytes id #:keep? keep? #:params (params "MODE" mode "TAG" tag)))

(define (thread-of tag) (hash-ref threads (string->bytes/utf-8 tag) #f))

(call-with-server
 handler
 #:limits (make-limits #:request-timeout 1)
 (λ (path)
   (test-case "one request at a time on a kept connection: all run in its reading thread"
     (with-peer path
       (λ (p)
         (for ([i (in-range 1 4)])
           (peer-send! p (get i (format "k~a" i)))
           (check-status (peer-answer p i) 200))
         (check-true (thread? (thread-of "k1")))
         (check-eq? (thread-of "k2") (thread-of "k1") "the second request ran where the first did")
         (check-eq? (thread-of "k3") (thread-of "k1"))
         ;; the event loop reads another connection in the same thread (poller.rkt)
         (with-peer path
           (λ (q)
             (peer-send! q (get 1 "other"))
             (check-status (peer-answer q 1) 200)))
         (check-eq? (thread-of "other") (thread-of "k1")))))

   (test-case "a body still arriving: the handler gets a thread of its own and reads it all"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "before"))
         (check-status (peer-answer p 1) 200)
         (peer-send! p (begin-bytes 2)
                     (stream->bytes 'params 2 (pairs->bytes (params "MODE" "body" "TAG" "body"))))
         (sleep 0.1)
         (peer-send! p (record->bytes 'stdin 2 #"first "))
         (sleep 0.1)
         (peer-send! p (record->bytes 'stdin 2 #"second") (record->bytes 'stdin 2 #""))
         (define a (peer-answer p 2))
         (check-equal? (cgi-body (answer-stdout a)) #"first second")
         (check-not-eq? (thread-of "body") (thread-of "before"))
         ;; the connection's next request runs inline again
         (peer-send! p (get 3 "after"))
         (check-status (peer-answer p 3) 200)
         (check-eq? (thread-of "after") (thread-of "before")))))

   (test-case "an inline handler waiting on abort-evt sees ABORT_REQUEST"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "abort" #:mode "abort-evt"))
         (check-equal? (next-event) 'started)
         (peer-send! p (abort-bytes 1))
         (check-equal? (next-event 2) 'aborted)
         (check-equal? (answer-app-status (peer-answer p 1)) 1)
         (peer-send! p (get 2 "after-abort"))
         (check-status (peer-answer p 2) 200))))

   (test-case "a second request while an inline handler waits: served first, in another thread"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "slow" #:mode "wait"))
         (check-equal? (next-event) 'waiting)
         (define t0 (current-inexact-milliseconds))
         (peer-send! p (get 2 "quick"))
         (define a2 (peer-answer p 2 2))
         (define ms (- (current-inexact-milliseconds) t0))
         (check-status a2 200)
         (printf "inline-test: the second request was answered after ~a ms\n" (round ms))
         (check-true (< ms 1000) (format "the second request waited ~a ms" ms))
         (check-not-eq? (thread-of "quick") (thread-of "slow"))
         (semaphore-post gate)
         (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"released")
         ;; the connection has multiplexed: its requests get a thread each from now on
         (peer-send! p (get 3 "mpx-a"))
         (check-status (peer-answer p 3) 200)
         (peer-send! p (get 4 "mpx-b"))
         (check-status (peer-answer p 4) 200)
         (check-not-eq? (thread-of "mpx-a") (thread-of "mpx-b")))))

   (test-case "the request timeout stops an inline handler; the connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "spin" #:mode "spin"))
         (check-equal? (next-event) 'spinning)
         (define a (peer-answer p 1 5))
         (check-status a 503)
         (for ([i (in-range 2 5)])
           (peer-send! p (get i (format "after-spin-~a" i)))
           (check-status (peer-answer p i) 200)))))

   (test-case "a parameter set directly stays for the thread's later requests (documented)"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "set" #:mode "set-param"))
         (check-status (peer-answer p 1) 200)
         (peer-send! p (get 2 "get" #:mode "get-param"))
         (check-equal? (cgi-body (answer-stdout (peer-answer p 2))) #"#t")
         (with-peer path
           (λ (q)
             (peer-send! q (get 1 "get-other" #:mode "get-param"))
             ;; the event loop runs this connection's inline handlers in the same thread
             (check-equal? (cgi-body (answer-stdout (peer-answer q 1))) #"#t"
                           "another connection of the loop sees it")))
         (peer-send! p (get 3 "unset" #:mode "unset-param"))
         (check-status (peer-answer p 3) 200))))))

;; With shedding on, every handler gets a thread (its thread group).
(call-with-server
 handler
 #:limits (make-limits #:max-queue-delay 1)
 (λ (path)
   (test-case "shedding on: a thread per request"
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "s1"))
         (check-status (peer-answer p 1) 200)
         (peer-send! p (get 2 "s2"))
         (check-status (peer-answer p 2) 200)
         (check-not-eq? (thread-of "s1") (thread-of "s2")))))))

;; After a second with no handler running, the inline watcher stops polling and waits for
;; the next request (watch-inline in server.rkt). The handler of the request that wakes
;; it must still be taken over when it blocks.
(call-with-server
 handler
 (λ (path)
   (test-case "after an idle spell, an inline handler that blocks is still taken over"
     (sleep 1.5)                      ; longer than the watcher's 100 quiet looks of 10 ms
     (with-peer path
       (λ (p)
         (peer-send! p (get 1 "idle-slow" #:mode "wait"))
         (check-equal? (next-event) 'waiting)
         (peer-send! p (get 2 "idle-quick"))
         (define a2 (peer-answer p 2 2))
         (check-status a2 200)
         (check-not-eq? (thread-of "idle-quick") (thread-of "idle-slow"))
         (semaphore-post gate)
         (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"released"))))))
