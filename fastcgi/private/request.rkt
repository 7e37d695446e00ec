#lang racket/base
;; One FastCGI request as the raw interface sees it, and its streams:
;; - stdin and data: bounded pipes fed by the connection's reader; reads fail once the
;;   request is aborted. The stdin pipe is made on first use (the handler asks for it, or
;;   body bytes arrive): most requests have no body and most handlers never read it, and
;;   its custom port is the costliest object of a request (about 5 KiB and 1.5 us);
;; - stdout: buffered into records of up to 65528 bytes; the last record, the empty STDOUT
;;   and END_REQUEST leave in one write;
;; - stderr: each write becomes STDERR records at once. Its port too is made on first use;
;;   a handler's current-error-port is one port for all requests (handler-error-port).
(require ffi/unsafe/atomic
         "limits.rkt"
         "protocol.rkt"
         (only-in "table.rkt" table-count)
         (only-in "transport.rkt" sendrecs-max)
         "wire.rkt")
(provide (except-out (struct-out fastcgi-request) fastcgi-request-pv fastcgi-request-stdin-port
                     set-fastcgi-request-stdin-port! set-fastcgi-request-stdin-out!
                     fastcgi-request-stderr-port set-fastcgi-request-stderr-port!)
         fastcgi-request-params
         fastcgi-request-raw-params
         (struct-out raw-params)
         fastcgi-request-stdin
         fastcgi-request-stderr
         handler-error-port
         set-handler-request!
         request-stdin-out
         close-request-stdin!
         close-request-data!
         request-body-empty?
         (struct-out exn:fail:fastcgi:aborted)
         (struct-out exn:fail:fastcgi:body)
         make-fastcgi-request
         request-param
         request-param/scan
         request-input-done?
         request-abort!
         request-end-now!
         request-finish!
         request-respond-status!
         head-status)

(struct exn:fail:fastcgi:aborted exn:fail:fastcgi ())
;; raised by a body read when the body went over max-body or CONTENT_LENGTH: answered 413
(struct exn:fail:fastcgi:body exn:fail:fastcgi ())

