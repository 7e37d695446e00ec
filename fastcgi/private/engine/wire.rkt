#lang racket/base
;; The shared state of one server process and of one connection, and the connection's
;; single serialised writer. Request threads and the reader all write through `conn-send!`,
;; so records of different requests never interleave inside a write.
(require ffi/unsafe/atomic
         ffi/unsafe/custodian
         "../util/clock.rkt"
         "io.rkt"
         "../util/limits.rkt"
         "owner.rkt"
         "../util/table.rkt")
(provide (except-out (struct-out server) set-server-closing?! set-server-handover!
                     set-server-last-params! set-server-sleepers!)
         (except-out (struct-out conn) set-conn-deadline! set-conn-awaiting! set-conn-cref!
                     set-conn-write-deadline! set-conn-broken?! set-conn-closing?! set-conn-owner!
                     set-conn-reader! set-conn-inline! set-conn-pending! set-conn-mpx?!
                     set-conn-last-params!)
         (except-out (struct-out rd) set-rd-short?! set-rd-begun?! set-rd-served! set-rd-reads!
                     set-rd-fresh?!)
         make-conn make-fd-conn conn-fd
         conn-await! conn-await-idle-unless-sooner! conn-deadline-left conn-await-left!
         ensure-reader! before-block!
         conn-read! conn-try-read! conn-input-pending?
         conn-lock! conn-send! conn-send-records!
         conn-close! conn-broken!
         counter-add! stat-add!
         server-sleep-until-request! server-on-next-request! server-wake-sleepers!
         now-ms)

