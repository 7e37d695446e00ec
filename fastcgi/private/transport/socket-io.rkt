#lang racket/base
;; Reading and writing a connected socket directly (the server's hot path): one read() or
;; send() per call, no fcntl and no readiness poll before it, unlike Racket's fd ports.
;; Neither call raises: callers run them in atomic mode (so that the fd cannot be closed
;; and reused in between) and raise the returned exception after leaving it. Also the
;; half-close and the close of a connection.
(require ffi/unsafe
         ffi/unsafe/port
         "../os/ffi.rkt"
         "transport-exn.rkt")
(provide socket-read! socket-write! socket-write-records! sendrecs-max
         socket-input-pending?
         socket-shutdown-write! socket-close!)

;; socket-read! : fd bytes natural natural -> (or/c natural eof exn:fail:fastcgi:transport)
;; The bytes read into bs[start, end), 0 when none are available now, eof at the end.
(define (socket-read! fd bs start end)
  (define n (let ([n (c-read/fast fd (ptr-add bs start) (- end start))])
              (if (< n 0) (c-read fd (ptr-add bs start) (- end start)) n)))
  (cond
    [(> n 0) n]
    [(= n 0) eof]
    [else (socket-error "read" (saved-errno) (λ () (socket-read! fd bs start end)))]))

;; socket-input-pending? : fd -> boolean
;; Whether bytes from the peer wait unread in the socket (a peek that does not wait). No
;; means none came or the peer closed or failed: closing now sends no reset.
(define peek-byte (make-bytes 1))
(define (socket-input-pending? fd)
  (> (c-recv/fast fd peek-byte 1 (bitwise-ior MSG_PEEK MSG_DONTWAIT)) 0))

;; socket-write! : fd bytes natural natural -> (or/c natural exn:fail:fastcgi:transport)
;; The bytes of bs[start, end) sent, 0 when the socket's buffer is full. MSG_NOSIGNAL: a
;; peer that went away gives EPIPE, not a SIGPIPE.
(define (socket-write! fd bs start end)
  (define n (let ([n (c-send/fast fd (ptr-add bs start) (- end start) MSG_NOSIGNAL)])
              (if (< n 0) (c-send fd (ptr-add bs start) (- end start) MSG_NOSIGNAL) n)))
  (if (>= n 0)
      n
      (socket-error "write" (saved-errno) (λ () (socket-write! fd bs start end)))))

;; socket-write-records! : fd bytes natural bytes natural natural natural -> natural
;; What one sendmsg sent of k records, each an 8-byte header of heads (from h on) and n
;; bytes of bs (from start on): 0 when it failed, for any reason, or where there is no
;; c-sendrecs/fast (the caller goes on record by record).
(define (socket-write-records! fd heads h bs start n k)
  (if c-sendrecs/fast
      (max 0 (c-sendrecs/fast fd heads h bs start n k))
      0))

;; socket-error : string errno (-> any) -> any
;; EAGAIN: 0 (would block); EINTR: try again; any other errno: the exception to raise.
(define (socket-error what errno retry)
  (cond
    [(= errno EAGAIN) 0]
    [(= errno EINTR) (retry)]
    [else (exn:fail:fastcgi:transport (format "fastcgi: ~a: ~a" what (errno-message errno))
                                      (current-continuation-marks))]))

;; socket-shutdown-write! : (or/c output-port fd) -> void
;; Flush (a port), then half-close, so the peer reads EOF and no reset; errors mean the
;; peer is gone.
(define (socket-shutdown-write! out)
  (cond
    [(exact-integer? out) (c-shutdown out SHUT_WR)]
    [else
     (with-handlers ([exn:fail? void])
       (flush-output out)
       (define fd (unsafe-port->file-descriptor out))
       (when fd (c-shutdown fd SHUT_WR)))])
  (void))

;; socket-close! : fd -> void ; for an fd from listener-accept-fd that has no ports
(define (socket-close! fd)
  (c-close/fast fd)
  (void))
