#lang racket/base
;; What the connection engine's tests (tests/connection-test.rkt,
;; connection-limits-test.rkt, connection-framing-test.rkt, and the end-to-end cases of
;; dispatch-test, handlers-test and request-output-test) share: the handler they serve,
;; an in-process server on a unix socket with it (tests/lib/raw-peer.rkt), the check that a
;; good request is still answered, and the checks of what was logged.
(require racket/port
         rackunit
         "../../fastcgi/main.rkt"
         "raw-peer.rkt")
(provide report! next-event gate handler-runs
         handler size-body all-roles with-server check-good-request
         make-log-checks)

;; -- the handler --------------------------------------------------------------------------
;; Its behaviour is picked by the MODE param; it reports to the test through `report!`
;; (never blocking) and waits on named gates.
(define-values (report! next-event) (make-event-log))
(define gates (make-hash))
(define handler-runs (box 0))
(define last-lazy (box #f))   ; the params of the last MODE=lazy request

;; gate : string -> semaphore
(define (gate name) (hash-ref! gates name (λ () (make-semaphore 0))))

(define (handler r)
  (set-box! handler-runs (add1 (unbox handler-runs)))
  (define out (fastcgi-request-stdout r))
  (define mode (bytes->string/utf-8 (fastcgi-param r "MODE" #"echo")))
  (define (try thunk) (with-handlers ([(λ (e) #t) values]) (thunk)))
  (case mode
    [("echo")
     (define body (port->bytes (fastcgi-request-stdin r)))
     (write-bytes ok-head out)
     (fprintf out "id=~a role=~a keep=~a\n" (fastcgi-request-id r) (fastcgi-request-role r)
              (fastcgi-request-keep-conn? r))
     (for ([p (fastcgi-request-params r)]) (fprintf out "~a=~a\n" (car p) (cdr p)))
     (fprintf out "body=~a" body)]
    [("lazy")
     ;; a look-up before and after the list is made, the list asked for twice, and the
     ;; list compared with the one the previous "lazy" request made
     (define before (fastcgi-param r "DUP"))
     (define ps (fastcgi-request-params r))
     (define prev (unbox last-lazy))
     (set-box! last-lazy ps)
     (write-bytes ok-head out)
     (write (list before (fastcgi-param r "DUP") (fastcgi-param r #"NONE" 'none)
                  (eq? ps (fastcgi-request-params r)) (length ps)
                  (and prev (eq? (car (list-ref ps 1)) (car (list-ref prev 1))))
                  (and prev (eq? (cdr (list-ref ps 1)) (cdr (list-ref prev 1)))))
            out)]
    [("size")
     ;; N bytes of answer (body byte k is k mod 251) in writes of W bytes, immutable ones
     ;; with IMM (the stdout buffer grows on the way; writes of a record's worth or more
     ;; leave without being copied into it)
     (define n (string->number (bytes->string/utf-8 (fastcgi-param r "N"))))
     (define w (string->number (bytes->string/utf-8 (fastcgi-param r "W" #"1000"))))
     (define imm? (fastcgi-param r "IMM"))
     (write-bytes ok-head out)
     (let loop ([at 0])
       (when (< at n)
         (define piece (size-body at (min n (+ at w))))
         (write-bytes (if imm? (bytes->immutable-bytes piece) piece) out)
         (loop (+ at w))))]
    [("auth")
     (if (equal? (fastcgi-param r "AUTH") #"ok")
         (write-bytes #"Status: 200\r\nVariable-USER: bob\r\n\r\n" out)
         (write-bytes #"Status: 403 Forbidden\r\nContent-Type: text/plain\r\n\r\ndenied" out))]
    [("filter")
     (define in (port->bytes (fastcgi-request-stdin r)))
     (define data (port->bytes (fastcgi-request-data r)))
     (define declared (string->number (bytes->string/utf-8 (fastcgi-param r "FCGI_DATA_LENGTH"))))
     (write-bytes ok-head out)
     (fprintf out "stdin=~a data=~a length-ok=~a" in (bytes-length data)
              (= declared (bytes-length data)))]
    [("wait")
     (report! (list 'started (fastcgi-request-id r)))
     (sync/timeout 5 (gate (bytes->string/utf-8 (fastcgi-param r "GATE"))))
     (write-bytes ok-head out)
     (fprintf out "waited ~a" (fastcgi-request-id r))]
    [("read-body")
     (report! 'started)
     (report! (try (λ () (port->bytes (fastcgi-request-stdin r)))))]
    [("abort-evt")
     (report! 'started)
     (report! (if (sync/timeout 5 (fastcgi-request-abort-evt r)) 'aborted 'not-aborted))]
    [("stderr")
     (write-string "oops: something went wrong" (current-error-port))
     (write-bytes ok-head out)
     (write-bytes #"fine" out)]
    [("stderr-thread")
     ;; a thread the handler starts writes to current-error-port, then to the request's
     ;; own stderr port
     (thread-wait (thread (λ () (write-string "from a thread;" (current-error-port)))))
     (write-string "own port" (fastcgi-request-stderr r))
     (write-bytes ok-head out)]
    [("raise") (write-bytes #"Status: 200 OK\r\n" out) (error 'handler "boom")]
    [("big")
     (write-bytes ok-head out)
     (for ([i 48]) (write-bytes (make-bytes 65536 (+ 65 (modulo i 26))) out))]
    [("count")
     (define buf (make-bytes 4096))
     (define n (let loop ([n 0])
                 (define k (read-bytes-avail! buf (fastcgi-request-stdin r)))
                 (if (eof-object? k) n (loop (+ n k)))))
     (write-bytes ok-head out)
     (fprintf out "count=~a" n)]
    [("digest")
     ;; reads slowly (the body backs up into the reader) and answers the SHA-256 of it
     (define in (fastcgi-request-stdin r))
     (define all (let loop ([acc '()] [i 0])
                   (when (zero? (modulo i 64)) (sleep 0.005))
                   (define piece (read-bytes 1000 in))
                   (if (eof-object? piece) (apply bytes-append (reverse acc)) (loop (cons piece acc) (add1 i)))))
     (write-bytes ok-head out)
     (fprintf out "sha256=~s length=~a" (sha256-bytes all) (bytes-length all))]
    [("flood")
     (report! (try (λ () (for ([i 4096]) (write-bytes (make-bytes 65536 120) out)) 'wrote-all)))]
    [else (error 'handler "unknown mode ~a" mode)]))

;; size-body : natural natural -> bytes ; bytes [from, to) of the "size" mode's body
(define (size-body from to)
  (define bs (make-bytes (- to from)))
  (for ([k (in-range from to)]) (bytes-set! bs (- k from) (modulo k 251)))
  bs)

;; -- helpers ------------------------------------------------------------------------------
(define all-roles '(responder authorizer filter))

;; with-server : [limits] (path -> any) -> any
(define (with-server proc #:limits [lim (make-limits)])
  (call-with-server handler proc #:roles all-roles #:limits lim))

;; check-good-request : path -> void ; a fresh connection still gets an answer
(define (check-good-request path)
  (with-peer path
    (λ (p)
      (peer-send! p (request-bytes 1 #:params (params "X" "still-alive") #:stdin #"b"))
      (define a (peer-answer p 1))
      (check-equal? (cgi-status (answer-stdout a)) 200)
      (check-has #rx#"X=still-alive" (answer-stdout a)))))

;; make-log-checks : -> (values (regexp -> void) (-> void))
;; check-logged and check-not-logged, on the warnings logged from this call on.
(define (make-log-checks)
  (define log-rx (make-log-receiver fastcgi-logger 'warning))

  ;; check-logged : regexp -> void ; a warning matching rx was logged, on one escaped line
  ;; A line that follows from a peer's input is written for the first 10 of its kind a
  ;; second (warn-limited!): the pause keeps a file's checks under that.
  (define (check-logged rx)
    (sleep 0.11)
    (define lines (let loop ([acc '()])
                    (define v (sync/timeout 0.5 log-rx))
                    (if (and v (not (regexp-match? rx (vector-ref v 1))))
                        (loop (cons (vector-ref v 1) acc))
                        (if v (cons (vector-ref v 1) acc) acc))))
    (check-true (and (pair? lines) (regexp-match? rx (car lines))) (format "~s in ~s" rx lines))
    (check-false (and (pair? lines) (regexp-match? #rx"[\0-\37]" (car lines)))))

  ;; check-not-logged : -> void ; no warning at all for what was just done
  (define (check-not-logged)
    (check-false (sync/timeout 0.2 log-rx)))
  (values check-logged check-not-logged))
