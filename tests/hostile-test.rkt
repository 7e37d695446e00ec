#lang racket/base
;; HOSTILE.md, item by item: each test is named after its item, asserts the required
;; behaviour, then that a good request is still answered on a new connection and, where
;; the connection should stay open, on the same one. Bounded memory is measured in a child
;; server (tests/fuzz/server.rkt) through /proc/PID/status.
;;
;; Covered elsewhere, not repeated here:
;;   1, 2, 3, 4, 6, 7, 9, 10  tests/connection-test.rkt ("-- hostile framing --")
;;   16 and 29                tests/security-test.rkt
;;   25, 27, 28               the process manager's tests (28's stale and live socket
;;                            files: tests/transport-test.rkt)
(require net/url
         racket/file
         racket/format
         racket/list
         racket/port
         rackunit
         web-server/http
         "../fastcgi/main.rkt"
         "../fastcgi/private/protocol.rkt"
         (only-in "../fastcgi/private/server.rkt" start-server resolve-listener
                  running-server-server running-server-stop)
         (only-in "../fastcgi/private/web.rkt" servlet->handler)
         (only-in "../fastcgi/private/wire.rkt" server-connections server-running server-stats)
         (only-in "../fastcgi/private/table.rkt" table-count)
         "fuzz/fuzz.rkt"
         "integration/lib.rkt"
         "lib/raw-peer.rkt")

;; -- the handler --------------------------------------------------------------------------
;; Picked by the MODE param; it reports to the test through `report!`.
(define-values (report! next-event) (make-event-log))
(define handler-runs (box 0))

