#lang racket/base
;; A connection's I/O as a record of actions (receive, send, send records, wait, shut
;; down, close), like Warp's Connection: one implementation over a socket's raw
;; descriptor (read, written and closed through the FFI, no ports) and one over a pair of
;; ports (tests), so that the connection layer never branches on which it has. Every
;; action is non-blocking; whoever must wait syncs on the evt the action gives.
;;
;; A closed io answers every action as a closed socket would (eof, #f), and an fd's
;; actions check that flag in atomic mode before each call on the descriptor: once closed,
;; its number may belong to the next accepted connection.
(require racket/contract/base
         ffi/unsafe/atomic
         ffi/unsafe/port
         "transport.rkt")
(provide (contract-out
          [fd-io (-> exact-nonnegative-integer? io?)]
          [port-io (-> input-port? output-port? io?)])
         io?
         io-fd
         io-receive!
         io-readable-evt
         io-send!
         io-send-records!
         io-writable-evt
         io-shutdown!
         io-close!
         io-closed?
         io-input-pending?)

;; fd: the socket's descriptor, or #f (the loop and the hand-over need one);
;; receive: bytes natural natural -> (or/c natural eof exn:fail): 0 when nothing is there now;
;; readable: -> evt, ready when receive may find bytes (or the end);
;; send: bytes natural natural -> (or/c natural #f): bytes taken now (0: full), #f: failed;
;; send-records: bytes natural bytes natural natural natural -> natural: see io-send-records!;
;; writable: -> evt; shutdown: -> void (half-close); close: -> boolean (#t the first time);
;; input-pending: -> boolean; closed: box, #t once closed.
(struct io (fd receive readable send send-records writable shutdown close input-pending
               closed))

(define (io-receive! x bs start end) ((io-receive x) bs start end))
(define (io-readable-evt x) ((io-readable x)))
(define (io-send! x bs start end) ((io-send x) bs start end))
;; io-send-records! : io bytes natural bytes natural natural natural -> natural
;; k records in a row, the j-th being heads[h + 8j, h + 8j + 8) then bs[start + nj,
;; start + n(j + 1)), as far as the connection takes them now (one sendmsg): the bytes
;; taken, which may end inside a record. 0 when it takes none this way (the caller then
;; sends them one piece at a time).
(define (io-send-records! x heads h bs start n k) ((io-send-records x) heads h bs start n k))
(define (io-writable-evt x) ((io-writable x)))
(define (io-shutdown! x) ((io-shutdown x)))
(define (io-close! x) ((io-close x)))
(define (io-closed? x) (unbox (io-closed x)))
(define (io-input-pending? x) ((io-input-pending x)))

;; (atomic-unless-closed closed closed-value expr): expr, or closed-value once closed, with
;; the check and expr in one atomic step
(define-syntax-rule (atomic-unless-closed closed closed-value expr)
  (begin
    (start-atomic)
    (let ([r (if (unbox closed) closed-value expr)])
      (end-atomic)
      r)))

;; fd-io : fd -> io ; the io now owns fd (io-close! closes it)
(define (fd-io fd)
  (define closed (box #f))
  (io fd
      (λ (bs start end) (atomic-unless-closed closed eof (socket-read! fd bs start end)))
      (λ () (atomic-unless-closed closed always-evt (unsafe-socket->semaphore fd 'read)))
      (λ (bs start end)
        (define r (atomic-unless-closed closed #f (socket-write! fd bs start end)))
        (and (exact-integer? r) r))
      (λ (heads h bs start n k)
        (atomic-unless-closed closed 0 (socket-write-records! fd heads h bs start n k)))
      (λ () (atomic-unless-closed closed always-evt (unsafe-socket->semaphore fd 'write)))
      (λ () (atomic-unless-closed closed (void) (socket-shutdown-write! fd)))
      (λ ()
        (atomic-unless-closed closed #f
                              (begin
                                (set-box! closed #t)
                                (unsafe-socket->semaphore fd 'remove)
                                (socket-close! fd)
                                #t)))
      (λ () (atomic-unless-closed closed #f (socket-input-pending? fd)))
      closed))

;; port-io : input-port output-port -> io
;; The output port is made unbuffered: closing a buffered fd port while a writer is
;; blocked on it (a peer that stopped reading) tries to flush first and blocks the closer
;; forever; that closer is the server's deadline sweep.
(define (port-io in out)
  (when (file-stream-port? out) (file-stream-buffer-mode out 'none))
  (define closed (box #f))
  (io #f
      (λ (bs start end)
        (with-handlers ([exn:fail? values])
          (if (unbox closed) eof (read-bytes-avail!* bs in start end))))
      (λ () (if (unbox closed) always-evt in))
      (λ (bs start end)
        (with-handlers ([exn:fail? (λ (e) #f)])
          (and (not (unbox closed))
               (let ([n (write-bytes-avail* bs out start end)])
                 (flush-output out)
                 n))))
      (λ (heads h bs start n k) 0)
      (λ () (if (unbox closed) always-evt out))
      ;; a socket's port is half-closed; any other output port (a pipe) is closed: the
      ;; peer reads the end either way
      (λ ()
        (unless (unbox closed)
          (if (unsafe-port->file-descriptor out)
              (socket-shutdown-write! out)
              (with-handlers ([exn:fail? void]) (close-output-port out)))))
      (λ ()
        (and (box-cas! closed #f #t)
             (begin
               (with-handlers ([exn:fail? void]) (close-output-port out))
               (close-input-port in)
               #t)))
      (λ () #f)
      closed))
