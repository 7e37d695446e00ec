#lang racket/base
;; Raw libc bindings for sockets, Linux x86_64 only: constants are hard-coded and socket
;; addresses are laid out by hand in byte strings. Every call that can fail saves errno,
;; but for the #:no-errno ones. define-libc, the form of every C binding in the collection
;; (signals, the hand-over, the poller use it too), is defined here.
(require ffi/unsafe
         ffi/unsafe/vm
         racket/string
         "../util/probes.rkt")
(provide fd-pair
         AF_UNIX AF_INET AF_INET6 SOCK_STREAM SOCK_NONBLOCK SOCK_CLOEXEC
         SOL_SOCKET SO_REUSEADDR SO_ACCEPTCONN IPPROTO_TCP TCP_NODELAY
         IPPROTO_IPV6 IPV6_V6ONLY SHUT_WR
         EINTR EAGAIN ENFILE EMFILE ENOBUFS ENOMEM EPROTO ECONNABORTED ECONNREFUSED
         SUN_PATH_MAX socket-flags
         define-libc
         c-socket c-bind c-listen c-accept4 c-accept4/fast c-connect c-shutdown c-close c-close/fast
         c-read c-send c-read/fast c-send/fast c-recv/fast MSG_PEEK MSG_DONTWAIT MSG_NOSIGNAL
         c-sendrecs/fast sendrecs-max make-sendrecs sendrecs-probe checked-sendrecs
         c-setsockopt c-getsockopt c-getsockname
         c-unlink c-chmod c-chown c-umask c-getpid c-geteuid
         set-nonblocking! dup-cloexec set-cloexec! close-on-exec-all! null-onto! peer-credentials
         errno-message setsockopt-int getsockopt-int
         uid-of-user gid-of-group
         ip->bytes bytes->ip unmap-ipv4
         make-sockaddr-in make-sockaddr-un sockaddr-family sockaddr->ip+port
         SOCKADDR_MAX)