;; Per process. handler: fastcgi-request -> any. roles: the roles the handler takes.
;; connections: table (table.rkt) of conn-key -> conn, scanned by the deadline manager.
;; observer: (or/c #f (fastcgi-request flonum -> any)), told of every answered request with
;; its duration in ms (access log, counters); it runs in the request's thread and must
;; not raise.
(struct server (handler roles limits connections
                running         ; box: handlers running now (for max-concurrent)
                stats           ; mutable hasheq: symbol -> count, for status pages and tests
                [closing? #:mutable] ; graceful stop under way: no new requests
                observer
                request-cost    ; box: flonum, recent CPU ms per request (queue-delay-estimator)
                notes           ; hasheq: kind -> vector, for log lines a peer can make
                                ; many of (log-limit.rkt)
                handler-group   ; thread group of every handler thread (see serve-connection)
                stretch         ; box: flonum >= 1, how much slower than its CPU cost work goes
                timer           ; the server's one timer (timer.rkt): every deadline, every
                                ; periodic scan of its connections and requests
                ;; the params of the last request read on any connection: a new connection's
                ;; first request shares byte strings with them (see conn's last-params)
                [last-params #:mutable]
                ;; #f, or the semaphores of threads that wait for the next request
                ;; (server-sleep-until-request!), posted when one arrives
                [sleepers #:auto #:mutable]
                ;; #f, or while a retiring server hands its idle kept connections over to
                ;; siblings (handover.rkt): their addresses
                [handover #:auto #:mutable])
  #:auto-value #f
  #:transparent)

;; server-sleep-until-request! : server (-> boolean) -> void
;; Waits for the next request to arrive (server-wake-sleepers!), if (idle?) still holds
;; once this thread is registered: for periodic work that polls while requests come and
;; need not while none does (a thread that sleeps a few ms at a time keeps Racket CS's
;; scheduler polling instead of waiting, which costs an idle server CPU).
(define (server-sleep-until-request! srv idle?)
  (define sema (make-semaphore 0))
  (when (server-on-next-request! srv sema idle?) (semaphore-wait sema)))

;; server-on-next-request! : server semaphore (-> boolean) -> boolean
;; As server-sleep-until-request!, without waiting: sema is posted at the next request if
;; (idle?) holds once it is registered (#t), else nothing is registered (#f).
(define (server-on-next-request! srv sema idle?)
  (start-atomic)
  (define idle (idle?))
  (when idle (set-server-sleepers! srv (cons sema (or (server-sleepers srv) '()))))
  (end-atomic)
  idle)

;; server-wake-sleepers! : server -> void ; a request arrived: the sleepers go on
(define (server-wake-sleepers! srv)
  (when (server-sleepers srv)
    (start-atomic)
    (define semas (or (server-sleepers srv) '()))
    (set-server-sleepers! srv #f)
    (end-atomic)
    (for ([s (in-list semas)]) (semaphore-post s))))

;; Per connection. io: its I/O actions (io.rkt), over the socket's descriptor or, in
;; tests, over ports. broken-sema: posted once broken. cref: the fd's registration with
;; its custodian.
(struct conn (io peer server lock requests broken-sema broken-evt [cref #:mutable]
              [deadline #:mutable]        ; ms after which the reader is cut off, or #f
              [awaiting #:mutable]        ; what deadline is for (conn-await!'s what)
              [write-deadline #:mutable]  ; ms after which the blocked write is cut off, or #f
              [broken? #:mutable]         ; the socket failed or was cut: nothing more is sent
              [closing? #:mutable]        ; draining before close: no new requests
              ;; Who reads it now (owner.rkt), and the reader's own state (connection.rkt):
              ;; both set once, when the connection is served; #f before.
              [owner #:mutable] [reader #:mutable]
              ;; Inline handlers (see connection.rkt): the request the reader thread is
              ;; running itself, or #f; a request whose params ended, waiting for its
              ;; input to end to run inline; whether the front ever had two requests live
              ;; at once here (then: a thread each).
              [inline #:mutable] [pending #:mutable] [mpx? #:mutable]
              ;; the params of the last request read here, at first the server's (their byte
              ;; strings are shared with the next request's where equal: parse-params in
              ;; protocol.rkt)
              [last-params #:mutable]
              ;; a number no other connection of this process has: the server's table of
              ;; connections is keyed by it, since hashing the struct itself (eq-hash-code)
              ;; puts every new connection into Racket's global weak table of hash codes
              key
              ;; posted to wake a reader thread waiting for input, while its server hands
              ;; connections over (see conn-read!)
              wake))

;; The reader's state (conn-reader), shared by the threads that read a connection in turn
;; (owner.rkt says which reads it now); connection.rkt writes it. reads: read() calls in
;; this turn of the loop; done: what the thread that sees the end does; paramz: the
;; parameterization the connection was served with, for every reader thread of it; fresh?:
;; bytes came since the read deadline was last chosen (connection.rkt's next-deadline!).
(struct rd (decoder [short? #:mutable] [begun? #:mutable] [served #:mutable] done paramz
                    [reads #:mutable] [fresh? #:mutable]))

;; Who writes what: a field without a setter below is written here. Each owner submodule
;; is required only by the module it is named after (tests/owners-test.rkt).
(module+ connection
  (provide set-conn-owner! set-conn-reader! set-conn-inline!
           set-rd-short?! set-rd-begun?! set-rd-served! set-rd-reads! set-rd-fresh?!))
(module+ dispatch (provide set-conn-mpx?!))
(module+ handler-run (provide set-conn-pending!))
(module+ request-state (provide set-conn-last-params! set-server-last-params!))
(module+ server (provide set-server-closing?! set-server-handover!))
(module+ for-tests
  (define-syntax-rule (owners o ...) (begin (require (submod ".." o) ...)
                                            (provide (all-from-out (submod ".." o) ...))))
  (owners connection dispatch handler-run request-state server)
  (provide set-conn-deadline! set-conn-awaiting! set-conn-cref! set-conn-write-deadline!
           set-conn-broken?! set-conn-closing?! set-server-sleepers!))

;; ---------------------------------------------------------------------------------------
;; The read deadline: when the reader gives up on a peer that sends nothing. It is set
;; only here, by what the connection waits for, each with its timeout of the limits:
(define deadline-timeouts
  `((first-byte . ,limits-first-byte-timeout) ; a new connection's first record
    (read . ,limits-read-timeout)             ; the rest of a record, or a request's input
    (idle . ,limits-idle-timeout)             ; a kept connection's next request
    (drain . ,limits-drain-timeout)))         ; the peer's end, after a graceful close

;; conn-await! : conn (or/c 'first-byte 'read 'idle 'drain #f) -> void
;; From now, the connection waits for what; #f: for nothing from the peer (a handler runs,
;; or the reader waits for one), so no deadline.
(define (conn-await! c what)
  (set-conn-awaiting! c what)
  (set-conn-deadline! c (and what (deadline-after c what))))

;; conn-await-idle-unless-sooner! : conn -> void
;; Its last request has ended: the idle deadline, unless an earlier one is set (the read
;; timeout of a partial record, which it then still awaits).
(define (conn-await-idle-unless-sooner! c)
  (define idle (deadline-after c 'idle))
  (define old (conn-deadline c))
  (unless (and old idle (< old idle)) (set-conn-awaiting! c 'idle))
  (set-conn-deadline! c (if old (min old idle) idle)))

;; conn-deadline-left : conn -> (values (or/c symbol #f) (or/c natural #f))
;; What the connection awaits and the ms its deadline has left (0 once passed; #f when
;; that timeout is off): what a connection handed over to a sibling takes with it.
(define (conn-deadline-left c)
  (define d (conn-deadline c))
  (values (conn-awaiting c) (and d (max 0 (inexact->exact (ceiling (- d (now-ms))))))))

;; conn-await-left! : conn (or/c 'first-byte 'read 'idle #f) (or/c real #f) -> void
;; As conn-await!, with the ms left that another process's deadline had (a connection
;; handed over), so that a handover neither renews nor shortens it. left #f: that process
;; had the timeout off; this one's own then starts now (a reload may have set one).
(define (conn-await-left! c what left)
  (cond [(and what left) (set-conn-awaiting! c what)
                         (set-conn-deadline! c (+ (now-ms) left))]
        [else (conn-await! c what)]))

;; deadline-after : conn symbol -> (or/c flonum #f) ; #f when that timeout is off
(define (deadline-after c what)
  (define secs ((cdr (assq what deadline-timeouts)) (server-limits (conn-server c))))
  (and secs (+ (now-ms) (* 1000 secs))))

;; conn-fd : conn -> (or/c fd #f) ; the socket's descriptor (#f over ports)
(define (conn-fd c) (io-fd (conn-io c)))

;; make-conn : input-port output-port string server -> conn ; a connection over ports
(define (make-conn in out peer srv)
  (new-conn (port-io in out) peer srv))

;; make-fd-conn : fd string server -> conn
;; A connection over a socket fd, which it now owns: conn-broken! closes it, and so does a
;; shutdown of the current custodian. No ports: making and closing an fd's two ports costs
;; more than the rest of accepting a connection (bench/OPTIMISATIONS.md, no ports).
(define (make-fd-conn fd peer srv)
  (define c (new-conn (fd-io fd) peer srv))
  ;; weak: a strong registration costs a will per connection, which made GC slower per
  ;; connection; the server's table of connections holds c until it ends (#f when the
  ;; custodian is already shut down: then only conn-broken! closes the fd)
  (set-conn-cref! c (register-custodian-shutdown c conn-cut! #:weak? #t))
  c)

;; new-conn : io string server -> conn
(define (new-conn x peer srv)
  (define sema (make-semaphore 0))
  (conn x peer srv (make-semaphore 1) (make-table) sema (semaphore-peek-evt sema) #f
        #f #f #f #f #f #f #f #f #f #f (server-last-params srv)
        (counter-add! conn-keys 1) (make-semaphore 0)))

(define conn-keys (box 0))

;; ensure-reader! : conn -> void
;; While the reader thread runs a handler inline, nothing reads the connection: this
;; starts a new reader thread that goes on from where it stopped (once; no-op otherwise:
;; owner.rkt's take-over). Called when the handler waits on its abort-evt, and by the
;; server's watcher once an inline handler has run for a while.
(define (ensure-reader! c)
  (define o (conn-owner c))
  (when o (owner-take-over! o)))

;; before-block! : conn -> void ; about to block on c's behalf (owner-before-block!)
(define (before-block! c)
  (define o (conn-owner c))
  (when o (owner-before-block! o)))

;; counter-add! : box integer -> integer ; atomic add on a box shared by threads
(define (counter-add! b n)
  (let loop ()
    (define old (unbox b))
    (if (box-cas! b old (+ old n)) (+ old n) (loop))))

;; stat-add! : server symbol [natural] -> void ; atomic: request threads and the reader all count
(define (stat-add! srv key [n 1])
  (define stats (server-stats srv))
  (start-atomic)
  (hash-set! stats key (+ n (hash-ref stats key 0)))
  (end-atomic))

;; conn-broken! : conn -> void ; mark the connection unusable and close its socket (or
;; ports), which wakes a reader or writer blocked on it (with broken-evt); its owner
;; learns it (owner-lost!).
(define (conn-broken! c)
  (when (conn-cut! c)
    (define cref (conn-cref c))
    (when cref (unregister-custodian-shutdown c cref))
    (define o (conn-owner c))
    (when o (owner-lost! o))))

;; conn-cut! : conn -> boolean ; #t the first time: marks the connection broken and closes
;; its io (also the custodian's shutdown callback for it). The fd leaves the event loop
;; before it is closed: after, its number may be the next connection's.
(define (conn-cut! c)
  (start-atomic)
  (define first? (not (conn-broken? c)))
  (when first?
    (set-conn-broken?! c #t)
    (when (conn-owner c) (owner-forget! (conn-owner c) #t)))
  (end-atomic)
  (when first?
    (io-close! (conn-io c))
    (semaphore-post (conn-broken-sema c)))
  first?)

;; conn-close! : conn -> void
;; Graceful close: no new requests, half-close, then the reader drains what the peer still
;; sends until EOF or drain-timeout, and closes.
(define (conn-close! c)
  (unless (or (conn-closing? c) (conn-broken? c))
    (set-conn-closing?! c #t)
    (conn-await! c 'drain)
    (conn-lock! c)
    (io-shutdown! (conn-io c))
    (semaphore-post (conn-lock c))))

;; conn-read! : conn bytes natural natural [boolean] -> (or/c natural eof exn:fail 'wake)
;; Blocks until the connection has bytes (at least one is read into bs[start, end)), the
;; peer closed it (eof) or the connection was broken (eof). A socket error is returned, not
;; raised (an exception handler per read costs more than the read's own work). 'wake:
;; the wake semaphore was posted (while its server hands connections over: the reader is
;; to see whether it can hand this one over).
;; wait-first?: the caller's last read was short, so the socket is most likely empty:
;; wait for it to be readable before the first read, rather than make a read() that
;; only says EAGAIN (one system call per request on a kept connection).
(define (conn-read! c bs start end [wait-first? #f])
  (define x (conn-io c))
  (let loop ([wait? wait-first?])
    (define r (cond [(conn-broken? c) eof] [wait? 0] [else (io-receive! x bs start end)]))
    (cond
      [(eqv? r 0)
       ;; (the wake semaphore is waited on always: a reader that began to wait before its
       ;; server began to hand connections over must see the wake too)
       (if (eq? (sync (io-readable-evt x) (conn-broken-evt c) (conn-wake c)) (conn-wake c))
           'wake
           (loop #f))]
      [else r])))

;; conn-try-read! : conn bytes natural natural -> (or/c natural eof exn:fail)
;; One read that does not wait: 0 when the connection has nothing now; eof at the end or
;; once the connection is broken; a socket error is returned, as by conn-read!.
(define (conn-try-read! c bs start end)
  (if (conn-broken? c) eof (io-receive! (conn-io c) bs start end)))

;; conn-input-pending? : conn -> boolean ; unread bytes wait in the socket (see
;; socket-input-pending?); #f for a broken connection or one over ports
(define (conn-input-pending? c)
  (and (not (conn-broken? c)) (io-input-pending? (conn-io c))))

;; conn-lock! : conn -> void
;; Takes the connection's write lock; if another thread holds it, first tells the event
;; loop (before-block!), which must not wait on one connection.
(define (conn-lock! c)
  (unless (semaphore-try-wait? (conn-lock c))
    (before-block! c)
    (semaphore-wait (conn-lock c))))

;; conn-send! : conn bytes [natural natural (or/c #f (-> boolean))] -> boolean
;; One write of bs[start,end) under the connection lock, bounded by the write timeout.
;; #f when the connection is broken (the bytes are dropped, the caller's request is aborted)
;; or when `still?`, checked under the lock, says the write no longer belongs on the wire.
;; Breaks are off inside: a handler stopped by the request timeout never leaves the lock held.
(define (conn-send! c bs [start 0] [end (bytes-length bs)] [still? #f])
  (parameterize-break #f
    (locked-send c still? (send-all! c bs start end))))

;; conn-send-records! : conn bytes bytes natural natural natural (or/c #f (-> boolean))
;;                      -> boolean
;; As conn-send!, of k records in a row, the j-th being heads[8j, 8j + 8) and then
;; bs[start + nj, start + n(j + 1)): a large write's records, in one sendmsg when the
;; socket takes them (after a short one, the record it stopped in is finished, waiting as
;; conn-send! does, and the rest go on the same way). Nothing else is sent between them.
(define (conn-send-records! c heads bs start n k still?)
  (parameterize-break #f
    (locked-send c still? (send-records! c heads bs start n k))))

;; (locked-send c still? send-expr): under the connection's write lock, send-expr's
;; boolean (did everything leave?), or #f without evaluating it when the connection is
;; broken or (still?) says the request has ended. A failed send breaks the connection.
(define-syntax-rule (locked-send c still? send-expr)
  (let ([lock (conn-lock c)])
    (conn-lock! c)
    (cond
      [(or (conn-broken? c) (and still? (not (still?)))) (semaphore-post lock) #f]
      [else
       (define ok? send-expr)
       (set-conn-write-deadline! c #f)
       (semaphore-post lock)
       (unless ok? (conn-broken! c))
       ok?])))

;; send-records! : conn bytes bytes natural natural natural [natural] -> boolean
;; Records j0 to k - 1 in one io-send-records!; a record it left partly sent is finished
;; by send-all! (which waits while the connection is full), then the rest go the same way.
(define (send-records! c heads bs start n k [j0 0])
  (define r (io-send-records! (conn-io c) heads (* 8 j0) bs (+ start (* n j0)) n (- k j0)))
  (define size (+ 8 n))
  (define j (+ j0 (quotient r size)))
  (define off (remainder r size))
  (cond
    [(= j k) #t]
    [else
     (define h (* 8 j))
     (define from (+ start (* n j)))
     (and (if (< off 8)
              (and (send-all! c heads (+ h off) (+ h 8)) (send-all! c bs from (+ from n)))
              (send-all! c bs (+ from (- off 8)) (+ from n)))
          (or (= (add1 j) k) (send-records! c heads bs start n k (add1 j))))]))

;; send-all! : conn bytes natural natural -> boolean ; #f when broken or on an error
;; The write deadline starts only when the connection is full: most answers leave in one
;; send that does not wait, and then no clock is read.
(define (send-all! c bs start end)
  (define x (conn-io c))
  (let loop ([i start])
    (define r (io-send! x bs i end))
    (cond
      [(not r) #f]
      [(= (+ i r) end) #t]
      [else
       (when (zero? r)
         (unless (conn-write-deadline c) (start-write-deadline! c))
         (before-block! c)
         (sync (io-writable-evt x) (conn-broken-evt c)))
       (loop (+ i r))])))

;; start-write-deadline! : conn -> void
(define (start-write-deadline! c)
  (set-conn-write-deadline! c (+ (now-ms) (* 1000 (limits-write-timeout (server-limits (conn-server c)))))))
