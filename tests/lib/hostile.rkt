#lang racket/base
;; What the HOSTILE.md tests (tests/hostile-*-test.rkt) share: the handler they serve, an
;; in-process engine on a unix socket, and the checks that follow each hostile input (a
;; good request still served, the log clean, everything released, the peak memory of a
;; child server (tests/fuzz/server.rkt) bounded, read in /proc/PID/status).
;;
;; The items of HOSTILE.md, by file:
;;   5, 11, 12, 14                     tests/hostile-params-test.rkt
;;   18, 21, 22                        tests/hostile-body-test.rkt
;;   23, 24                            tests/hostile-handler-test.rkt
;;   19, 20                            tests/hostile-timeouts-test.rkt
;;   5, 8, 13, 14, 18 by the thousand  tests/hostile-memory-test.rkt
;;   14, 15, 17 (the servlet adapter)  tests/hostile-adapter-test.rkt
;;   26                                tests/hostile-storm-test.rkt
;;   1, 2, 3, 4, 6, 7, 9, 10           tests/connection-framing-test.rkt
;;   16 and 29                         tests/security-test.rkt
;;   25, 27, 28                        the process manager's tests (28's stale and live
;;                                     socket files: tests/open-listener-test.rkt)
(require racket/file
         racket/list
         racket/port
         rackunit
         "../../fastcgi/main.rkt"
         "../../fastcgi/private/protocol/protocol.rkt"
         (only-in "../../fastcgi/private/engine/server.rkt" start-server
                  running-server-server running-server-stop)
         (only-in "../../fastcgi/private/transport/transport.rkt" listener-for)
         (only-in "../../fastcgi/private/engine/wire.rkt" server-connections server-running)
         (only-in "../../fastcgi/private/util/table.rkt" table-count)
         "../fuzz/fuzz.rkt"
         "../integration/lib.rkt"
         "raw-peer.rkt")
(provide handler report! next-event handler-runs
         all-roles call-with-engine
         check-good-request check-same-connection memory-use
         call-with-log check-log-clean levels wait-for check-released
         peak-growth-kb child-answer check-child-good check-child-same
         end-statuses check-once-a-second on-connections new-log-lines
         max-growth-kb)

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
     (define rs (start-server h (listener-for (string-append "unix:" path))
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