(define (handler r)
  (set-box! handler-runs (add1 (unbox handler-runs)))
  (define out (fastcgi-request-stdout r))
  (define (try thunk) (with-handlers ([(λ (e) #t) values]) (thunk)))
  (case (bytes->string/utf-8 (fastcgi-param r "MODE" #"echo") #\?)
    [("echo")
     (define body (port->bytes (fastcgi-request-stdin r)))
     (write-bytes ok-head out)
     (fprintf out "id=~a body=~a" (fastcgi-request-id r) (bytes-length body))
     (for ([p (fastcgi-request-params r)]) (fprintf out "\n~s=~s" (car p) (cdr p)))]
    [("read-body")
     (report! 'started)
     (report! (try (λ () (port->bytes (fastcgi-request-stdin r)))))]
    [("abort-evt")
     (report! 'started)
     (report! (if (sync/timeout 10 (fastcgi-request-abort-evt r)) 'aborted 'not-aborted))]
    [("raise") (error 'handler "boom\r\nFAKE 2000-01-01T00:00:00 info forged line\e[31m\0")]
    [("raise-value") (raise 'not-an-exception)]
    [("raise-after-output")
     (write-bytes ok-head out)
     (write-bytes (make-bytes 70000 65) out)
     (error 'handler "late failure")]
    [("hang") (report! 'started) (sync never-evt)]
    [("hang-ignoring-breaks")
     (report! 'started)
     (parameterize-break #f
       (report! (if (sync/timeout 20 (fastcgi-request-abort-evt r)) 'aborted 'not-aborted)))]
    [("flood")
     (define written (box 0))
     (report! (try (λ ()
                    (for ([i 4096])
                      (write-bytes (make-bytes 65536 120) out)
                      (set-box! written (+ 65536 (unbox written))))
                    'wrote-all)))
     (report! (unbox written))]
    [else (error 'handler "unknown mode")]))

;; -- helpers ------------------------------------------------------------------------------
(define all-roles '(responder authorizer filter))

;; call-with-engine : handler (path server -> any) #:limits -> any
;; An in-process server on a unix socket; proc also gets the server's shared state, to
;; check what was released.
(define (call-with-engine proc #:handler [h handler] #:limits [lim (make-limits)])
  (call-with-temp-dir
   "fcgi-hostile"
   (λ (dir)
     (define path (path->string (build-path dir "h.sock")))
     (define rs (start-server h (resolve-listener (string-append "unix:" path))
                              #:roles all-roles #:limits lim))
     (dynamic-wind
      void
      (λ () (proc path (running-server-server rs)))
      (λ () ((running-server-stop rs) #:timeout 1))))))

;; check-good-request : path -> void ; a fresh connection still gets an answer
(define (check-good-request path)
  (with-peer path
    (λ (p)
      (peer-send! p (request-bytes 1 #:params (params "X" "still-alive") #:stdin #"b"))
      (define a (peer-answer p 1))
      (check-status a 200)
      (check-has #rx#"\"X\"=#\"still-alive\"" (answer-stdout a)))))

;; check-good-request* : path -> void ; the servlet's version of check-good-request
(define (check-good-request* path)
  (with-peer path
    (λ (p)
      (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/alive")))
      (define a (peer-answer p 1))
      (check-status a 200)
      (check-has #rx#"uri=/alive" (answer-stdout a)))))

;; memory-use : -> natural ; bytes in use after a collection
(define (memory-use)
  (collect-garbage)
  (current-memory-use))

;; check-same-connection : peer [natural] -> void ; the peer's connection still serves
(define (check-same-connection p [id 1])
  (peer-send! p (request-bytes id #:params (params "SAME" "yes")))
  (define a (peer-answer p id))
  (check-status a 200)
  (check-has #rx#"\"SAME\"=#\"yes\"" (answer-stdout a)))

;; call-with-log : (-> any) -> (listof (vector level string any topic))
;; What the fastcgi logger said (every level) while thunk ran, and just after.
(define (call-with-log thunk)
  (define rx (make-log-receiver fastcgi-logger 'debug 'fastcgi))
  (thunk)
  (sleep 0.2)
  (let loop ([acc '()])
    (define v (sync/timeout 0 rx))
    (if v (loop (cons v acc)) (reverse acc))))

;; check-log-clean : (listof vector) -> void ; one printable ASCII line per event
(define (check-log-clean events)
  (for ([v (in-list events)])
    (check-false (regexp-match? #px"[^ -~]" (vector-ref v 1))
                 (format "raw byte in the log line ~s" (vector-ref v 1)))))

;; levels : (listof vector) -> (listof symbol)
(define (levels events) (map (λ (v) (vector-ref v 0)) events))

;; wait-for : seconds (-> any) -> any ; polls until thunk is true (or fails the check)
(define (wait-for secs thunk)
  (define deadline (+ (current-inexact-milliseconds) (* 1000 secs)))
  (let loop ()
    (or (thunk)
        (and (< (current-inexact-milliseconds) deadline) (sleep 0.05) (loop)))))

;; check-released : server -> void ; no connection left, no handler running
(define (check-released srv)
  (check-true (wait-for 5 (λ () (zero? (table-count (server-connections srv)))))
              "every connection ended")
  (check-true (wait-for 5 (λ () (zero? (unbox (server-running srv)))))
              "no handler still counted as running"))

;; peak-growth-kb : fuzz-server (-> any) -> natural
;; How far the child's peak RSS rose over its collected RSS while thunk ran.
(define (peak-growth-kb fs thunk)
  (define pid (proc-pid (fuzz-server-proc fs)))
  (check-equal? (child-command fs "gc") "gc done")
  (reset-peak-memory! pid)
  (define rss0 (status-memory-kb pid 'VmRSS))
  (thunk)
  (- (status-memory-kb pid 'VmHWM) rss0))

;; child-answer : fuzz-server bytes [seconds] -> answer ; one request on a new connection
(define (child-answer fs bs [timeout 10])
  (with-peer (fuzz-server-path fs)
    (λ (p)
      (peer-send! p bs)
      (peer-answer p 1 timeout))))

;; check-child-good : fuzz-server -> void
(define (check-child-good fs)
  (define a (child-answer fs (request-bytes 1 #:params (params "CONTENT_LENGTH" "2") #:stdin #"ok")))
  (check-status a 200)
  (check-has #rx#"body=2 " (answer-stdout a)))

;; end-statuses : peer natural [seconds] -> (listof (or/c symbol #f))
;; The protocol status of each of the next n records (#f for one that is not an
;; END_REQUEST); with n #f, of every record until none comes for timeout seconds.
(define (end-statuses p n [timeout 10])
  (let loop ([k 0] [acc '()])
    (define r (and (or (not n) (< k n)) (peer-read-record p timeout)))
    (cond
      [(and n (= k n)) (reverse acc)]
      [(not (record? r)) (if n (loop (add1 k) (cons #f acc)) (reverse acc))]
      [else (loop (add1 k)
                  (cons (and (eq? (record-type r) 'end-request)
                             (let-values ([(app proto) (parse-end-request (record-content r))]) proto))
                        acc))])))

;; check-once-a-second : (listof bytes) byte-regexp -> void
;; A flood's log lines, at one a second (a test takes a few seconds): some, not more than
;; 20, the last of them rx followed by the count of the ones not written.
(define (check-once-a-second lines rx)
  (check-true (<= 1 (length lines) 20) (format "~a lines" (length lines)))
  (check-true (and (pair? lines)
                   (regexp-match? (byte-regexp (bytes-append (object-name rx)
                                                             #"; [0-9]+ more refused so since the last such line"))
                                  (last lines)))
              (format "~s" lines)))

;; on-connections : fuzz-server natural (peer -> any) -> void
;; proc on n connections to the child at once, each in a thread; returns when all are done.
(define (on-connections fs n proc)
  (define threads
    (for/list ([_ (in-range n)])
      (thread (λ () (with-peer (fuzz-server-path fs) proc)))))
  (for-each thread-wait threads))

;; new-log-lines : fuzz-server byte-regexp (-> any) -> (listof bytes)
;; The lines of the child's log that match rx among those thunk made it write. The child
;; writes its log from a thread of its own, after the answer may have left: "log" waits
;; until every line queued before it is in the file (without it, a loaded machine read the
;; file before the line of a request already answered).
(define (new-log-lines fs rx thunk)
  (define log-file (proc-stderr-file (fuzz-server-proc fs)))
  (define before (file-size log-file))
  (thunk)
  (check-equal? (child-command fs "log") "log done")
  (regexp-match* rx (subbytes (file->bytes log-file) before)))

;; check-child-same : peer natural -> void ; a kept connection to the child still serves
(define (check-child-same p id)
  (peer-send! p (request-bytes id #:params (params "CONTENT_LENGTH" "3") #:stdin #"abc"))
  (define a (peer-answer p id 10))
  (check-status a 200)
  (check-has (regexp (format "id=~a .*body=3 " id)) (answer-stdout a)))

;; the most a hostile input may add to the child's peak memory
(define max-growth-kb (* 24 1024))

;; ---------------------------------------------------------------------------------------
(call-with-engine
 (λ (path srv)
   (test-case "5: unknown role: UNKNOWN_ROLE; kept connection goes on, unkept one closes"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:role 7))
         (define a (peer-answer p 1))
         (check-equal? (answer-protocol-status a) 'unknown-role)
         (check-equal? (answer-stdout a) #"")
         (check-same-connection p)))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:role 65535 #:keep? #f))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'unknown-role)
         (check-true (peer-eof? p))))
     (check-good-request path))

   (test-case "11: pair lengths past the end of the params: 400, no handler, no partial map"
     (define runs (unbox handler-runs))
     (with-peer path
       (λ (p)
         (for ([bad (list #"\4\10NAMEvalu" #"\4" #"\1\1A" #"\200\0\0\4\1ABCDx\5\200")])
           (define good (pairs->bytes (params "GOOD" "1")))
           (peer-send! p (begin-bytes 1) (stream->bytes 'params 1 (bytes-append good bad))
                       (stream->bytes 'stdin 1 #""))
           (check-status (peer-answer p 1) 400))
         (check-equal? (unbox handler-runs) runs "no handler ran")
         (check-same-connection p)))
     (check-good-request path))

   (test-case "12: 4-byte lengths 0x7FFFFFFF and 0xFFFFFFFF rejected; a straddle parses"
     (define runs (unbox handler-runs))
     (with-peer path
       (λ (p)
         (for ([len (list #"\177\377\377\377" #"\377\377\377\377" #"\200\0\377\377")])
           (define before (memory-use))
           (peer-send! p (begin-bytes 1)
                       (stream->bytes 'params 1 (bytes-append len #"\1" #"NAMEV"))
                       (stream->bytes 'stdin 1 #""))
           (check-status (peer-answer p 1) 400)
           (check-true (< (- (memory-use) before) (* 16 1024 1024)) "nothing of 2 GiB allocated"))
         ;; a huge length whose 4 bytes straddle two records
         (peer-send! p (begin-bytes 1) (record->bytes 'params 1 #"\4\377\377")
                     (record->bytes 'params 1 #"\377\377NAME") (record->bytes 'params 1 #"")
                     (stream->bytes 'stdin 1 #""))
         (check-status (peer-answer p 1) 400)
         (check-equal? (unbox handler-runs) runs)
         ;; a legitimate straddle: a 4-byte value length split 2+2, a name split in two
         (define value (make-bytes 300 66))
         (define pair (bytes-append #"\4\200\0\1\54" #"LONG" value))
         (peer-send! p (begin-bytes 1) (record->bytes 'params 1 (subbytes pair 0 3))
                     (record->bytes 'params 1 (subbytes pair 3 7))
                     (record->bytes 'params 1 (subbytes pair 7)) (record->bytes 'params 1 #"")
                     (stream->bytes 'stdin 1 #""))
         (define a (peer-answer p 1))
         (check-status a 200)
         (check-has (regexp (format "\"LONG\"=#\"~a\"" (make-string 300 #\B))) (answer-stdout a))
         (check-same-connection p)))
     (check-good-request path))

   (test-case "14: NUL, CR, LF, ESC and invalid UTF-8 in params: kept as bytes, escaped in logs"
     (define nasty #"a\0b\r\nc\ed\377\376e")
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (peer-send! p (request-bytes 1 #:params (list (cons nasty nasty)
                                                            (cons "REQUEST_URI" nasty)
                                                            (cons "REQUEST_METHOD" nasty))))
              (define a (peer-answer p 1))
              (check-status a 200)
              (check-has (regexp (regexp-quote (format "~s=~s" nasty nasty))) (answer-stdout a))
              ;; the same bytes in a rejected request's log line
              (peer-send! p (request-bytes 2 #:params (list (cons "REQUEST_URI" nasty)
                                                            (cons "CONTENT_LENGTH" nasty))))
              (check-status (peer-answer p 2) 400)
              (check-same-connection p))))))
     (check-true (pair? log))
     (check-log-clean log)
     (check-good-request path))

   (test-case "18: STDIN longer than CONTENT_LENGTH: 413, the rest skipped, connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "3") #:stdin (make-bytes 200000 1)))
         (check-status (peer-answer p 1) 413)
         (check-same-connection p)))
     (check-good-request path))

   (test-case "21: ABORT_REQUEST with KEEP_CONN off: one END_REQUEST, then the connection closes"
     (with-peer path
       (λ (p)
         (peer-send! p (begin-bytes 1 'responder #f)
                     (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                     (record->bytes 'stdin 1 (make-bytes 10 1)))
         (check-equal? (next-event) 'started)
         (peer-send! p (abort-bytes 1))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
         (check-pred exn:fail:fastcgi:aborted? (next-event))
         (check-true (peer-eof? p))
         (check-equal? (filter (λ (r) (eq? (record-type r) 'end-request)) (peer-extras p)) '()
                       "END_REQUEST only once")))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:keep? #f #:params (params "MODE" "abort-evt")))
         (check-equal? (next-event) 'started)
         (peer-send! p (abort-bytes 1))
         (check-equal? (answer-protocol-status (peer-answer p 1)) 'request-complete)
         (check-equal? (next-event) 'aborted)
         (check-true (peer-eof? p))))
     (check-good-request path))

   (test-case "22: the peer closes mid-body and mid-handler: the handler sees it, all released"
     (define log
       (call-with-log
        (λ ()
          (define p (peer-connect path))
          (peer-send! p (begin-bytes 1)
                      (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                      (record->bytes 'stdin 1 (make-bytes 10 1)))
          (check-equal? (next-event) 'started)
          (peer-close! p)
          (check-pred exn:fail:fastcgi:aborted? (next-event))
          (define q (peer-connect path))
          (peer-send! q (request-bytes 1 #:params (params "MODE" "abort-evt")))
          (check-equal? (next-event) 'started)
          (peer-close! q)
          (check-equal? (next-event) 'aborted)
          (check-released srv))))
     (check-false (memq 'error (levels log)) (format "~s" log))
     (check-good-request path))

   (test-case "23: a handler raises: 500, one END_REQUEST, escaped error line, connection usable"
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (for ([mode '("raise" "raise-value")] [id '(1 2)])
                (peer-send! p (request-bytes id #:params (params "MODE" mode)))
                (define a (peer-answer p id))
                (check-status a 500)
                (check-equal? (cgi-body (answer-stdout a)) #"500 Internal Server Error\n")
                (check-equal? (answer-app-status a) 0))
              ;; output already left: no 500 page can follow, the request ends (status 1)
              (peer-send! p (request-bytes 3 #:params (params "MODE" "raise-after-output")))
              (define a (peer-answer p 3))
              (check-status a 200)
              (check-equal? (answer-app-status a) 1)
              (check-same-connection p)
              (check-equal? (filter (λ (r) (eq? (record-type r) 'end-request)) (peer-extras p)) '()))))))
     (define errors (filter (λ (v) (eq? (vector-ref v 0) 'error)) log))
     (check-equal? (length errors) 3 (format "~s" log))
     (check-true (for/or ([v errors]) (regexp-match? #rx"boom\\\\x0d\\\\x0aFAKE" (vector-ref v 1))))
     (check-log-clean log)
     (check-good-request path))))

;; -- 8, 13, 18: memory in a child server --------------------------------------------------
(call-with-temp-dir
 "fcgi-hostile-child"
 (λ (dir)
   (call-with-fuzz-server
    dir #:args '("--idle-timeout" "30" "--read-timeout" "10")
    (λ (fs)
      ;; warm every path once, so first-use allocations are not counted
      (check-child-good fs)
      (child-answer fs (request-bytes 1 #:params (params "BIG" (make-string 200000 #\x))))

      (test-case "8: BEGIN_REQUEST flood with fresh ids: OVERLOADED past the cap, memory bounded"
        (define growth #f)
        (define lines
          (new-log-lines
           fs #rx#"[^\n]*OVERLOADED[^\n]*"
           (λ ()
             (set! growth
                   (peak-growth-kb
                    fs
                    (λ ()
                      (on-connections
                       fs 10
                       (λ (p)
                         (peer-send! p (apply bytes-append (for/list ([id (in-range 1 5001)]) (begin-bytes id))))
                         (check-equal? (remove-duplicates (end-statuses p 4900)) '(overloaded))
                         ;; a live request on the flooded connection is still served
                         (peer-send! p (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #"x"))
                         (check-status (peer-answer p 1 10) 200)))))))))
        (printf "8: 10 connections x 5000 BEGIN_REQUEST: peak growth ~a kB\n" growth)
        ;; 1000 live requests (100 per connection) at about 18 KiB each measured 17 to 35
        ;; MiB; without the cap, 50000 would take about 900 MiB
        (check-true (< growth (* 64 1024)) (format "grew ~a kB" growth))
        ;; 49,000 refusals, logged at most once a second (one line each, before)
        (printf "8: ~a OVERLOADED log lines\n" (length lines))
        (check-once-a-second lines #rx#"over 100 live requests on one connection: OVERLOADED")
        (check-child-good fs))

      (test-case "5: unknown roles by the thousand on a kept connection: each answered, logged once a second"
        (define lines
          (new-log-lines
           fs #rx#"[^\n]*UNKNOWN_ROLE[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (apply bytes-append (for/list ([id (in-range 1 5001)])
                                                     (record->bytes 'begin-request id (begin-request-content 9 #t)))))
                 (check-equal? (remove-duplicates (end-statuses p 5000)) '(unknown-role))
                 (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                 (check-status (peer-answer p 1) 200))))))
        (printf "5: 5000 unknown roles: ~a log lines\n" (length lines))
        (check-once-a-second lines #rx#"role 9 not served: UNKNOWN_ROLE")
        (check-child-good fs))

      (test-case "14: bad requests by the thousand: each answered 400, 10 log lines a second, the rest counted"
        ;; a refused request costs the peer about 50 bytes and wrote a line of about 120
        ;; (one per request, before); now the first 10 of a second are written in full and
        ;; the next one written says how many were not
        (define n 2000)
        (define t0 (current-inexact-milliseconds))
        (define flood
          (new-log-lines
           fs #rx#"[^\n]*CONTENT_LENGTH is not a number[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (apply bytes-append
                                      (for/list ([id (in-range 1 (add1 n))])
                                        (request-bytes id #:params (params "CONTENT_LENGTH" "x")))))
                 (define answers (peer-answers p (for/list ([id (in-range 1 (add1 n))]) id) 30))
                 (check-equal? (length answers) n)
                 (for ([a (in-list answers)]) (check-status a 400)))))))
        (define seconds (/ (- (current-inexact-milliseconds) t0) 1000.0))
        (printf "14: ~a bad requests in ~a s: ~a log lines\n" n (~r seconds #:precision 2) (length flood))
        ;; (the second's first lines may have gone to an earlier test's refusals)
        (check-true (<= 1 (length flood) (* 10 (+ 2 (ceiling seconds))))
                    (format "~a lines in ~a s" (length flood) seconds))
        ;; the next line, more than a second later, counts the ones held back
        (sleep 1.1)
        (define after
          (new-log-lines
           fs #rx#"[^\n]*CONTENT_LENGTH is not a number[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "y")))
                 (check-status (peer-answer p 1) 400))))))
        (check-equal? (length after) 1)
        ;; every request is accounted for: written, or counted in a later line
        (define (held-back line)
          (define m (regexp-match #rx#"answered 400 \\(([0-9]+) more like it not written\\)$" line))
          (if m (string->number (bytes->string/utf-8 (cadr m))) 0))
        (check-true (regexp-match? #rx#"more like it not written" (car after)) (format "~s" (car after)))
        (check-equal? (+ (length flood) 1 (for/sum ([l (in-list (append flood after))]) (held-back l)))
                      (+ n 1))
        (check-child-good fs))

      (test-case "8 and 13: 100 live requests a connection, each with unfinished params: memory bounded"
        ;; Each request alone stays under max-params-bytes (120,000 of 128 KiB), so only
        ;; connection-buffer (1 MiB) bounds what the 100 of one connection hold together:
        ;; about 8 of them keep their params, the others are answered OVERLOADED. Without
        ;; it, the 10 connections grew the child by 183 MiB.
        (define overloaded (box 0))
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (on-connections
              fs 10
              (λ (p)
                (define half (pairs->bytes (list (cons #"P" (make-bytes 59990 120)))))
                (for ([id (in-range 1 101)])
                  (peer-send! p (begin-bytes id) (record->bytes 'params id half)
                              (record->bytes 'params id half)))
                (define ends (filter values (end-statuses p #f 3)))
                (check-equal? (remove-duplicates ends) '(overloaded))
                (set-box! overloaded (+ (unbox overloaded) (length ends))))))))
        (printf "8 and 13: 10 connections x 100 requests x 120,000 bytes of params: peak growth ~a kB, ~a OVERLOADED\n"
                growth (unbox overloaded))
        (check-true (> (unbox overloaded) 800) (format "~a OVERLOADED" (unbox overloaded)))
        (check-true (< growth (* 64 1024)) (format "grew ~a kB" growth))
        (check-child-good fs))

      (test-case "13: params over the limits: 431, memory bounded"
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (for ([c 4])
               (with-peer (fuzz-server-path fs)
                 (λ (p)
                   ;; 8 MiB of params in 64 KiB records, then 2000 tiny pairs
                   (peer-send! p (begin-bytes 1))
                   (for ([i 128]) (peer-send! p (record->bytes 'params 1 (make-bytes 65535 65))))
                   (peer-send! p (record->bytes 'params 1 #"") (stream->bytes 'stdin 1 #""))
                   (check-status (peer-answer p 1 20) 431)
                   (peer-send! p (request-bytes 2 #:params (for/list ([i 2000]) (cons (format "P~a" i) ""))))
                   (check-status (peer-answer p 2) 431)
                   (peer-send! p (request-bytes 3 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                   (check-status (peer-answer p 3) 200)))))))
        (printf "13: 4 x 8 MiB of params: peak growth ~a kB\n" growth)
        (check-true (< growth max-growth-kb) (format "grew ~a kB" growth))
        (check-child-good fs))

      (test-case "18: STDIN over the body limit (1 MiB in the child): 413, memory bounded"
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (define writer
                   (thread (λ ()
                             (peer-send! p (begin-bytes 1) (stream->bytes 'params 1 #""))
                             (for ([i 320]) (peer-send! p (record->bytes 'stdin 1 (make-bytes 65528 66))))
                             (peer-send! p (record->bytes 'stdin 1 #"")))))
                 (check-status (peer-answer p 1 20) 413)
                 (sync/timeout 20 writer)
                 (peer-send! p (request-bytes 2 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                 (check-status (peer-answer p 2) 200))))))
        (printf "18: 20 MiB body past a 1 MiB limit: peak growth ~a kB\n" growth)
        (check-true (< growth max-growth-kb) (format "grew ~a kB" growth))
        (check-child-good fs))))))

;; -- 15, 17: the servlet adapter ----------------------------------------------------------
(define (servlet req)
  (define hs (request-headers/raw req))
  (response/output
   (λ (out)
     (fprintf out "uri=~a\n" (url->string (request-uri req)))
     (for ([h hs] #:when (regexp-match? #rx#"^X-Forwarded-For$" (header-field h)))
       (fprintf out "xff=~a\n" (header-value h)))
     (define first (headers-assq* #"X-Forwarded-For" hs))
     (fprintf out "first=~a\n" (and first (header-value first))))
   #:headers (list (header #"X-Echo" (let ([h (headers-assq* #"X-Evil" hs)]) (if h (header-value h) #""))))))

(call-with-engine
 #:handler (servlet->handler servlet (make-limits))
 (λ (path srv)
   (test-case "15: inconsistent params (empty PATH_INFO, long SCRIPT_FILENAME, odd lengths): 200 or 400"
     (define cases
       (list (params "SCRIPT_FILENAME" (make-string 60000 #\/) "PATH_INFO" "" "REQUEST_URI" "/index.php/%0a")
             (params "SCRIPT_NAME" (make-string 5000 #\a) "PATH_INFO" "")
             (params "PATH_INFO" "/x" "SCRIPT_NAME" "" "QUERY_STRING" "%%%")
             (params "REQUEST_URI" "http://[::1")
             (params "REQUEST_URI" "\377\376/x")
             (params "REQUEST_URI" "")
             (params "CONTENT_LENGTH" "-1")
             (params "CONTENT_LENGTH" "1e3")
             (params "CONTENT_LENGTH" "9999999999999999999")
             (params "CONTENT_LENGTH" " 5")
             (params "REQUEST_METHOD" "" "SERVER_PORT" "99999999999999999999" "REMOTE_ADDR" "\0")))
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (for ([ps cases] [i (in-naturals)])
                (peer-send! p (request-bytes 1 #:params ps))
                (define a (peer-answer p 1))
                (check-not-false (memv (cgi-status (answer-stdout a)) '(200 400 413))
                                 (format "case ~a: ~s" i (answer-stdout a))))
              (check-status (begin (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/ok")))
                                   (peer-answer p 1))
                            200))))))
     (check-false (memq 'error (levels log)) (format "~s" log))
     (check-log-clean log)
     (check-good-request* path))

   (test-case "17: the same header under two spellings: both kept in order, the first wins"
     ;; X-Forwarded-For and X_Forwarded-For both reach a FastCGI app as HTTP_X_FORWARDED_FOR
     ;; (a front that keeps the hyphen sends HTTP_X_FORWARDED-FOR, also X-Forwarded-For)
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/"
                                                         "HTTP_X_FORWARDED_FOR" "10.0.0.1"
                                                         "HTTP_X_FORWARDED-FOR" "10.0.0.2"
                                                         "HTTP_X_FORWARDED_FOR" "10.0.0.3")))
         (define a (peer-answer p 1))
         (check-status a 200)
         (check-equal? (cgi-body (answer-stdout a))
                       #"uri=/\nxff=10.0.0.1\nxff=10.0.0.2\nxff=10.0.0.3\nfirst=10.0.0.1\n")))
     (call-with-engine
      (λ (raw-path srv)
        (with-peer raw-path
          (λ (p)
            (peer-send! p (request-bytes 1 #:params (params "HTTP_X_FORWARDED_FOR" "10.0.0.1"
                                                            "HTTP_X_FORWARDED_FOR" "10.0.0.3")))
            (define out (answer-stdout (peer-answer p 1)))
            (check-has #rx#"\"HTTP_X_FORWARDED_FOR\"=#\"10.0.0.1\"\n#\"HTTP_X_FORWARDED_FOR\"=#\"10.0.0.3\"" out)
            (check-same-connection p))))))

   (test-case "14: CR, LF and NUL from a request header never reach a response header raw"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/" "HTTP_X_EVIL" "a\r\nSet-Cookie: x=1\0")))
         (define out (answer-stdout (peer-answer p 1)))
         (check-equal? (cgi-header out "X-Echo") "a  Set-Cookie: x=1")
         (check-false (cgi-header out "Set-Cookie")))))))

;; -- 19, 20, 24: time ---------------------------------------------------------------------
(call-with-engine
 #:limits (make-limits #:first-byte-timeout 1 #:read-timeout 1 #:write-timeout 1 #:idle-timeout 5)
 (λ (path srv)
   (test-case "19: a slow sender before the first record is closed, even when it trickles"
     (with-peer path
       (λ (p)
         (define t0 (current-inexact-milliseconds))
         ;; one byte of a header every 0.4 s: each byte is progress, none a whole record
         (define trickle
           (thread (λ () (for ([b (in-bytes (begin-bytes 1))]) (peer-send! p (bytes b)) (sleep 0.4)))))
         (check-true (peer-eof? p 5))
         (kill-thread trickle)
         (check-true (< (- (current-inexact-milliseconds) t0) 2000) "closed by the first-byte deadline")))
     (check-good-request path))

   (test-case "19: a sender that stops in the middle of a body: closed, the handler freed"
     (with-peer path
       (λ (p)
         (peer-send! p (begin-bytes 1)
                     (stream->bytes 'params 1 (pairs->bytes (params "MODE" "read-body" "CONTENT_LENGTH" "100")))
                     (record->bytes 'stdin 1 #"part"))
         (check-equal? (next-event) 'started)
         (check-true (peer-eof? p 5))
         (check-pred exn:fail:fastcgi:aborted? (next-event))))
     (check-released srv)
     (check-good-request path))

   (test-case "20: a peer that stops reading: the write deadline aborts, output stays bounded"
     (define before (memory-use))
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "flood")))
         (check-pred exn:fail:fastcgi:aborted? (next-event 10))
         (define written (next-event))
         (printf "20: the handler wrote ~a bytes before its write failed\n" written)
         (check-true (< written (* 32 1024 1024)) "the handler was held back by the socket")
         (check-true (< (- (memory-use) before) (* 64 1024 1024)))
         (check-true (peer-eof? p 5))))
     (check-released srv)
     (check-good-request path))))

;; a request timeout of its own: with 20's write deadline at the same time, the break
;; could end the flooding handler before it reports
(call-with-engine
 #:limits (make-limits #:request-timeout 1 #:idle-timeout 5)
 (λ (path srv)
   (test-case "24: a handler that hangs: 503 at the request timeout; the connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "hang")))
         (check-equal? (next-event) 'started)
         (define t0 (current-inexact-milliseconds))
         (define a (peer-answer p 1 5))
         (check-status a 503)
         (check-true (< (- (current-inexact-milliseconds) t0) 2500))
         (check-same-connection p)))
     (check-true (wait-for 2 (λ () (zero? (unbox (server-running srv))))) "the handler's slot is free")
     (check-good-request path))

   (test-case "24: a handler that ignores the break: its request ends 5 s later, the connection goes on"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "MODE" "hang-ignoring-breaks")))
         (check-equal? (next-event) 'started)
         (define a (peer-answer p 1 10))
         ;; nothing of its answer had left: the front still gets a 503 page (an
         ;; END_REQUEST with no STDOUT would be a 502 for nginx)
         (check-true (regexp-match? #rx#"^Status: 503 " (answer-stdout a)) (format "~s" (answer-stdout a)))
         (check-equal? (next-event) 'aborted "the handler learns its request ended")
         (check-same-connection p 2)))
     (check-true (wait-for 2 (λ () (zero? (unbox (server-running srv))))) "the handler's slot is free")
     (check-good-request path))))

;; -- 26: storms and descriptors above 1024 -----------------------------------------------

;; open-with-request : path natural boolean -> peer ; a connection with one request sent
(define (open-with-request path keep?)
  (define p (peer-connect path))
  (peer-send! p (request-bytes 1 #:keep? keep? #:params (params "CONTENT_LENGTH" "1") #:stdin #"s"))
  p)

(call-with-temp-dir
 "fcgi-storm"
 (λ (dir)
   (call-with-fuzz-server
    dir #:args '("--max-connections" "20" "--idle-timeout" "60" "--first-byte-timeout" "5")
    (λ (fs)
      (test-case "26: a storm past max-connections: fast 503s, bounded, no crash"
        (define path (fuzz-server-path fs))
        ;; 20 kept connections fill the server
        (define held (for/list ([i 20]) (open-with-request path #t)))
        (for ([p held]) (check-status (peer-answer p 1) 200))
        (define statuses (make-vector 300 #f))
        (define t0 (current-inexact-milliseconds))
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (define threads
               (for/list ([i 300])
                 (thread
                  (λ ()
                    (define p (open-with-request path #f))
                    (vector-set! statuses i
                                 (with-handlers ([exn:fail? exn-message])
                                   (define a (peer-answer p 1 20))
                                   (list (cgi-status (answer-stdout a)) (answer-protocol-status a)
                                         (peer-eof? p 5))))
                    (peer-close! p)))))
             (for-each thread-wait threads))))
        (define secs (/ (- (current-inexact-milliseconds) t0) 1000.))
        (printf "26: 300 connections past a full server: ~a s, peak growth ~a kB, answers ~a\n"
                secs growth (remove-duplicates (vector->list statuses)))
        (check-equal? (remove-duplicates (vector->list statuses)) (list (list 503 'request-complete #t)))
        (check-true (< secs 10) "fast answers")
        (check-true (< growth max-growth-kb))
        ;; the held connections still serve, and once they close a new one is served
        (for ([p held]) (check-child-same p 2))
        (for-each peer-close! held)
        (sleep 0.3)
        (check-child-good fs))))
   (test-case "26: descriptors above 1024: 300 connections at once, all served"
    (call-with-fuzz-server
     dir #:nofile 4096 #:args '("--hold-fds" "1100" "--idle-timeout" "60")
     (λ (fs)
       (define path (fuzz-server-path fs))
       (define peers (for/list ([i 300]) (open-with-request path #t)))
       (for ([p peers]) (check-status (peer-answer p 1 20) 200))
       (define high (string->number (child-command fs "fds")))
       (printf "26: ~a sockets above fd 1024 in the child\n" high)
       (check-true (>= high 300))
       (for ([p peers]) (check-child-same p 2))
       (for-each peer-close! peers)
       (check-child-good fs))))))
