#lang racket/base
;; The connection engine end to end: a raw peer (tests/lib/raw-peer.rkt) against an
;; in-process server on a unix socket. Roles, multiplexing, aborts, keep-conn, params,
;; the bytes on the wire, large bodies both ways. The handler is in
;; tests/lib/connection-handler.rkt; the limits are tested in connection-limits-test.rkt,
;; the framing items of HOSTILE.md in connection-framing-test.rkt; management records in
;; dispatch-test.rkt, STDERR in request-output-test.rkt, a handler that raises in
;; handlers-test.rkt.
(require racket/list
         racket/port
         racket/unix-socket
         rackunit
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol/protocol.rkt"
         "lib/connection-handler.rkt"
         "lib/raw-peer.rkt")

;; -- roles --------------------------------------------------------------------------------
(with-server
  (λ (path)
    (test-case "responder: params and body echoed"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "REQUEST_METHOD" "POST" "CONTENT_LENGTH" "5")
                                       #:stdin #"hello"))
          (define a (peer-answer p 1))
          (check-equal? (answer-app-status a) 0)
          (check-status a 200)
          (check-equal? (cgi-body (answer-stdout a))
                        #"id=1 role=responder keep=#t\nREQUEST_METHOD=POST\nCONTENT_LENGTH=5\nbody=hello"))))

    (test-case "authorizer: 200 with Variable- headers, and a 403 denial"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 'authorizer #:params (params "MODE" "auth" "AUTH" "ok")))
          (define a (peer-answer p 1))
          (check-equal? (answer-stdout a) #"Status: 200\r\nVariable-USER: bob\r\n\r\n")
          (peer-send! p (request-bytes 2 #:role 'authorizer #:params (params "MODE" "auth")))
          (define b (peer-answer p 2))
          (check-status b 403)
          (check-equal? (cgi-body (answer-stdout b)) #"denied"))))

    (test-case "filter: all of STDIN, then DATA of FCGI_DATA_LENGTH bytes"
      (with-peer path
        (λ (p)
          (define data (make-bytes 200000 7))
          (peer-send! p (request-bytes 1 #:role 'filter #:stdin #"in"
                                       #:params (params "MODE" "filter" "FCGI_DATA_LENGTH" "200000"
                                                        "FCGI_DATA_LAST_MOD" "1700000000")
                                       #:data data))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1)))
                        #"stdin=in data=200000 length-ok=#t"))))

    (test-case "unknown role: UNKNOWN_ROLE; with keep-conn the connection goes on"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 99))
          (define a (peer-answer p 1))
          (check-equal? (answer-protocol-status a) 'unknown-role)
          (check-equal? (answer-stdout a) #"")
          (peer-send! p (request-bytes 2 #:params (params "N" "2")))
          (check-has #rx#"N=2" (answer-stdout (peer-answer p 2)))))
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:role 99 #:keep? #f))
          (check-equal? (answer-protocol-status (peer-answer p 1)) 'unknown-role)
          (check-true (peer-eof? p)))))))

;; -- one connection, many requests --------------------------------------------------------
(with-server
  #:limits (make-limits #:max-connections 50 #:max-concurrent 40)
  (λ (path)
    (test-case "multiplexing: ids 1, 300, 65535 with interleaved records"
      (with-peer path
        (λ (p)
          (define ids '(1 300 65535))
          (define per-id
            (for/list ([id ids])
              (define body (make-bytes (* id 3) (modulo id 251)))
              (split-records
               (bytes-append (begin-bytes id)
                             (stream->bytes 'params id (pairs->bytes (params "WHO" (format "r~a" id))) 5)
                             (stream->bytes 'stdin id body 1000)))))
          (peer-send! p (interleave per-id))
          (for ([id ids] [a (peer-answers p ids)])
            (check-has (regexp (format "^id=~a .*WHO=r~a\nbody=" id id))
                                (cgi-body (answer-stdout a)))
            (check-equal? (bytes-length (cgi-body (answer-stdout a)))
                          (+ (bytes-length (string->bytes/utf-8
                                            (format "id=~a role=responder keep=#t\nWHO=r~a\nbody=" id id)))
                             (* id 3))))
          (check-equal? (peer-extras p) '()))))

    (test-case "multiplexing: answers sent straight from the handlers' strings keep their records whole"
      ;; four handlers at once write 300,001 bytes each in immutable pieces of 131,063:
      ;; each record's header and content leave together under the connection's lock
      (with-peer path
        (λ (p)
          (define ids '(1 2 3 4))
          (peer-send! p (apply bytes-append
                               (for/list ([id ids])
                                 (request-bytes id #:params (params "MODE" "size" "N" "300001"
                                                                    "W" "131063" "IMM" "1")))))
          (define want (bytes-append ok-head (size-body 0 300001)))
          (for ([id ids] [a (peer-answers p ids 20)])
            (check-equal? (answer-app-status a) 0)
            (check-true (equal? (answer-stdout a) want) (format "id ~a: its answer whole" id)))
          (check-equal? (peer-extras p) '()))))

    (test-case "multiplexing: a slow handler does not stall another id"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "wait" "GATE" "slow")))
          (check-equal? (next-event) '(started 1))
          (peer-send! p (request-bytes 2 #:params (params "N" "fast")))
          (check-has #rx#"N=fast" (answer-stdout (peer-answer p 2)))
          (semaphore-post (gate "slow"))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"waited 1"))))

    (test-case "abort in the middle of the body: the read fails, one END_REQUEST"
      (with-peer path
        (λ (p)
          (peer-send! p (begin-bytes 1)
                      (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                      (record->bytes 'stdin 1 (make-bytes 10 1)))
          (check-equal? (next-event) 'started)
          (peer-send! p (abort-bytes 1))
          (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
          (check-pred exn:fail:fastcgi:aborted? (next-event))
          (peer-send! p (request-bytes 2))
          (peer-answer p 2)
          (check-equal? (peer-extras p) '()))))

    (test-case "abort in the middle of the handler: abort-evt fires, one END_REQUEST"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "abort-evt")))
          (check-equal? (next-event) 'started)
          (peer-send! p (abort-bytes 1))
          (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
          (check-equal? (next-event) 'aborted)
          (peer-send! p (request-bytes 2))
          (check-has #rx#"id=2" (answer-stdout (peer-answer p 2)))
          (check-equal? (peer-extras p) '()))))

    (test-case "keep-conn: off closes after END_REQUEST; on serves two in a row"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:keep? #f))
          (check-has #rx#"keep=#f" (answer-stdout (peer-answer p 1)))
          (check-true (peer-eof? p))))
      (with-peer path
        (λ (p)
          (for ([i 2])
            (peer-send! p (request-bytes 1 #:params (params "I" (number->string i))))
            (check-has (regexp (format "I=~a" i)) (answer-stdout (peer-answer p 1)))))))

    (test-case "params: look-ups before and after the list is made agree; a kept connection's next list shares byte strings"
      (with-peer path
        (λ (p)
          (for ([i 2])
            (peer-send! p (request-bytes 1 #:params (params "MODE" "lazy" "DUP" "first" "N" (number->string i)
                                                            "DUP" "second")))
            (define a (peer-answer p 1))
            (check-status a 200)
            (check-equal? (read (open-input-bytes (cgi-body (answer-stdout a))))
                          (if (zero? i)
                              '(#"first" #"first" none #t 4 #f #f)
                              '(#"first" #"first" none #t 4 #t #t)))))))

    (test-case "params never carry over to the next request on a kept connection (Perl FCGI CVE-2011-2766)"
      ;; the server shares byte strings and pairs with the connection's previous request
      ;; (parse-params): a request with fewer, or other, params sees only its own
      (with-peer path
        (λ (p)
          (for ([ps (list (params "A" "1" "B" "2" "C" "3")
                          (params "A" "1")
                          (params "A" "1" "B" "2" "C" "3")
                          (params "C" "3" "A" "1")
                          (params "A" "1" "B" "2" "C" "4")
                          (params)
                          (params "B" "2"))])
            (peer-send! p (request-bytes 1 #:params ps))
            (define lines (cdr (regexp-split #rx#"\n" (cgi-body (answer-stdout (peer-answer p 1))))))
            (check-equal? (drop-right lines 1)
                          (for/list ([pr (in-list ps)]) (bytes-append (string->bytes/utf-8 (car pr)) #"="
                                                                      (string->bytes/utf-8 (cdr pr))))
                          (format "~s" ps))))))

    (test-case "every byte sent is set: record padding and reserved bytes are zero"
      ;; the stdout buffer is made without zeroing (make-unfilled-bytes): bytes the server
      ;; did not write would carry old memory to the front
      (for ([i 30]) (make-bytes 100000 255))          ; old memory that is not zero
      ;; and every answer arrives whole and in order, also when its writes are of a
      ;; record's worth or more (sent straight from the written string), mutable or not
      (for* ([n+w (in-list (append (for*/list ([n (in-list '(1 2 5 7 9 15 100 511 600 1000 5000 70000))]
                                               [w (in-list '(1 7 1000))])
                                     (list n w))
                                   '((65528 65528) (65529 65529) (200000 65528) (200000 70001)
                                     (200000 200000) (300001 131063)
                                     ;; up to 16 records leave in one sendmsg: 16 and 30 of
                                     ;; them, and groups of 4 with a tail each time
                                     (1100000 1100000) (2000003 2000003) (2000003 300000))))]
             [imm? (in-list (if (>= (cadr n+w) 65528) '(#f #t) '(#f)))]
             ;; read slowly, in pieces of assorted sizes: the socket fills, and sendmsg
             ;; sends part of a group, ending inside a header or a piece
             [slow? (in-list (if (>= (car n+w) 1000000) '(#f #t) '(#f)))])
        (define n (car n+w))
        (define w (cadr n+w))
        (define-values (in out) (unix-socket-connect path))
        (write-bytes (request-bytes 1 #:keep? #f
                                    #:params (apply params "MODE" "size" "N" (number->string n)
                                                    "W" (number->string w)
                                                    (if imm? '("IMM" "1") '())))
                     out)
        (flush-output out)
        (define all
          (if slow?
              (let ([rng (make-pseudo-random-generator)])
                (let loop ([acc '()] [k 0])
                  (define piece (read-bytes (add1 (random 9000 rng)) in))
                  (cond
                    [(eof-object? piece) (apply bytes-append (reverse acc))]
                    [else (when (zero? (modulo k 4)) (sleep 0.001))
                          (loop (cons piece acc) (add1 k))])))
              (port->bytes in)))
        (close-output-port out)
        (let loop ([i 0] [stdout '()] [ends 0])
          (cond
            [(>= i (bytes-length all))
             (define got (apply bytes-append (reverse stdout)))
             (check-equal? ends 1 (format "n=~a w=~a: one END_REQUEST" n w))
             (check-equal? (bytes-length got) (+ (bytes-length ok-head) n)
                           (format "n=~a w=~a imm=~a slow=~a: all of stdout" n w imm? slow?))
             (check-true (equal? got (bytes-append ok-head (size-body 0 n)))
                         (format "n=~a w=~a imm=~a slow=~a: stdout in order" n w imm? slow?))]
            [else
             (define len (+ (* 256 (bytes-ref all (+ i 4))) (bytes-ref all (+ i 5))))
             (define pad (bytes-ref all (+ i 6)))
             (define type (bytes-ref all (+ i 1)))
             (check-equal? (bytes-ref all (+ i 7)) 0 "reserved header byte")
             (check-equal? (subbytes all (+ i 8 len) (+ i 8 len pad)) (make-bytes pad 0)
                           (format "n=~a w=~a: padding of a record of type ~a" n w type))
             (when (= type 3)
               (check-equal? (subbytes all (+ i 13) (+ i 16)) #"\0\0\0" "END_REQUEST reserved bytes"))
             (loop (+ i 8 len pad) (if (= type 6) (cons (subbytes all (+ i 8) (+ i 8 len)) stdout) stdout)
                   (if (= type 3) (add1 ends) ends))]))))

    (test-case "a 3 MiB response arrives whole in records of at most 65535 bytes"
      (with-peer path
        (λ (p)
          (peer-send! p (request-bytes 1 #:params (params "MODE" "big")))
          (define a (peer-answer p 1 10))
          (define body (cgi-body (answer-stdout a)))
          (check-equal? (bytes-length body) (* 48 65536))
          (check-equal? (subbytes body (* 47 65536) (+ 3 (* 47 65536))) #"VVV")
          (check-equal? (last (answer-stdout-sizes a)) 0 "the empty STDOUT record")
          (check-true (andmap (λ (n) (<= 1 n 65535)) (drop-right (answer-stdout-sizes a) 1))))))))

(with-server
  #:limits (make-limits #:stdin-buffer (* 64 1024))
  (λ (path)
    (test-case "a 5 MiB body streams through a 64 KiB buffer"
      (with-peer path
        (λ (p)
          (define n (* 5 1024 1024))
          (define writer
            (thread (λ () (peer-send! p (request-bytes 1 #:params (params "MODE" "count"
                                                                          "CONTENT_LENGTH" (number->string n))
                                                       #:stdin (make-bytes n 1))))))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1 20)))
                        (string->bytes/utf-8 (format "count=~a" n)))
          (check-true (thread? (sync/timeout 5 writer))))))
    (test-case "a 2 MiB body read slowly arrives byte for byte, whatever records it came in"
      ;; records of 65535, 65528 and 1 bytes, several per read, while the handler's pipe is
      ;; full and the reader waits holding them in its buffer
      (with-peer path
        (λ (p)
          (define n (* 2 1024 1024))
          (define body (size-body 0 n))
          (define records
            (let loop ([at 0] [k 0] [acc '()])
              (if (>= at n)
                  (reverse acc)
                  (let ([to (min n (+ at (case (modulo k 3) [(0) 65535] [(1) 65528] [else 1])))])
                    (loop to (add1 k) (cons (record->bytes 'stdin 1 (subbytes body at to)) acc))))))
          (define writer
            (thread (λ ()
                      (peer-send! p (bytes-append
                                     (begin-bytes 1)
                                     (stream->bytes 'params 1 (pairs->bytes (params "MODE" "digest"
                                                                                    "CONTENT_LENGTH" (number->string n))))))
                      (for ([rec (in-list records)]) (peer-send! p rec))
                      (peer-send! p (record->bytes 'stdin 1 #"")))))
          (check-equal? (cgi-body (answer-stdout (peer-answer p 1 30)))
                        (string->bytes/utf-8 (format "sha256=~s length=~a" (sha256-bytes body) n)))
          (check-true (thread? (sync/timeout 5 writer))))))))
