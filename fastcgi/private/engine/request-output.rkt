#lang racket/base
;; What a request sends, and its end on the wire:
;; - stdout: buffered into records of up to 65528 bytes; the last record, the empty STDOUT
;;   and END_REQUEST leave in one write;
;; - stderr: each write becomes STDERR records at once. Its port is made on first use;
;;   a handler's current-error-port is one port for all requests (handler-error-port);
;; - the end: request-finish! (the handler's answer is complete), request-end-now! (ended
;;   from outside its handler), and the status pages the server answers for a request
;;   (request-respond-status!, request-refuse!: their bytes are cgi.rkt's).
;; A request's output record (its buffer, what left, the answer's status) is this
;; module's alone: the request holds it (fastcgi-request-output), the rest of the server
;; reads it through fastcgi-request-status and fastcgi-request-bytes-out.
(require ffi/unsafe/atomic
         (submod "../protocol/cgi.rkt" private)
         "../protocol/protocol.rkt"
         "request-state.rkt"
         (only-in "../util/table.rkt" table-count)
         (only-in "../transport/transport.rkt" sendrecs-max)
         "wire.rkt")
(provide header-room
         make-output
         make-stdout-port
         fastcgi-request-stderr
         fastcgi-request-status
         fastcgi-request-bytes-out
         request-output-started?
         request-note-status!
         handler-error-port
         request-finish!
         request-end-now!
         request-respond-status!
         request-refuse!)

(define header-room 8)
(define max-chunk 65528)
;; most answers of a hello-world size fit; a larger one doubles its way up (a 1 MiB answer
;; makes 8 buffers on its way to the 64 KiB record, once per request)
(define initial-buffer 512)
;; room after the content for padding (7), the empty STDOUT (8), END_REQUEST (16) and the
;; closing trailer (8: see closing-trailer?)
(define tail-room 40)

