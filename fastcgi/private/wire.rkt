#lang racket/base
;; The shared state of one server process and of one connection, and the connection's
;; single serialised writer. Request threads and the reader all write through `conn-send!`,
;; so records of different requests never interleave inside a write.
(require "limits.rkt")
(provide (struct-out server)
         (struct-out conn)
         make-conn
         conn-send!
         conn-broken!
         counter-add!
         now-ms)

;; Per process. handler: fastcgi-request -> any. roles: the roles the handler takes.
;; connections: mutable set (hasheq conn -> #t) scanned by the deadline manager.
;; shutdown-write: conn -> void, half-closes a connection's socket for a graceful close.
;; observer: (or/c #f (fastcgi-request flonum -> any)), told of every answered request with
;; its duration in ms (access log, counters); it runs in the request's thread and must
;; not raise.
(struct server (handler roles limits connections shutdown-write
                running         ; box: handlers running now (for max-concurrent)
                stats           ; mutable hasheq: symbol -> count, for status pages and tests
                [closing? #:mutable] ; graceful stop under way: no new requests
                observer)
  #:transparent)

;; Per connection.
(struct conn (in out peer server lock requests
              [deadline #:mutable]        ; ms after which the reader is cut off, or #f
              [write-deadline #:mutable]  ; ms after which the blocked write is cut off, or #f
              [broken? #:mutable]         ; the socket failed or was cut: nothing more is sent
              [closing? #:mutable]        ; draining before close: no new requests
              [on-broken #:mutable]))     ; conn -> void : aborts every live request

;; make-conn : input-port output-port string server -> conn
;; The output port is made unbuffered: conn-send! writes whole batches and flushes anyway,
;; and closing a buffered fd port while a writer is blocked on it (a peer that stopped
;; reading) tries to flush first and blocks the closer forever; that closer is the
;; deadline manager of every connection (conn-broken! from watch-deadlines). Unbuffered,
;; the close returns at once, the blocked write fails, and the fd is released.
(define (make-conn in out peer srv)
  (when (file-stream-port? out) (file-stream-buffer-mode out 'none))
  (conn in out peer srv (make-semaphore 1) (make-hasheqv) #f #f #f #f void))

;; now-ms : -> flonum
(define (now-ms) (current-inexact-milliseconds))

;; counter-add! : box integer -> integer ; atomic add on a box shared by threads
(define (counter-add! b n)
  (let loop ()
    (define old (unbox b))
    (if (box-cas! b old (+ old n)) (+ old n) (loop))))

;; conn-broken! : conn -> void ; mark the connection unusable and close its ports, which
;; wakes a reader or writer blocked on them with an exception.
(define (conn-broken! c)
  (unless (conn-broken? c)
    (set-conn-broken?! c #t)
    (close-output-port* (conn-out c))
    (close-input-port (conn-in c))
    ((conn-on-broken c) c)))

;; close-output-port* : output-port -> void ; closing may try to flush into a dead socket
(define (close-output-port* out)
  (with-handlers ([exn:fail? void]) (close-output-port out)))

;; conn-send! : conn bytes [natural natural (or/c #f (-> boolean))] -> boolean
;; One write of bs[start,end) under the connection lock, bounded by the write timeout.
;; #f when the connection is broken (the bytes are dropped, the caller's request is aborted)
;; or when `still?`, checked under the lock, says the write no longer belongs on the wire.
;; Breaks are off inside: a handler stopped by the request timeout never leaves the lock held.
(define (conn-send! c bs [start 0] [end (bytes-length bs)] [still? #f])
  (parameterize-break #f (send! c bs start end still?)))

;; send! : conn bytes natural natural (or/c #f (-> boolean)) -> boolean
(define (send! c bs start end still?)
  (define lock (conn-lock c))
  (semaphore-wait lock)
  (cond
    [(or (conn-broken? c) (and still? (not (still?)))) (semaphore-post lock) #f]
    [else
     (define out (conn-out c))
     (define ok?
       (with-handlers ([exn:fail? (λ (e) #f)])
         (set-conn-write-deadline! c (+ (now-ms) (* 1000 (limits-write-timeout (server-limits (conn-server c))))))
         (write-bytes bs out start end)
         (flush-output out)
         (set-conn-write-deadline! c #f)
         #t))
     (semaphore-post lock)
     (unless ok? (conn-broken! c))
     ok?]))
