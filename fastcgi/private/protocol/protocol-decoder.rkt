#lang racket/base
;; Decoding a connection's stream of records (protocol-record.rkt says what a record is).
;; Pure over byte strings and ports: the server's reader, the client and the tests feed it.
;; Every length read from the wire is untrusted: a record is handed out only once it is all
;; present, and the buffer grows only when a record does not fit.
(require "../util/fast-bytes.rkt"
         "protocol-record.rkt")
(provide make-decoder decoder? decoder-read! decoder-room! decoder-filled! decoder-shrink! decoder-next! decoder-take!
         decoder-view! decoder-buf decoder-id decoder-content-start decoder-content-end
         decoder-content-length decoder-content decoder-header-problem
         decoder-feed!
         decoder-buffered
         decoder-pending)

;; A decoder reads as much as the port has into the free space of its buffer and
;; hands out complete records, so one read usually yields many records. The buffer starts
;; small (an idle kept connection holds little) and grows, at most to twice the largest
;; record (8 + 65535 + 255 bytes), only when a record does not fit; decoder-shrink! gives
;; the memory back once the connection is idle.

(define max-record-length (+ header-length max-content-length max-padding-length))
;; 2 KiB holds a typical request's records (nginx's hello request fits), and a larger
;; first buffer is paid for by every new connection (bench/OPTIMISATIONS.md, A small
;; decoder buffer)
(define initial-buffer-size 2048)
(define max-buffer-size (* 2 max-record-length))
;; read no fewer free bytes than this, so that a read takes many small records at once
(define min-read initial-buffer-size)

