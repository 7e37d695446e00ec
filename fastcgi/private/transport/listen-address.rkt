#lang racket/base
;; Listen addresses: the text of --listen (unix:PATH, HOST:PORT, [IPV6]:PORT, *:PORT, fd:N)
;; parsed into a listen-spec, and a listen-spec or an IP and port written back as text.
(require racket/string
         "../os/ffi.rkt"
         "transport-exn.rkt")
(provide (struct-out listen-spec)
         parse-listen-address
         listen-spec->string
         host->bytes
         ip+port->string)

;; kind: 'unix (target: path string), 'tcp (target: host string, port), 'fd (target: fd)
(struct listen-spec (kind target port) #:transparent)

;; parse-listen-address : string -> listen-spec
(define (parse-listen-address str)
  (define (bad why)
    (raise-transport "invalid listen address ~s: ~a" str why))
  (cond
    [(string-prefix? str "unix:")
     (define path (substring str 5))
     (cond [(string=? path "") (bad "empty socket path")]
           [(string-contains? path "\0") (bad "NUL in socket path")]
           [(> (bytes-length (string->bytes/utf-8 path)) SUN_PATH_MAX)
            (bad (format "socket path longer than ~a bytes" SUN_PATH_MAX))]
           [else (listen-spec 'unix path #f)])]
    [(string-prefix? str "fd:")
     (define m (regexp-match #px"^fd:([0-9]{1,9})$" str))
     (if m (listen-spec 'fd (string->number (cadr m)) #f) (bad "expected fd:N"))]
    [(or (regexp-match #px"^\\[([^]]*)\\]:([0-9]{1,5})$" str)
         (regexp-match #px"^([^:\\[\\]]*):([0-9]{1,5})$" str))
     => (lambda (m)
          (define host (if (member (cadr m) '("" "*")) "*" (cadr m)))
          (define port (string->number (caddr m)))
          (cond [(> port 65535) (bad "port must be 0..65535")]
                [(not (host->bytes host))
                 (bad "host must be a numeric IPv4 address, [IPv6], localhost or *")]
                [(and (string-prefix? str "[") (not (regexp-match? #rx":" host)))
                 (bad "only IPv6 addresses go in brackets")]
                [else (listen-spec 'tcp host port)]))]
    [else (bad "expected unix:PATH, HOST:PORT, [IPV6]:PORT, *:PORT or fd:N")]))

;; host->bytes : string -> (or/c bytes #f)
(define (host->bytes host)
  (case host
    [("*") (bytes 0 0 0 0)]
    [("localhost") (bytes 127 0 0 1)]
    [else (ip->bytes host)]))

;; listen-spec->string : listen-spec -> string
(define (listen-spec->string spec)
  (define target (listen-spec-target spec))
  (case (listen-spec-kind spec)
    [(unix) (string-append "unix:" target)]
    [(fd) (format "fd:~a" target)]
    [else (ip+port->string target (listen-spec-port spec))]))

;; ip+port->string : string port -> string
(define (ip+port->string ip port)
  (if (regexp-match? #rx":" ip) (format "[~a]:~a" ip port) (format "~a:~a" ip port)))
