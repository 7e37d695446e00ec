#lang racket/base
;; How a connection ends after a request without KEEP_CONN (connection.rkt, retire! and
;; quick-close?). When the request's input had all arrived, no reader thread took over
;; and nothing unread is left, the server closes at once; when bytes from the peer still
;; wait unread (in its decoder or in the socket), it half-closes and drains first,
;; because a TCP close with unread input sends a reset, which throws away what the front
;; had not read of the answer. Each case reads its answer over TCP after a pause, so
;; that the server is done (and a large answer still waits in the sockets' buffers).
(require racket/port
         racket/tcp
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/raw-peer.rkt")

(define answer-size 3000000)
(define big (make-bytes answer-size 120))

;; handler: SIZE bytes of body (default: answer-size), in one write
(define (handler r)
  (define out (fastcgi-request-stdout r))
  (define n (string->number (bytes->string/utf-8 (fastcgi-param r "SIZE" #"3000000"))))
  (write-bytes ok-head out)
  (write-bytes big out 0 n))

;; exchange : natural bytes -> (values natural (listof symbol) boolean)
;; Sends bs from a thread of its own (a server that closes may leave part of it unsent),
;; waits 300 ms, then reads until EOF: the body bytes of the STDOUT, the types of the
;; records after it, and whether the read ended in a reset.
(define (exchange port bs)
  (define-values (in out) (tcp-connect "127.0.0.1" port))
  (define writer
    (thread (λ () (with-handlers ([exn:fail? void]) (write-bytes bs out) (flush-output out)))))
  (sleep 0.3)
  (define reset? #f)
  (define got
    (let loop ([acc '()])
      (define piece (with-handlers ([exn:fail? (λ (e) (set! reset? #t) eof)])
                      (read-bytes 65536 in)))
      (if (eof-object? piece) (apply bytes-append (reverse acc)) (loop (cons piece acc)))))
  (close-input-port in)
  (kill-thread writer)
  (with-handlers ([exn:fail? void]) (close-output-port out))
  (define d (make-decoder))
  (decoder-feed! d got)
  (let loop ([stdout #""] [types '()])
    (define r (decoder-next! d))
    (cond
      [(not r) (values (bytes-length (cgi-body stdout)) (reverse types) reset?)]
      [(and (eq? (record-type r) 'stdout) (null? types))
       (loop (bytes-append stdout (record-content r))
             (if (zero? (bytes-length (record-content r))) '(stdout-end) '()))]
      [else (loop stdout (cons (record-type r) types))])))

(call-with-tcp-server
 handler
 (λ (port)
   (test-case "keep-conn off, a small answer and nothing more sent: the answer, then EOF"
     (define-values (n types reset?)
       (exchange port (request-bytes 1 #:keep? #f #:params (params "SIZE" "100"))))
     (check-equal? n 100)
     (check-equal? types '(stdout-end end-request))
     (check-false reset? "the connection was reset"))

   (test-case "keep-conn off, a large answer and nothing more sent: all of it, then EOF"
     ;; the send waits for the peer, and a reader thread takes the connection over
     (define-values (n types reset?) (exchange port (request-bytes 1 #:keep? #f)))
     (check-equal? n answer-size)
     (check-equal? types '(stdout-end end-request))
     (check-false reset? "the connection was reset"))

   (test-case "keep-conn off, bytes still coming after the request: the answer, then EOF, no reset"
     ;; 300 KB more after the request's end (STDIN of a request that has ended, which the
     ;; server skips): most of it waits unread in the socket when the answer is done, and
     ;; a close then would reset the connection
     (define-values (n types reset?)
       (exchange port (bytes-append (request-bytes 1 #:keep? #f #:params (params "SIZE" "100"))
                                    (apply bytes-append
                                           (for/list ([i 5]) (record->bytes 'stdin 1 (make-bytes 60000 97)))))))
     (check-equal? n 100)
     (check-equal? types '(stdout-end end-request))
     (check-false reset? "the connection was reset"))))
