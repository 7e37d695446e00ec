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
;; (No contracts: fd-io runs for every accepted connection, and this module is private.)
(require ffi/unsafe/atomic
         ffi/unsafe/port
         "../transport/transport.rkt")
(provide fd-io
         port-io
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

;; The record of actions, one per implementation (made once, shared by every connection
;; of that kind, so that a connection costs one small io struct, not a closure an action):
;; receive: io bytes natural natural -> (or/c natural eof exn:fail), 0 when nothing is
;;   there now;
;; readable: io -> evt, ready when receive may find bytes (or the end);
;; send: io bytes natural natural -> (or/c natural #f): bytes taken now (0: full), #f: failed;
;; send-records: io bytes natural bytes natural natural natural -> natural (io-send-records!);
;; writable: io -> evt; shutdown: io -> void (half-close); close: io -> boolean (#t the
;;   first time); input-pending: io -> boolean.
(struct actions (receive readable send send-records writable shutdown close input-pending))

;; A connection's io: its actions, and what they act on: fd (the socket's descriptor, or
;; #f: the loop and the hand-over need one), or in and out (ports); closed?: #t once closed.
(struct io (actions fd in out [closed? #:mutable]))

(define (io-receive! x bs start end) ((actions-receive (io-actions x)) x bs start end))
(define (io-readable-evt x) ((actions-readable (io-actions x)) x))
(define (io-send! x bs start end) ((actions-send (io-actions x)) x bs start end))
;; io-send-records! : io bytes natural bytes natural natural natural -> natural
;; k records in a row, the j-th being heads[h + 8j, h + 8j + 8) then bs[start + nj,
;; start + n(j + 1)), as far as the connection takes them now (one sendmsg): the bytes
;; taken, which may end inside a record. 0 when it takes none this way (the caller then
;; sends them one piece at a time).
(define (io-send-records! x heads h bs start n k)
  ((actions-send-records (io-actions x)) x heads h bs start n k))
(define (io-writable-evt x) ((actions-writable (io-actions x)) x))
(define (io-shutdown! x) ((actions-shutdown (io-actions x)) x))
(define (io-close! x) ((actions-close (io-actions x)) x))
(define (io-input-pending? x) ((actions-input-pending (io-actions x)) x))

;; (unless-closed x closed-value expr): expr, or closed-value once x is closed, with the
;; check and expr in one atomic step
(define-syntax-rule (unless-closed x closed-value expr)
  (begin
    (start-atomic)
    (let ([r (if (io-closed? x) closed-value expr)])
      (end-atomic)
      r)))

;; fd-io : fd -> io ; the io now owns fd (io-close! closes it)
(define (fd-io fd) (io fd-actions fd #f #f #f))

(define fd-actions
  (actions
   (λ (x bs start end) (unless-closed x eof (socket-read! (io-fd x) bs start end)))
   (λ (x) (unless-closed x always-evt (unsafe-socket->semaphore (io-fd x) 'read)))
   (λ (x bs start end)
     (define r (unless-closed x #f (socket-write! (io-fd x) bs start end)))
     (and (exact-integer? r) r))
   (λ (x heads h bs start n k)
     (unless-closed x 0 (socket-write-records! (io-fd x) heads h bs start n k)))
   (λ (x) (unless-closed x always-evt (unsafe-socket->semaphore (io-fd x) 'write)))
   (λ (x) (unless-closed x (void) (socket-shutdown-write! (io-fd x))))
   (λ (x)
     (unless-closed x #f
                    (let ([fd (io-fd x)])
                      (set-io-closed?! x #t)
                      (unsafe-socket->semaphore fd 'remove)
                      (socket-close! fd)
                      #t)))
   (λ (x) (unless-closed x #f (socket-input-pending? (io-fd x))))))

;; port-io : input-port output-port -> io
;; The output port is made unbuffered: closing a buffered fd port while a writer is
;; blocked on it (a peer that stopped reading) tries to flush first and blocks the closer
;; forever; that closer is the server's deadline sweep.
(define (port-io in out)
  (when (file-stream-port? out) (file-stream-buffer-mode out 'none))
  (io port-actions #f in out #f))

(define port-actions
  (actions
   (λ (x bs start end)
     (with-handlers ([exn:fail? values])
       (if (io-closed? x) eof (read-bytes-avail!* bs (io-in x) start end))))
   (λ (x) (if (io-closed? x) always-evt (io-in x)))
   (λ (x bs start end)
     (with-handlers ([exn:fail? (λ (e) #f)])
       (and (not (io-closed? x))
            (let ([n (write-bytes-avail* bs (io-out x) start end)])
              (flush-output (io-out x))
              n))))
   (λ (x heads h bs start n k) 0)
   (λ (x) (if (io-closed? x) always-evt (io-out x)))
   ;; a socket's port is half-closed; any other output port (a pipe) is closed: the peer
   ;; reads the end either way
   (λ (x)
     (unless (io-closed? x)
       (define out (io-out x))
       (if (unsafe-port->file-descriptor out)
           (socket-shutdown-write! out)
           (with-handlers ([exn:fail? void]) (close-output-port out)))))
   (λ (x)
     (start-atomic)
     (define first? (not (io-closed? x)))
     (set-io-closed?! x #t)
     (end-atomic)
     (when first?
       (with-handlers ([exn:fail? void]) (close-output-port (io-out x)))
       (close-input-port (io-in x)))
     first?)
   (λ (x) #f)))