;; The public part: id, role ('responder 'authorizer 'filter), keep-conn?, params (list of
;; (cons bytes bytes) in arrival order), stdin, data (#f unless Filter), stdout, stderr,
;; abort-evt (ready once the request is aborted), peer (the front's address).
;; The rest belongs to the connection.
(struct fastcgi-request
  (id role keep-conn? [pv #:mutable] [stdin-port #:mutable] [data #:mutable]
      [stdout #:mutable] [stderr-port #:mutable] abort-evt peer
      conn abort-sema
      [stdin-out #:mutable]       ; #f (no pipe yet), 'closed (none, and stdin ended) or the port
      [data-out #:mutable] start-ms
      [table #:mutable]           ; hash of params, built on first look-up
      [state #:mutable]           ; 'params 'stdin 'data 'running 'done
      [rejected #:mutable]        ; #f, or the byte limit the body went over
      [params-acc #:mutable]      ; list of PARAMS chunks, newest first
      [params-size #:mutable]
      [body-bytes #:mutable]      ; STDIN bytes received so far
      [data-bytes #:mutable]      ; DATA bytes received so far
      [buf #:mutable] [fill #:mutable] ; stdout buffer; content starts at 8 (header room)
      [sent? #:mutable]           ; some stdout already left
      [status #:mutable]          ; status of the answer, for the access log
      [bytes-out #:mutable]
      [handler #:mutable]         ; the handler's thread, once it runs
      [broken-ms #:mutable]       ; when the request timeout broke the handler, or #f
      [pipes #:mutable]))         ; boxes of the body pipes' reading ends (make-body-pipe)

(define header-room 8)
(define max-chunk 65528)
;; most answers of a hello-world size fit; a larger one doubles its way up (a 1 MiB answer
;; makes 8 buffers on its way to the 64 KiB record, once per request)
(define initial-buffer 512)
;; room after the content for padding (7), the empty STDOUT (8), END_REQUEST (16) and the
;; closing trailer (8: see closing-trailer?)
(define tail-room 40)

;; make-fastcgi-request : conn natural symbol boolean -> fastcgi-request
(define (make-fastcgi-request c id role keep-conn?)
  (define limit (limits-stdin-buffer (server-limits (conn-server c))))
  (define sema (make-semaphore 0))
  (define r
    ;; abort-evt, as the handler sees it: waiting on it needs a reader on the connection,
    ;; which an inline handler has to ask for (ensure-reader!)
    (fastcgi-request id role keep-conn? '() #f #f #f #f
                     (guard-evt (λ () (ensure-reader! c) (semaphore-peek-evt sema))) (conn-peer c)
                     c sema #f #f (now-ms)
                     #f 'params #f '() 0 0 0 #f header-room #f #f 0 #f #f '()))
  (when (eq? role 'filter)
    (define-values (data data-out) (make-body-pipe r limit))
    (set-fastcgi-request-data! r data)
    (set-fastcgi-request-data-out! r data-out))
  (set-fastcgi-request-stdout! r (make-stdout-port r))
  r)

;; fastcgi-request-stderr : request -> output-port ; made on first use
(define (fastcgi-request-stderr r)
  (or (fastcgi-request-stderr-port r)
      (let ([port (make-output-port 'fastcgi-stderr always-evt
                                    (λ (bs start end non-block? breakable?) (stderr-write! r bs start end))
                                    void)])
        (start-atomic)
        (unless (fastcgi-request-stderr-port r) (set-fastcgi-request-stderr-port! r port))
        (end-atomic)
        (fastcgi-request-stderr-port r))))

;; The request whose handler a thread runs (or ran last), and every thread it starts
;; (a preserved cell: a new thread starts with its creator's value). #f elsewhere.
(define handler-request (make-thread-cell #f #t))

;; set-handler-request! : (or/c request #f) -> void ; for the thread about to run r's handler
(define (set-handler-request! r) (thread-cell-set! handler-request r))

;; handler-error-port : output-port
;; A handler's current-error-port: what a thread writes there goes to the STDERR of its
;; handler-request (as to that request's own stderr port, so it fails once the request
;; has ended), or to the process's standard error in a thread no handler started. One
;; port for all requests, not one more custom port per request (a fifth of what making
;; a request cost).
(define process-error-port (current-error-port))
(define handler-error-port
  (make-output-port
   'fastcgi-stderr
   always-evt
   (λ (bs start end non-block? breakable?)
     (define r (thread-cell-ref handler-request))
     (cond
       [r (stderr-write! r bs start end)]
       [else (write-bytes bs process-error-port start end) (flush-output process-error-port)
             (- end start)]))
   void))

;; fastcgi-request-stdin : request -> input-port ; the body, as the handler reads it
(define (fastcgi-request-stdin r)
  (or (fastcgi-request-stdin-port r) (make-stdin! r)))

;; request-stdin-out : request -> output-port
;; The reader's end of the stdin pipe, made now if need be (closed if stdin has ended).
(define (request-stdin-out r)
  (define out (fastcgi-request-stdin-out r))
  (if (output-port? out) out (begin (make-stdin! r) (fastcgi-request-stdin-out r))))

;; close-request-stdin! : request -> void ; stdin has ended (or the request has)
(define (close-request-stdin! r)
  (start-atomic)
  (define out (fastcgi-request-stdin-out r))
  (unless out (set-fastcgi-request-stdin-out! r 'closed))
  (end-atomic)
  (when (output-port? out) (close-output-port out)))

;; close-request-data! : request -> void ; a Filter's DATA has ended (or the request has)
(define (close-request-data! r)
  (define out (fastcgi-request-data-out r))
  (when (output-port? out) (close-output-port out)))

;; request-body-empty? : request -> boolean
;; STDIN ended with no byte before anyone asked for the pipe (a GET): an adapter can read
;; the body from an empty port and spare the pipe.
(define (request-body-empty? r)
  (and (eq? (fastcgi-request-stdin-out r) 'closed)
       (eqv? 0 (fastcgi-request-body-bytes r))))

;; make-stdin! : request -> input-port
;; Atomic: the handler's thread and the reader may both be first. A stdin that ended
;; before its pipe was made gets a pipe already closed (its reads see eof, or the abort).
(define (make-stdin! r)
  (start-atomic)
  (unless (fastcgi-request-stdin-port r)
    (define-values (in out)
      (make-body-pipe r (limits-stdin-buffer (server-limits (conn-server (fastcgi-request-conn r))))))
    (when (eq? (fastcgi-request-stdin-out r) 'closed) (close-output-port out))
    (set-fastcgi-request-stdin-port! r in)
    (set-fastcgi-request-stdin-out! r out))
  (end-atomic)
  (fastcgi-request-stdin-port r))

;; make-body-pipe : request natural -> (values input-port output-port)
;; A pipe of at most `limit` bytes. Its reading end fails once the request is aborted, and
;; at the end of a body that the reader cut off because it went over a limit. The pipe is
;; reached through a box that request-abort! empties: what was queued and never read goes
;; with the request, even while its handler (which may hold the port) runs on.
(define (make-body-pipe r limit)
  (define-values (in out) (make-pipe limit))
  (define abort-evt (semaphore-peek-evt (fastcgi-request-abort-sema r)))
  (define pipe (box in))
  (set-fastcgi-request-pipes! r (cons pipe (fastcgi-request-pipes r)))
  (values
   (make-input-port
    'fastcgi-stdin
    (λ (bs)
      (define in (unbox pipe))
      (cond
        [(or (not in) (sync/timeout 0 abort-evt))
         (raise (exn:fail:fastcgi:aborted "read: request aborted" (current-continuation-marks)))]
        [else
         (define n (read-bytes-avail!* bs in))
         (cond
           [(eqv? n 0) (wrap-evt (choice-evt in abort-evt) (λ (_) 0))]
           [(and (eof-object? n) (fastcgi-request-rejected r))
            (raise (exn:fail:fastcgi:body
                    (format "read: request body over the limit of ~a bytes" (fastcgi-request-rejected r))
                    (current-continuation-marks)))]
           [else n])]))
    #f
    void)
   out))

;; A request's params as they came: bs[start, end), which check-params accepted. The
;; server keeps them so until something asks for the list (fastcgi-request-params): a
;; handler that reads none or a few of them never pays for making twenty pairs.
(struct raw-params (bs start end))

;; raw-params-ref : raw-params bytes -> (or/c bytes #f) ; the first value of name, in place
(define (raw-params-ref v name)
  (params-ref (raw-params-bs v) (raw-params-start v) (raw-params-end v) name))

;; fastcgi-request-params : request -> (listof (cons bytes bytes))
;; Made on first use, sharing byte strings with the last params made on the same
;; connection (see parse-params); those are kept for the next request only when small.
(define (fastcgi-request-params r)
  (define v (fastcgi-request-pv r))
  (cond
    [(raw-params? v)
     (define c (fastcgi-request-conn r))
     (define pairs (parse-params (raw-params-bs v) +inf.0 (conn-last-params c)
                                 (raw-params-start v) (raw-params-end v)))
     (when (string? pairs) (error 'fastcgi-request-params "checked params failed to parse: ~a" pairs))
     (when (<= (- (raw-params-end v) (raw-params-start v)) max-kept-params)
       (set-conn-last-params! c pairs)
       (set-server-last-params! (conn-server c) pairs))
     (set-fastcgi-request-pv! r pairs)
     pairs]
    [else v]))

;; fastcgi-request-raw-params : request -> (or/c raw-params #f)
;; The params as they came, while no list of them was made (an adapter that reads them in
;; place, as web.rkt does); #f once it was.
(define (fastcgi-request-raw-params r)
  (define v (fastcgi-request-pv r))
  (and (raw-params? v) v))

;; The params of a connection's last request are kept, to share their byte strings with
;; the next request's, when they came in at most this many bytes.
(define max-kept-params 4096)

;; request-param : request (or/c bytes string) [any] -> any
;; The value (bytes) of a param, or default. The first occurrence of a name wins.
;; Params not made into a list yet are searched in place (a look-up is a walk of about
;; twenty pairs); once made, a table is built on the first look-up.
(define (request-param r name [default #f])
  (define key (if (string? name) (string->bytes/utf-8 name) name))
  (define v (fastcgi-request-pv r))
  (cond
    [(raw-params? v)
     (or (raw-params-ref v key) default)]
    [else
     (define t (or (fastcgi-request-table r)
                   (let ([t (for/fold ([t (hash)]) ([p (in-list (reverse v))])
                              (hash-set t (car p) (cdr p)))])
                     (set-fastcgi-request-table! r t)
                     t)))
     (hash-ref t key default)]))

;; request-param/scan : request bytes -> (or/c bytes #f)
;; The first value of a param by a walk, in place or of the list: for the engine's own
;; one or two look-ups per request (CONTENT_LENGTH), where building request-param's table
;; would cost more than it saves.
(define (request-param/scan r name)
  (define v (fastcgi-request-pv r))
  (if (raw-params? v)
      (raw-params-ref v name)
      (let loop ([ps v])
        (cond [(null? ps) #f]
              [(bytes=? (caar ps) name) (cdar ps)]
              [else (loop (cdr ps))]))))

;; request-input-done? : request -> boolean ; all the request's input streams have ended
(define (request-input-done? r)
  (memq (fastcgi-request-state r) '(running done)))

;; ---------------------------------------------------------------------------------------
;; Output.

;; check-live : request symbol -> void ; writes after the end or an abort fail
(define (check-live r who)
  (when (eq? (fastcgi-request-state r) 'done)
    (raise (exn:fail:fastcgi:aborted (format "~a: request already ended or aborted" who)
                                     (current-continuation-marks)))))

;; make-stdout-port : request -> output-port
;; The write procedure takes the whole write, record after record: a custom port passes
;; its procedure a fresh copy of what is left of the write on every call, so taking one
;; record per call made a 1 MiB write copy 8.5 MiB and cost 1.2 ms of CPU (0.1 ms now).
(define (make-stdout-port r)
  (make-output-port
   'fastcgi-stdout
   always-evt
   (λ (bs start end non-block? breakable?)
     (check-live r 'write)
     (cond
       [(= start end) (flush-stdout! r) 0]
       [(and (>= (- end start) max-chunk) (immutable? bs))
        (send-direct! r bs start end)
        (- end start)]
       [else
        (let loop ([i (+ start (buffer-stdout! r bs start end))])
          (cond
            [(= i end) (- end start)]
            [else (check-live r 'write) (loop (+ i (buffer-stdout! r bs i end)))]))]))
   void))

;; send-direct! : request immutable-bytes natural natural -> void
;; A write of at least a record's worth leaves without being copied into the record
;; buffer: each record is its header and then a piece of bs, sent straight from bs (which
;; cannot change: the port hands its procedure an immutable string, a copy unless the
;; writer's own was immutable), up to sendrecs-max records in one sendmsg. Each piece is
;; 65528 bytes, a multiple of 8, so needs no padding; what is left (under a record's
;; worth) goes into the buffer, to leave with what follows.
;; Buffered content leaves first; if the access log still wants the answer's status, the
;; buffer first takes up to 8 KiB more, so that the head is read as a buffered one is.
(define (send-direct! r bs start end)
  (define sniff? (not (or (fastcgi-request-sent? r) (fastcgi-request-status r)
                          (not (server-observer (conn-server (fastcgi-request-conn r)))))))
  (define i0
    (cond
      [(> (fastcgi-request-fill r) header-room)
       (define i (if sniff? (+ start (buffer-stdout! r bs start (min end (+ start 8192)))) start))
       (flush-stdout! r)
       i]
      [else
       (when sniff?
         (define status (head-status bs start (min end (+ start 8192))))
         (when status (set-fastcgi-request-status! r status)))
       start]))
  (let loop ([i i0])
    (define left (- end i))
    (cond
      [(>= left max-chunk)
       ;; up to sendrecs-max records in one sendmsg (each header, then its piece)
       (define n max-chunk)
       (define k (min sendrecs-max (quotient left n)))
       (define heads (make-bytes (* 8 k)))
       (for ([j (in-range k)]) (record-header! heads (* 8 j) 'stdout (fastcgi-request-id r) n 0))
       (check-live r 'write)
       (set-fastcgi-request-sent?! r #t)
       (set-fastcgi-request-bytes-out! r (+ (* k n) (fastcgi-request-bytes-out r)))
       (unless (conn-send-records! (fastcgi-request-conn r) heads bs i n k
                                   (λ () (not (eq? (fastcgi-request-state r) 'done))))
         (request-abort! r)
         (check-live r 'write))
       (loop (+ i (* k n)))]
      [else
       (let buffer ([i i])
         (unless (= i end)
           (check-live r 'write)
           (buffer (+ i (buffer-stdout! r bs i end)))))])))

;; buffer-stdout! : request bytes natural natural -> natural
;; Copies what fits into the current record; a full record is sent at once.
(define (buffer-stdout! r bs start end)
  (define fill (fastcgi-request-fill r))
  (define want (- end start))
  (define buf
    (let ([buf (fastcgi-request-buf r)])
      (cond
        [(and buf (>= (bytes-length buf) (+ fill want tail-room))) buf]
        [(and buf (= (bytes-length buf) (+ header-room max-chunk tail-room))) buf]
        [else
         (define size (min (+ header-room max-chunk tail-room)
                           (max initial-buffer (* 2 (+ fill want tail-room)))))
         ;; unfilled: every byte sent is written first (header, content, zeroed padding)
         (define new (make-unfilled-bytes size))
         (when buf (bytes-copy! new 0 buf 0 fill))
         (set-fastcgi-request-buf! r new)
         new])))
  (define n (min want (- (+ header-room max-chunk) fill)))
  (bytes-copy! buf fill bs start (+ start n))
  (set-fastcgi-request-fill! r (+ fill n))
  (set-fastcgi-request-bytes-out! r (+ n (fastcgi-request-bytes-out r)))
  (when (= (+ fill n) (+ header-room max-chunk))
    (flush-stdout! r))
  n)

;; flush-stdout! : request -> void ; send the buffered content as one STDOUT record
(define (flush-stdout! r)
  (define fill (fastcgi-request-fill r))
  (when (> fill header-room)
    (define buf (fastcgi-request-buf r))
    (sniff-status! r buf fill)
    (define len (- fill header-room))
    (define pad (padding-for len))
    (record-header! buf 0 'stdout (fastcgi-request-id r) len pad)
    (bytes-fill-range! buf fill (+ fill pad))
    (set-fastcgi-request-fill! r header-room)
    (set-fastcgi-request-sent?! r #t)
    (unless (conn-send! (fastcgi-request-conn r) buf 0 (+ fill pad)
                        (λ () (not (eq? (fastcgi-request-state r) 'done))))
      (request-abort! r)
      (check-live r 'write))))

;; sniff-status! : request bytes natural -> void
;; Before the first STDOUT leaves, and only when an observer (the access log) will want
;; it: the status of a CGI answer, from its Status header, 200 when the headers end
;; without one. A status set by request-respond-status! stays.
(define (sniff-status! r buf fill)
  (unless (or (fastcgi-request-sent? r) (fastcgi-request-status r)
              (not (server-observer (conn-server (fastcgi-request-conn r)))))
    (define status (head-status buf header-room (min fill (+ header-room 8192))))
    (when status (set-fastcgi-request-status! r status))))

;; head-status : bytes natural natural -> (or/c natural #f)
;; The status of the CGI head in bs[start, end): that of the first line that begins
;; "Status:" (any case), then spaces or tabs, then three digits 100-599; 200 when the head
;; has none; #f when the head does not end (an empty line) before end. A scan of the lines
;; (two regexp matches took 0.5 us a request).
(define (head-status bs start end)
  (define (at i) (if (< i end) (bytes-ref bs i) -1))
  (define (lower b) (if (<= 65 b 90) (+ b 32) b))
  (define (digit i) (let ([b (at i)]) (and (<= 48 b 57) (- b 48))))
  ;; status-at : natural -> (or/c natural #f) ; the status on the line at i, if it has one
  (define (status-at i)
    (and (for/and ([c (in-bytes #"status:")] [k (in-naturals)]) (eqv? (lower (at (+ i k))) c))
         (let skip ([j (+ i 7)])
           (define b (at j))
           (if (or (eqv? b 32) (eqv? b 9))
               (skip (add1 j))
               (let ([d0 (digit j)] [d1 (digit (+ j 1))] [d2 (digit (+ j 2))])
                 (and d0 d1 d2 (<= 1 d0 5) (+ (* 100 d0) (* 10 d1) d2)))))))
  ;; the head ends at a line that is empty (LF or CR LF) after a line
  (let line ([i start] [found #f] [first? #t])
    (cond
      [(and (not first?) (or (eqv? (at i) 10) (and (eqv? (at i) 13) (eqv? (at (+ i 1)) 10))))
       (or found 200)]
      [else
       (define found* (or found (status-at i)))
       (let next ([j i])
         (cond
           [(>= j end) #f]
           [(eqv? (bytes-ref bs j) 10) (line (add1 j) found* #f)]
           [else (next (add1 j))]))])))

;; bytes-fill-range! : bytes natural natural -> void ; zero bytes [from, to)
(define (bytes-fill-range! buf from to)
  (for ([i (in-range from to)]) (bytes-set! buf i 0)))

;; stderr-write! : request bytes natural natural -> natural
;; A stderr port's write: at most one STDERR record, sent at once.
(define (stderr-write! r bs start end)
  (check-live r 'write)
  (define n (min (- end start) max-chunk))
  (when (> n 0)
    (define out (open-output-bytes))
    (write-record 'stderr (fastcgi-request-id r) bs out start (+ start n))
    (conn-send! (fastcgi-request-conn r) (get-output-bytes out #t) 0 (+ 8 n (padding-for n))
                (λ () (not (eq? (fastcgi-request-state r) 'done)))))
  n)

;; ---------------------------------------------------------------------------------------
;; Ending.

;; request-finish! : request natural symbol -> boolean
;; Ends the request once: the buffered STDOUT, the empty STDOUT (when any STDOUT was or is
;; being sent, or app-status says so) and END_REQUEST, in one write. #f if already ended.
;; Runs under the semantics "first caller wins"; the connection's done-hook runs after.
(define (request-finish! r app-status protocol-status #:stdout-end? [stdout-end? #t])
  (define c (fastcgi-request-conn r))
  (define first? (mark-done! r))
  (when first?
    (define id (fastcgi-request-id r))
    (define fill (fastcgi-request-fill r))
    (define buf
      (let ([b (fastcgi-request-buf r)])
        (if (and b (>= (bytes-length b) (+ fill tail-room))) b
            (let ([new (make-unfilled-bytes (+ fill tail-room))])
              (when b (bytes-copy! new 0 b 0 fill))
              new))))
    (define len (- fill header-room))
    (define pad (padding-for len))
    (define start (if (> len 0) 0 header-room))
    (when (> len 0) (sniff-status! r buf fill))
    (when (> len 0)
      (record-header! buf 0 'stdout id len pad)
      (bytes-fill-range! buf fill (+ fill pad)))
    (define at (+ fill pad))
    (define at2
      (cond [stdout-end? (record-header! buf at 'stdout id 0 0) (+ at 8)]
            [else at]))
    (record-header! buf at2 'end-request id 8 0)
    (end-request-content! buf (+ at2 8) app-status protocol-status)
    (define end
      (cond [(closing-trailer? c r) (record-header! buf (+ at2 16) 'get-values-result 0 0 0) (+ at2 24)]
            [else (+ at2 16)]))
    (set-fastcgi-request-fill! r header-room)
    (conn-send! c buf start end)
    (semaphore-post (fastcgi-request-abort-sema r))
    (close-request-stdin! r)
    (close-request-data! r))
  first?)

;; closing-trailer? : conn request -> boolean
;; The server stops with no sibling to hand its connections to, and r is the last request
;; live on its kept connection, which closes right after this answer (connection.rkt's
;; retire!). The front must not send another request on it meanwhile: nginx keeps an
;; upstream connection only when END_REQUEST ends what it has read of it, so a record
;; after END_REQUEST in the same write makes it drop the connection itself, where the close
;; alone (a separate system call) can come after nginx has taken it for the next request.
;; The record is an empty GET_VALUES_RESULT (no values), which any FastCGI client can read.
(define (closing-trailer? c r)
  (define srv (conn-server c))
  (and (fastcgi-request-keep-conn? r)
       (server-closing? srv)
       (not (server-handover srv))
       (= 1 (table-count (conn-requests c)))))

;; mark-done! : request -> boolean ; #t for the one caller that ends the request
(define (mark-done! r)
  (define c (fastcgi-request-conn r))
  (define lock (conn-lock c))
  (parameterize-break #f
    (conn-lock! c)
    (define first? (not (eq? (fastcgi-request-state r) 'done)))
    (when first? (set-fastcgi-request-state! r 'done))
    (semaphore-post lock)
    first?))

;; request-end-now! : request natural -> boolean
;; Ends the request from outside its handler (ABORT_REQUEST, a body that cannot be queued):
;; the handler's later writes fail and are dropped; the front gets the empty STDOUT (if any
;; STDOUT left) and END_REQUEST, once.
(define (request-end-now! r app-status)
  (define first? (request-abort! r))
  (when first?
    (define id (fastcgi-request-id r))
    (define out (open-output-bytes))
    (when (fastcgi-request-sent? r) (write-bytes (record-header 'stdout id 0 0) out))
    (write-record 'end-request id (end-request-content app-status 'request-complete) out)
    (conn-send! (fastcgi-request-conn r) (get-output-bytes out #t)))
  first?)

;; request-abort! : request -> boolean
;; The request ends without a word on the wire (the connection is gone or the caller
;; answers for it); body reads and writes fail and abort-evt fires.
(define (request-abort! r)
  (define first? (mark-done! r))
  (when first?
    (semaphore-post (fastcgi-request-abort-sema r))
    (close-request-stdin! r)
    (close-request-data! r)
    (release-pipes! r))
  first?)

;; release-pipes! : request -> void
;; The body pipes of an aborted request are dropped with what they still hold (their
;; reads fail from now on): the connection's reader keeps nothing of them either.
(define (release-pipes! r)
  (start-atomic)
  (for ([b (in-list (fastcgi-request-pipes r))]) (set-box! b #f))
  (when (output-port? (fastcgi-request-stdin-out r)) (set-fastcgi-request-stdin-out! r 'closed))
  (set-fastcgi-request-data-out! r #f)
  (end-atomic))

;; request-respond-status! : request natural string -> boolean
;; Answer with a bare status page (413, 431, 500, 503...) unless output already left,
;; then end the request. Buffered, unsent output is discarded.
(define (request-respond-status! r code message)
  (cond
    [(fastcgi-request-sent? r)
     (request-finish! r 1 'request-complete)]
    [else
     (set-fastcgi-request-fill! r header-room)
     (set-fastcgi-request-bytes-out! r 0)
     (set-fastcgi-request-status! r code)
     (define body (string->bytes/utf-8 (format "~a ~a\n" code message)))
     (define page
       (bytes-append (string->bytes/utf-8 (format "Status: ~a ~a\r\n" code message))
                     #"Content-Type: text/plain; charset=utf-8\r\n"
                     (string->bytes/utf-8 (format "Content-Length: ~a\r\n\r\n" (bytes-length body)))
                     body))
     (buffer-stdout! r page 0 (bytes-length page))
     (request-finish! r 0 'request-complete)]))