;; buf[start, end): received, not yet decoded. id, content-start, content-end: the record
;; decoder-view! took last (its content is buf[content-start, content-end)).
(struct decoder ([buf #:mutable] [start #:mutable] [end #:mutable]
                 [id #:mutable] [content-start #:mutable] [content-end #:mutable]))

;; make-decoder : -> decoder
(define (make-decoder) (decoder (make-unfilled-bytes initial-buffer-size) 0 0 0 0 0))

;; decoder-buffered : decoder -> natural ; bytes received and not yet decoded
(define (decoder-buffered d) (- (decoder-end d) (decoder-start d)))

;; decoder-pending : decoder -> bytes ; a copy of the bytes received and not yet decoded
(define (decoder-pending d) (subbytes (decoder-buf d) (decoder-start d) (decoder-end d)))

;; compact! : decoder -> void ; move pending bytes to the front of the buffer
(define (compact! d)
  (define s (decoder-start d))
  (unless (zero? s)
    (define e (decoder-end d))
    (bytes-copy! (decoder-buf d) 0 (decoder-buf d) s e)
    (set-decoder-start! d 0)
    (set-decoder-end! d (- e s))))

;; make-room! : decoder -> void
;; Room after the pending bytes for the rest of the first pending record, and for at
;; least min-read bytes: compact when that suffices, else grow (doubling, to at most
;; max-buffer-size unless the pending bytes alone need more).
(define (make-room! d)
  (define buf (decoder-buf d))
  (define s (decoder-start d))
  (define pending (- (decoder-end d) s))
  (define record-size
    (if (>= pending header-length)
        (+ header-length (* 256 (bytes-ref buf (+ s 4))) (bytes-ref buf (+ s 5)) (bytes-ref buf (+ s 6)))
        header-length))
  (define want (max record-size (+ pending min-read)))
  (cond
    [(<= (+ s want) (bytes-length buf)) (void)]
    [(<= want (bytes-length buf)) (compact! d)]
    [else
     (define new (make-unfilled-bytes (max want (min max-buffer-size (* 2 (bytes-length buf))))))
     (bytes-copy! new 0 buf s (decoder-end d))
     (set-decoder-buf! d new)
     (set-decoder-start! d 0)
     (set-decoder-end! d pending)]))

;; decoder-room! : decoder -> (values bytes natural natural)
;; Where the next bytes received go: buf[start, end), free space after the pending bytes
;; (made, by compacting or growing, for at least the rest of the first pending record).
;; The caller reads into it, however it reads, and says how much with decoder-filled!:
;; the codec knows nothing of sockets or ports.
(define (decoder-room! d)
  (make-room! d)
  (values (decoder-buf d) (decoder-end d) (bytes-length (decoder-buf d))))

;; decoder-filled! : decoder natural -> void ; n bytes were read into decoder-room!'s space
(define (decoder-filled! d n)
  (set-decoder-end! d (+ (decoder-end d) n)))

;; decoder-read! : decoder input-port -> (or/c natural eof)
;; One read of whatever the port has (at least one byte, blocking) into the free space.
(define (decoder-read! d in)
  (define-values (bs start end) (decoder-room! d))
  (define n (read-bytes-avail! bs in start end))
  (when (exact-integer? n) (decoder-filled! d n))
  n)

;; decoder-shrink! : decoder -> void
;; An empty decoder whose buffer grew goes back to the initial size.
(define (decoder-shrink! d)
  (when (and (= (decoder-start d) (decoder-end d))
             (> (bytes-length (decoder-buf d)) initial-buffer-size))
    (set-decoder-buf! d (make-unfilled-bytes initial-buffer-size))
    (set-decoder-start! d 0)
    (set-decoder-end! d 0)))

;; decoder-feed! : decoder bytes -> void ; for tests and clients fed from elsewhere
;; Takes any amount: the buffer grows when the bytes do not fit, since the caller cannot
;; take records out in the middle of one feed (a whole multi-record stream, say).
(define (decoder-feed! d bs)
  (when (> (+ (decoder-end d) (bytes-length bs)) (bytes-length (decoder-buf d)))
    (compact! d))
  (define end (+ (decoder-end d) (bytes-length bs)))
  (when (> end (bytes-length (decoder-buf d)))
    (define new (make-unfilled-bytes (max end (* 2 (bytes-length (decoder-buf d))))))
    (bytes-copy! new 0 (decoder-buf d) 0 (decoder-end d))
    (set-decoder-buf! d new))
  (bytes-copy! (decoder-buf d) (decoder-end d) bs)
  (set-decoder-end! d end))

;; decoder-next! : decoder -> (or/c record #f)
;; The next complete record, or #f when more bytes are needed.
;; Raises exn:fail:fastcgi:protocol on a version other than 1.
(define (decoder-next! d)
  (define r (decoder-take! d))
  (if (string? r) (raise-protocol-error 'decoder "~a" r) r))

;; decoder-take! : decoder -> (or/c record #f string)
;; As decoder-next!, but a protocol error is returned as its message, not raised.
(define (decoder-take! d)
  (define t (decoder-view! d))
  (if (or (not t) (string? t))
      t
      (record t (decoder-id d) (decoder-content d))))

;; decoder-view! : decoder -> (or/c symbol byte #f string)
;; As decoder-take!, without making the record: the type of the next complete record (a
;; symbol, or the number of a type not in FastCGI 1.0); its id is then decoder-id and its
;; content decoder-buf[decoder-content-start, decoder-content-end), which stays there
;; until the next decoder-room!, decoder-feed! or decoder-shrink!. The server's reader
;; takes every record this way: a protocol error is a string because an exception
;; handler installed per record cost more than decoding the record, and a STDIN record's
;; content goes from the buffer into its request's pipe, with no copy of each 64 KiB
;; record on the way.
(define (decoder-view! d)
  (define buf (decoder-buf d))
  (define s (decoder-start d))
  (define avail (- (decoder-end d) s))
  (cond
    [(< avail header-length) #f]
    [(not (eqv? (bytes-ref buf s) fcgi-version))
     (format "unsupported version ~a" (bytes-ref buf s))]
    [else
     (define clen (+ (* 256 (bytes-ref buf (+ s 4))) (bytes-ref buf (+ s 5))))
     (define total (+ header-length clen (bytes-ref buf (+ s 6))))
     (cond
       [(< avail total) #f]
       [else
        (set-decoder-start! d (+ s total))
        (when (= (decoder-start d) (decoder-end d))
          (set-decoder-start! d 0)
          (set-decoder-end! d 0))
        (set-decoder-id! d (+ (* 256 (bytes-ref buf (+ s 2))) (bytes-ref buf (+ s 3))))
        (set-decoder-content-start! d (+ s header-length))
        (set-decoder-content-end! d (+ s header-length clen))
        (type->symbol (bytes-ref buf (+ s 1)))])]))

;; decoder-header-problem : decoder boolean -> (or/c #f string)
;; When the next record's header has arrived (its content not yet, or decoder-view! would
;; have taken it): a protocol error that the header alone shows, so that the reader
;; closes at once instead of waiting for, and buffering, up to 64 KiB of content it would
;; refuse (HOSTILE.md items 3 and 4): a stream record or ABORT_REQUEST before any
;; BEGIN_REQUEST (begun?: one came), a BEGIN_REQUEST with request id 0 or with a content
;; length other than 8. The messages are the reader's own for the same errors.
(define (decoder-header-problem d begun?)
  (define buf (decoder-buf d))
  (define s (decoder-start d))
  (and (>= (- (decoder-end d) s) header-length)
       (let ([type (type->symbol (bytes-ref buf (+ s 1)))]
             [id (+ (* 256 (bytes-ref buf (+ s 2))) (bytes-ref buf (+ s 3)))]
             [clen (+ (* 256 (bytes-ref buf (+ s 4))) (bytes-ref buf (+ s 5)))])
         (cond
           [(and (not begun?) (memq type '(params stdin data abort-request)))
            (format "~a record before any BEGIN_REQUEST" type)]
           [(not (eq? type 'begin-request)) #f]
           [(zero? id) "BEGIN_REQUEST with request id 0"]
           [(not (= clen 8)) (format "BEGIN_REQUEST with content length ~a" clen)]
           [else #f]))))

;; decoder-content-length : decoder -> natural ; of the record decoder-view! took last
(define (decoder-content-length d) (- (decoder-content-end d) (decoder-content-start d)))

;; decoder-content : decoder -> bytes ; a copy of the content of the record decoder-view! took last
(define (decoder-content d)
  (subbytes (decoder-buf d) (decoder-content-start d) (decoder-content-end d)))