;; What a request sends: buf, its stdout buffer (#f until the first write), whose content
;; runs from header-room to fill; sent?: some stdout already left; status: the answer's
;; status, for the access log (#f until known); bytes-out: stdout bytes written;
;; stderr-port: made on first use.
(struct output ([buf #:mutable] [fill #:mutable] [sent? #:mutable] [status #:mutable]
                [bytes-out #:mutable] [stderr-port #:mutable]))

;; make-output : -> output ; nothing written yet
(define (make-output) (output #f header-room #f #f 0 #f))

;; fastcgi-request-status : request -> (or/c natural #f) ; the answer's status, once known
(define (fastcgi-request-status r) (output-status (fastcgi-request-output r)))

;; fastcgi-request-bytes-out : request -> natural ; the stdout bytes the handler wrote
(define (fastcgi-request-bytes-out r) (output-bytes-out (fastcgi-request-output r)))

;; request-output-started? : request -> boolean ; some stdout left, or waits in the buffer
(define (request-output-started? r)
  (define o (fastcgi-request-output r))
  (or (output-sent? o) (> (output-fill o) header-room)))

;; request-note-status! : request natural -> void
;; The answer's status, as the code that writes its head knows it (for the access log).
(define (request-note-status! r code)
  (set-output-status! (fastcgi-request-output r) code))

;; fastcgi-request-stderr : request -> output-port ; made on first use
(define (fastcgi-request-stderr r)
  (define o (fastcgi-request-output r))
  (or (output-stderr-port o)
      (let ([port (make-output-port 'fastcgi-stderr always-evt
                                    (λ (bs start end non-block? breakable?) (stderr-write! r bs start end))
                                    void)])
        (start-atomic)
        (unless (output-stderr-port o) (set-output-stderr-port! o port))
        (end-atomic)
        (output-stderr-port o))))

;; handler-error-port : output-port
;; A handler's current-error-port: what a thread writes there goes to the STDERR of its
;; handler-request (request-state.rkt; as to that request's own stderr port, so it fails once the request
;; has ended), or to the process's standard error in a thread no handler started. One
;; port for all requests, not one more custom port per request (a custom port is among
;; the largest costs of making a request).
(define process-error-port (current-error-port))
(define handler-error-port
  (make-output-port
   'fastcgi-stderr
   always-evt
   (λ (bs start end non-block? breakable?)
     (define r (handler-request))
     (cond
       [r (stderr-write! r bs start end)]
       [else (write-bytes bs process-error-port start end) (flush-output process-error-port)
             (- end start)]))
   void))

;; ---------------------------------------------------------------------------------------
;; Output.

;; make-stdout-port : request -> output-port
;; The write procedure takes the whole write, record after record: a custom port passes
;; its procedure a fresh copy of what is left of the write on every call, so taking one
;; record per call would copy a large write over and over, once per record.
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
  (define sniff? (not (or (output-sent? (fastcgi-request-output r)) (fastcgi-request-status r)
                          (not (server-observer (conn-server (fastcgi-request-conn r)))))))
  (define i0
    (cond
      [(> (output-fill (fastcgi-request-output r)) header-room)
       (define i (if sniff? (+ start (buffer-stdout! r bs start (min end (+ start 8192)))) start))
       (flush-stdout! r)
       i]
      [else
       (when sniff?
         (define status (head-status bs start (min end (+ start 8192))))
         (when status (set-output-status! (fastcgi-request-output r) status)))
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
       (set-output-sent?! (fastcgi-request-output r) #t)
       (set-output-bytes-out! (fastcgi-request-output r) (+ (* k n) (fastcgi-request-bytes-out r)))
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
  (define o (fastcgi-request-output r))
  (define fill (output-fill o))
  (define want (- end start))
  (define buf
    (let ([buf (output-buf o)])
      (cond
        [(and buf (>= (bytes-length buf) (+ fill want tail-room))) buf]
        [(and buf (= (bytes-length buf) (+ header-room max-chunk tail-room))) buf]
        [else
         (define size (min (+ header-room max-chunk tail-room)
                           (max initial-buffer (* 2 (+ fill want tail-room)))))
         ;; unfilled: every byte sent is written first (header, content, zeroed padding)
         (define new (make-unfilled-bytes size))
         (when buf (bytes-copy! new 0 buf 0 fill))
         (set-output-buf! o new)
         new])))
  (define n (min want (- (+ header-room max-chunk) fill)))
  (bytes-copy! buf fill bs start (+ start n))
  (set-output-fill! o (+ fill n))
  (set-output-bytes-out! o (+ n (output-bytes-out o)))
  (when (= (+ fill n) (+ header-room max-chunk))
    (flush-stdout! r))
  n)

;; flush-stdout! : request -> void ; send the buffered content as one STDOUT record
(define (flush-stdout! r)
  (define fill (output-fill (fastcgi-request-output r)))
  (when (> fill header-room)
    (define buf (output-buf (fastcgi-request-output r)))
    (sniff-status! r buf fill)
    (define len (- fill header-room))
    (define pad (padding-for len))
    (record-header! buf 0 'stdout (fastcgi-request-id r) len pad)
    (bytes-fill-range! buf fill (+ fill pad))
    (set-output-fill! (fastcgi-request-output r) header-room)
    (set-output-sent?! (fastcgi-request-output r) #t)
    (unless (conn-send! (fastcgi-request-conn r) buf 0 (+ fill pad)
                        (λ () (not (eq? (fastcgi-request-state r) 'done))))
      (request-abort! r)
      (check-live r 'write))))

;; sniff-status! : request bytes natural -> void
;; Before the first STDOUT leaves, and only when an observer (the access log) will want
;; it: the status of a CGI answer, from its Status header, 200 when the headers end
;; without one. A status set by request-respond-status! stays.
(define (sniff-status! r buf fill)
  (unless (or (output-sent? (fastcgi-request-output r)) (fastcgi-request-status r)
              (not (server-observer (conn-server (fastcgi-request-conn r)))))
    (define status (head-status buf header-room (min fill (+ header-room 8192))))
    (when status (set-output-status! (fastcgi-request-output r) status))))

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
;; being sent, or app-status says so) and END_REQUEST, in one write. #f if already ended:
;; the first caller ends it (mark-done!), later ones do nothing.
(define (request-finish! r app-status protocol-status #:stdout-end? [stdout-end? #t])
  (define c (fastcgi-request-conn r))
  (define first? (mark-done! r))
  (when first?
    (define id (fastcgi-request-id r))
    (define fill (output-fill (fastcgi-request-output r)))
    (define buf
      (let ([b (output-buf (fastcgi-request-output r))])
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
    (set-output-fill! (fastcgi-request-output r) header-room)
    (conn-send! c buf start end)
    (semaphore-post (fastcgi-request-abort-sema r))
    (close-request-stdin! r)
    (close-request-data! r))
  first?)

;; closing-trailer? : conn request -> boolean
;; The server stops with no sibling to hand its connections to, and r is the last request
;; live on its kept connection, which closes right after this answer (handler-run.rkt's
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

;; request-end-now! : request natural -> boolean
;; Ends the request from outside its handler (ABORT_REQUEST, a body that cannot be queued):
;; the handler's later writes fail and are dropped; the front gets the empty STDOUT (if any
;; STDOUT left) and END_REQUEST, once.
(define (request-end-now! r app-status)
  (define first? (request-abort! r))
  (when first?
    (define id (fastcgi-request-id r))
    (define out (open-output-bytes))
    (when (output-sent? (fastcgi-request-output r)) (write-bytes (record-header 'stdout id 0 0) out))
    (write-record 'end-request id (end-request-content app-status 'request-complete) out)
    (conn-send! (fastcgi-request-conn r) (get-output-bytes out #t)))
  first?)

;; request-respond-status! : request natural -> boolean
;; Answer with cgi.rkt's status page for code unless output already left, then end the
;; request. Buffered, unsent output is discarded.
(define (request-respond-status! r code)
  (cond
    [(output-sent? (fastcgi-request-output r))
     (request-finish! r 1 'request-complete)]
    [else
     (set-output-fill! (fastcgi-request-output r) header-room)
     (set-output-bytes-out! (fastcgi-request-output r) 0)
     (set-output-status! (fastcgi-request-output r) code)
     (define page (status-page code))
     (buffer-stdout! r page 0 (bytes-length page))
     (request-finish! r 0 'request-complete)]))

;; request-refuse! : request symbol -> boolean
;; The server answers for the request, for the reason cgi.rkt names (refusal-status):
;; request-respond-status! with that reason's status.
(define (request-refuse! r reason)
  (request-respond-status! r (refusal-status reason)))
