#lang racket/base
;; systemd's notify protocol, sd_notify(3), without libsystemd: datagrams of "KEY=VALUE"
;; lines to the AF_UNIX socket named by NOTIFY_SOCKET (a leading '@' names one in the
;; abstract namespace). The manager (manager-notify.rkt) opens it once; the variables
;; NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID are then removed from the environment,
;; and the socket is close-on-exec, so that no worker, nor a program a handler runs, can
;; speak for the service. A send never blocks and never raises: a datagram systemd cannot
;; take is dropped, and the failure is logged once until a send works again.
(require ffi/unsafe
         "ffi.rkt"
         "../util/log.rkt")
(provide open-notifier
         notifier-address
         notifier-watchdog-ms
         notify!
         close-notifier!
         monotonic-usec)

(define SOCK_DGRAM 2)
(define CLOCK_MONOTONIC 1)

(define-libc c-sendto "sendto" _int _bytes _size _int _bytes _int -> _ssize)
(define-libc c-clock-gettime "clock_gettime" #:no-errno _int _bytes -> _int)

;; fd: the datagram socket; address: NOTIFY_SOCKET as given; sockaddr: its struct
;; sockaddr_un, exactly as long as the name (an abstract name's trailing NULs would be
;; part of it); watchdog-ms: half of WATCHDOG_USEC, in ms, or #f; ok?: the last send worked.
(struct notifier (fd address sockaddr watchdog-ms [ok? #:mutable] [closed? #:mutable]))

;; open-notifier : -> (or/c notifier #f)
;; From NOTIFY_SOCKET, or #f when it is unset, empty, or not an address this can use
;; (said in a warning: the service runs without notifying).
(define (open-notifier)
  (define address (getenv "NOTIFY_SOCKET"))
  (define watchdog-ms (watchdog-interval (getenv "WATCHDOG_USEC") (getenv "WATCHDOG_PID")))
  (for ([k (in-list '(#"NOTIFY_SOCKET" #"WATCHDOG_USEC" #"WATCHDOG_PID"))])
    (environment-variables-set! (current-environment-variables) k #f))
  (define sockaddr (and address (not (equal? address "")) (address->sockaddr address)))
  (cond
    [(or (not address) (equal? address "")) #f]
    [(not sockaddr)
     (log-fastcgi-warning "NOTIFY_SOCKET ~a: not an absolute path or @name of at most ~a bytes: systemd is not notified"
                          (log-escape address) SUN_PATH_MAX)
     #f]
    [else
     (define fd (c-socket AF_UNIX (bitwise-ior SOCK_DGRAM SOCK_CLOEXEC) 0))
     (cond
       [(< fd 0)
        (log-fastcgi-warning "NOTIFY_SOCKET ~a: cannot make a socket: ~a: systemd is not notified"
                             (log-escape address) (errno-message (saved-errno)))
        #f]
       [else (notifier fd address sockaddr watchdog-ms #t #f)])]))

;; address->sockaddr : string -> (or/c bytes #f)
(define (address->sockaddr address)
  (define b (string->bytes/utf-8 address))
  (define n (bytes-length b))
  (cond
    [(regexp-match? #rx#"\0" b) #f]
    [(and (> n 1) (= (bytes-ref b 0) (char->integer #\@)) (<= n SUN_PATH_MAX))
     ;; abstract: sun_path's first byte NUL, then the name, and no more
     (subbytes (make-sockaddr-un (bytes-append #"\0" (subbytes b 1))) 0 (+ 2 n))]
    [(and (> n 1) (= (bytes-ref b 0) (char->integer #\/)) (<= n SUN_PATH_MAX))
     (subbytes (make-sockaddr-un b) 0 (+ 3 n))]
    [else #f]))

;; watchdog-interval : (or/c string #f) (or/c string #f) -> (or/c positive-real #f)
;; Half of WATCHDOG_USEC in ms, when it is set and WATCHDOG_PID is unset or this process.
(define (watchdog-interval usec pid)
  (define u (and usec (string->number usec 10)))
  (and (exact-positive-integer? u)
       (or (not pid) (equal? (string->number pid 10) (c-getpid)))
       (/ u 2000.)))

;; notify! : (or/c notifier #f) string ... -> boolean
;; One datagram of these lines ("READY=1", "STATUS=..."); #f when it was not sent. A
;; line must hold no newline: the caller's text goes through status-text first.
(define (notify! n . lines)
  (cond
    [(or (not n) (notifier-closed? n)) #f]
    [else
     (define msg (string->bytes/utf-8 (apply string-append
                                             (for/list ([l (in-list lines)]) (string-append l "\n")))))
     (define sa (notifier-sockaddr n))
     (define r (c-sendto (notifier-fd n) msg (bytes-length msg) (bitwise-ior MSG_DONTWAIT MSG_NOSIGNAL)
                         sa (bytes-length sa)))
     (cond
       [(= r (bytes-length msg)) (set-notifier-ok?! n #t) #t]
       [else
        (when (notifier-ok? n)
          (log-fastcgi-warning "cannot notify systemd at ~a: ~a" (log-escape (notifier-address n))
                               (if (< r 0) (errno-message (saved-errno)) "short send")))
        (set-notifier-ok?! n #f)
        #f])]))

;; close-notifier! : (or/c notifier #f) -> void
(define (close-notifier! n)
  (when (and n (not (notifier-closed? n)))
    (set-notifier-closed?! n #t)
    (c-close (notifier-fd n))
    (void)))

;; monotonic-usec : -> natural
;; CLOCK_MONOTONIC in microseconds, the clock systemd reads for MONOTONIC_USEC. Racket's
;; monotonic milliseconds start at the process's start: not the same origin.
(define (monotonic-usec)
  (define ts (make-bytes 16 0))
  (c-clock-gettime CLOCK_MONOTONIC ts)
  (+ (* 1000000 (integer-bytes->integer ts #t #f 0 8))
     (quotient (integer-bytes->integer ts #t #f 8 16) 1000)))