(define AF_UNIX 1)
(define AF_INET 2)
(define AF_INET6 10)
(define SOCK_STREAM 1)
(define SOCK_NONBLOCK #o4000)
(define SOCK_CLOEXEC #o2000000)
(define SOL_SOCKET 1)
(define SO_REUSEADDR 2)
(define SO_ACCEPTCONN 30)
(define IPPROTO_TCP 6)
(define TCP_NODELAY 1)
(define IPPROTO_IPV6 41)
(define IPV6_V6ONLY 26)
(define SHUT_WR 1)
(define MSG_NOSIGNAL #x4000)
(define MSG_PEEK #x2)
(define MSG_DONTWAIT #x40)
(define F_GETFL 3)
(define F_SETFL 4)
(define O_NONBLOCK #o4000)
(define F_DUPFD_CLOEXEC 1030)
(define F_GETFD 1)
(define F_SETFD 2)
(define FD_CLOEXEC 1)
(define O_RDWR 2)
(define O_CLOEXEC #o2000000)
(define SO_PEERCRED 17)

(define EINTR 4)
(define EAGAIN 11)
(define ENOMEM 12)
(define ENFILE 23)
(define EMFILE 24)
(define EPROTO 71)
(define ENOBUFS 105)
(define ECONNABORTED 103)
(define ECONNREFUSED 111)

;; every socket made here: a stream socket, non-blocking and close-on-exec
(define socket-flags (bitwise-ior SOCK_STREAM SOCK_NONBLOCK SOCK_CLOEXEC))

(define SUN_PATH_MAX 107)   ; sun_path is 108 bytes including the terminating NUL
(define SOCKADDR_MAX 128)   ; sizeof(struct sockaddr_storage)

;; (define-libc id "name" type ... -> type): the C library's function, which saves errno
;; after each call (saved-errno reads it). With #:no-errno before the types it does not: for
;; the calls on the per-request path, which a failure makes again with the saving version,
;; and for those whose errno nobody reads. The types may begin with _fun's own options.
(define-syntax define-libc
  (syntax-rules ()
    [(_ name c-name #:no-errno type ...) (define name (get-ffi-obj c-name #f (_fun type ...)))]
    [(_ name c-name type ...)
     (define name (get-ffi-obj c-name #f (_fun #:save-errno 'posix type ...)))]))

(define-libc c-socket "socket" _int _int _int -> _int)
(define-libc c-bind "bind" _int _bytes _int -> _int)
(define-libc c-listen "listen" _int _int -> _int)
(define-libc c-accept4 "accept4" _int _bytes _bytes _int -> _int)
(define-libc c-connect "connect" _int _bytes _int -> _int)
(define-libc c-shutdown "shutdown" _int _int -> _int)
(define-libc c-close "close" _int -> _int)
;; The buffer is a pointer into a byte string (ptr-add): Racket CS does not collect during
;; a non-blocking foreign call, so the string cannot move while the kernel copies.
(define-libc c-read "read" _int _pointer _size -> _ssize)
(define-libc c-send "send" _int _pointer _size _int -> _ssize)
;; The same two without saving errno, for the per-request path: saving it takes Racket's
;; slower call path, which allocates. A call that fails is made again with the saving
;; version, whose errno (and result) count: a failed read or send took or sent nothing.
(define-libc c-read/fast "read" #:no-errno _int _pointer _size -> _ssize)
(define-libc c-send/fast "send" #:no-errno _int _pointer _size _int -> _ssize)
;; recv, for a peek at whether input is pending (no errno wanted: any failure means none)
(define-libc c-recv/fast "recv" #:no-errno _int _bytes _size _int -> _ssize)
;; The same for a connection's accept (a failed one is made again with c-accept4) and its
;; close (whose errno nobody reads), which a connection makes once each: see
;; bench/OPTIMISATIONS.md, FFI calls without saving errno.
(define-libc c-accept4/fast "accept4" #:no-errno _int _bytes _bytes _int -> _int)
(define-libc c-close/fast "close" #:no-errno _int -> _int)
(define-libc c-socketpair "socketpair" _int _int _int _bytes -> _int)

;; c-sendrecs/fast : fd bytes natural bytes natural natural natural -> integer, or #f
;; One sendmsg(MSG_NOSIGNAL) of k records (1 <= k <= sendrecs-max): the j-th is the 8-byte
;; header heads[h + 8j, h + 8j + 8) and then the content bs[start + nj, start + n(j + 1)):
;; a large write's records, sent without copying the content, a megabyte in one call.
;; Returns what was sent, or -1 (errno not saved: the caller sends again with c-send,
;; whose errno counts). #f where there is none: the caller sends record by record.
(define sendrecs-max 16)

;; make-sendrecs : [s-expression] -> procedure
;; The iovec holds addresses into the strings, so it is Chez Scheme code (through
;; vm-eval), with interrupts off from taking the addresses to the end of the call: no
;; collection can move the strings in between. The msghdr and iovec are one block per
;; place, used only in atomic mode. data: the Chez expression of the offset of a
;; bytevector's first byte from its tagged address.
(define (make-sendrecs [data '(fx+ (foreign-sizeof 'ptr) 1)])
  (vm-eval
   `(let ([sendmsg (foreign-procedure ,(cast (ffi-obj-ref "sendmsg" #f) _pointer _intptr)
                                      (int uptr int) ssize_t)]
          [msg (foreign-alloc ,(+ 56 (* 16 2 sendrecs-max)))]
          [address ($primitive $object-address)]
          [data ,data])
      (define iov (+ msg 56))
      ;; piece! : natural bytevector natural natural -> void ; iovec entry i
      (define (piece! i bv from len)
        (let ([at (+ iov (fx* i 16))])
          (foreign-set! 'uptr at 0 (address bv (fx+ data from)))
          (foreign-set! 'uptr at 8 len)))
      ;; struct msghdr: name, namelen, iov, iovlen (set per call), control,
      ;; controllen, flags
      (foreign-set! 'uptr msg 0 0)
      (foreign-set! 'uptr msg 8 0)
      (foreign-set! 'uptr msg 16 iov)
      (foreign-set! 'uptr msg 32 0)
      (foreign-set! 'uptr msg 40 0)
      (foreign-set! 'uptr msg 48 0)
      (lambda (fd heads h bs start n k)
        (with-interrupts-disabled
         (let loop ([j 0])
           (when (fx< j k)
             (piece! (fx* 2 j) heads (fx+ h (fx* 8 j)) 8)
             (piece! (fx+ (fx* 2 j) 1) bs (fx+ start (fx* n j)) n)
             (loop (fx+ j 1))))
         (foreign-set! 'uptr msg 24 (fx* 2 k))
         (sendmsg fd msg ,MSG_NOSIGNAL))))))

;; fd-pair : bytes -> (values fd fd) ; the two descriptors pipe2 or socketpair wrote into bs
(define (fd-pair bs)
  (values (integer-bytes->integer bs #t #f 0 4) (integer-bytes->integer bs #t #f 4 8)))

;; sendrecs-probe : procedure -> (or/c #t string)
;; #t when send sends two records (from offsets in both strings) over a socket pair
;; as the bytes they name, read back at the other end.
(define (sendrecs-probe send)
  (define sv (make-bytes 8 0))
  (cond
    [(< (c-socketpair AF_UNIX (bitwise-ior SOCK_STREAM SOCK_CLOEXEC) 0 sv) 0)
     (format "cannot make a socket pair to probe it (errno ~a)" (saved-errno))]
    [else
     (define-values (a b) (fd-pair sv))
     (dynamic-wind
      void
      (λ ()
        (define heads (string->bytes/latin-1 "ABCDEFGHIJKLMNOPQRSTUVWX"))
        (define bs (string->bytes/latin-1 "abcdefghijklmnop"))
        (define want (bytes-append (subbytes heads 8 16) (subbytes bs 3 8) (subbytes heads 16 24) (subbytes bs 8 13)))
        (define sent (send a heads 8 bs 3 5 2))
        (define got (make-bytes 64 0))
        (define n (c-recv/fast b got 64 MSG_DONTWAIT))
        (cond
          [(not (eqv? sent (bytes-length want))) (format "sent ~a bytes of two records, expected ~a" sent (bytes-length want))]
          [(not (equal? (subbytes got 0 (max n 0)) want))
           (format "the bytes received differ from the records' from byte ~a on"
                   (for/first ([i (in-naturals)] #:unless (and (< i n) (= (bytes-ref got i) (bytes-ref want i)))) i))]
          [else #t]))
      (λ () (c-close a) (c-close b)))]))

;; checked-sendrecs : (-> procedure) -> (or/c procedure #f)
;; What make makes, where it compiles and passes sendrecs-probe; else #f, with one line:
;; $object-address and a bytevector's layout are Chez Scheme's, not documented by Racket.
(define (checked-sendrecs make)
  (define send (with-handlers ([exn:fail? (λ (e) (format "its Chez Scheme code does not compile: ~a" (exn-message e)))])
                 (make)))
  (and (assumption-holds? "the zero-copy send (sendmsg of $object-address addresses, vm-eval'd)"
                          (λ () (if (string? send) send (sendrecs-probe send)))
                          "records are copied before they are sent")
       send))

(define c-sendrecs/fast
  (and (eq? (system-type 'vm) 'chez-scheme) (checked-sendrecs make-sendrecs)))
(define-libc c-setsockopt "setsockopt" _int _int _int _bytes _int -> _int)
(define-libc c-getsockopt "getsockopt" _int _int _int _bytes _bytes -> _int)
(define-libc c-getsockname "getsockname" _int _bytes _bytes -> _int)
(define-libc c-unlink "unlink" _path -> _int)
(define-libc c-chmod "chmod" _path _int -> _int)
(define-libc c-chown "chown" _path _int _int -> _int)
(define-libc c-umask "umask" _int -> _int)
(define-libc c-getpid "getpid" -> _int)
(define-libc c-geteuid "geteuid" -> _int)
(define-libc c-open "open" _path _int -> _int)
(define-libc c-dup2 "dup2" _int _int -> _int)
(define-libc c-fcntl "fcntl" #:varargs-after 2 _int _int _int -> _int)
(define-libc c-inet-pton "inet_pton" _int _bytes _bytes -> _int)
(define-libc c-inet-ntop "inet_ntop" _int _bytes _bytes _int -> _pointer)
(define-libc c-getpwnam "getpwnam" _bytes -> _pointer)
(define-libc c-getgrnam "getgrnam" _bytes -> _pointer)
(define-libc c-strerror "strerror" #:no-errno _int -> _string/utf-8)

;; errno-message : exact-integer -> string
;; "Permission denied (errno 13)".
(define (errno-message errno)
  (format "~a (errno ~a)" (c-strerror errno) errno))

;; add-fd-flag! : fd natural natural natural -> (or/c #t errno)
;; Reads fd's flags with the fcntl command get and writes them back, with flag added, with set.
(define (add-fd-flag! fd get set flag)
  (define flags (c-fcntl fd get 0))
  (cond [(< flags 0) (saved-errno)]
        [(< (c-fcntl fd set (bitwise-ior flags flag)) 0) (saved-errno)]
        [else #t]))

;; set-nonblocking! : fd -> (or/c #t errno)
(define (set-nonblocking! fd) (add-fd-flag! fd F_GETFL F_SETFL O_NONBLOCK))

;; dup-cloexec : fd -> (or/c fd (list errno))
;; A new descriptor (3 or above) for what fd refers to, close-on-exec.
(define (dup-cloexec fd)
  (define r (c-fcntl fd F_DUPFD_CLOEXEC 3))
  (if (< r 0) (list (saved-errno)) r))

;; set-cloexec! : fd -> (or/c #t errno)
(define (set-cloexec! fd) (add-fd-flag! fd F_GETFD F_SETFD FD_CLOEXEC))

;; close-on-exec-all! : -> void
;; Every descriptor from 3 up that the process holds now becomes close-on-exec: those the
;; runtime opened for itself (its event poll, its signal pipe), files opened so far. A
;; program started through libc (system, posix_spawn) then gets none of them; Racket's
;; subprocess closes them in the child anyway.
(define (close-on-exec-all!)
  (for ([name (in-list (directory-list "/proc/self/fd"))])
    (define fd (string->number (path->string name)))
    (when (and fd (>= fd 3)) (set-cloexec! fd))))

;; null-onto! : fd -> (or/c #t errno)
;; fd now refers to /dev/null (read and write): a standard descriptor that must stay
;; open, or the next file opened would take its number.
(define (null-onto! fd)
  (define null (c-open "/dev/null" (bitwise-ior O_RDWR O_CLOEXEC)))
  (cond [(< null 0) (saved-errno)]
        [else
         (define r (c-dup2 null fd))
         (define errno (saved-errno))
         (c-close null)
         (if (< r 0) errno #t)]))

;; peer-credentials : fd -> (or/c (list pid uid gid) #f)
;; The process at the other end of a connected unix socket (for a client, the one that
;; called listen), as the kernel recorded it (SO_PEERCRED); #f when the call fails.
(define (peer-credentials fd)
  (define buf (make-bytes 12 0))
  (and (= 0 (c-getsockopt fd SOL_SOCKET SO_PEERCRED buf (integer->integer-bytes 12 4 #f)))
       (list (integer-bytes->integer buf #t #f 0 4)
             (integer-bytes->integer buf #f #f 4 8)
             (integer-bytes->integer buf #f #f 8 12))))

;; setsockopt-int : fd level option int -> (or/c #t errno)
(define (setsockopt-int fd level option value)
  (if (< (c-setsockopt fd level option (integer->integer-bytes value 4 #t) 4) 0)
      (saved-errno)
      #t))

;; getsockopt-int : fd level option -> (or/c exact-integer #f)
;; #f when the call fails (not a socket, bad fd, unknown option).
(define (getsockopt-int fd level option)
  (define buf (make-bytes 4 0))
  (and (= 0 (c-getsockopt fd level option buf (integer->integer-bytes 4 4 #f)))
       (integer-bytes->integer buf #t)))

;; uid-of-user : string -> (or/c exact-nonnegative-integer #f)
;; pw_uid sits after two pointers in glibc's struct passwd, as gr_gid does in struct group.
(define (uid-of-user name)
  (define p (c-getpwnam (bytes-append (string->bytes/utf-8 name) #"\0")))
  (and p (ptr-ref p _uint32 'abs 16)))

;; gid-of-group : string -> (or/c exact-nonnegative-integer #f)
(define (gid-of-group name)
  (define p (c-getgrnam (bytes-append (string->bytes/utf-8 name) #"\0")))
  (and p (ptr-ref p _uint32 'abs 16)))

;; ip->bytes : string -> (or/c bytes #f)
;; The 4- or 16-byte network form of a numeric IPv4 or IPv6 address, #f if it is neither.
(define (ip->bytes str)
  (define c-str (bytes-append (string->bytes/utf-8 str) #"\0"))
  (and (not (string-contains? str "\0"))
       (for/or ([af (list AF_INET AF_INET6)]
                [size '(4 16)])
         (define buf (make-bytes size 0))
         (and (= 1 (c-inet-pton af c-str buf)) buf))))

;; bytes->ip : bytes -> string
;; Canonical text of a 4- or 16-byte address (inet_ntop compresses IPv6 zeros).
(define (bytes->ip addr)
  (define out (make-bytes 64 0))
  (c-inet-ntop (if (= 4 (bytes-length addr)) AF_INET AF_INET6) addr out 64)
  (bytes->string/utf-8 (car (regexp-match #rx#"^[^\0]*" out))))

;; unmap-ipv4 : bytes -> bytes
;; ::ffff:a.b.c.d becomes the 4-byte a.b.c.d; any other address is returned as is.
(define (unmap-ipv4 addr)
  (if (and (= 16 (bytes-length addr))
           (equal? (subbytes addr 0 12) #"\0\0\0\0\0\0\0\0\0\0\377\377"))
      (subbytes addr 12)
      addr))

;; make-sockaddr-in : bytes port -> bytes
;; struct sockaddr_in (16 bytes) for a 4-byte address, sockaddr_in6 (28 bytes) for 16 bytes.
(define (make-sockaddr-in addr port)
  (define v4? (= 4 (bytes-length addr)))
  (define sa (make-bytes (if v4? 16 28) 0))
  (integer->integer-bytes (if v4? AF_INET AF_INET6) 2 #f #f sa 0)
  (integer->integer-bytes port 2 #f #t sa 2)
  (bytes-copy! sa (if v4? 4 8) addr)
  sa)

;; make-sockaddr-un : bytes -> bytes
;; struct sockaddr_un (110 bytes); the path must be at most SUN_PATH_MAX bytes.
(define (make-sockaddr-un path)
  (define sa (make-bytes 110 0))
  (integer->integer-bytes AF_UNIX 2 #f #f sa 0)
  (bytes-copy! sa 2 path)
  sa)

;; sockaddr-family : bytes -> exact-integer
(define (sockaddr-family sa)
  (integer-bytes->integer sa #f #f 0 2))

;; sockaddr->ip+port : bytes -> (values bytes port)
;; Address bytes and port of an AF_INET or AF_INET6 socket address.
(define (sockaddr->ip+port sa)
  (if (= AF_INET (sockaddr-family sa))
      (values (subbytes sa 4 8) (integer-bytes->integer sa #f #t 2 4))
      (values (subbytes sa 8 24) (integer-bytes->integer sa #f #t 2 4))))
