#lang racket/base
;; Allowed clients (FCGI_WEB_SERVER_ADDRS, --allowed-clients): the list of addresses and
;; networks a TCP peer must be in; a unix socket's peer is always allowed.
(require racket/list
         racket/string
         "../os/ffi.rkt"
         "../util/log.rkt")
(provide parse-allowed-clients
         client-allowed?)

;; entries: (listof (cons address-bytes prefix-length)), IPv4-mapped IPv6 stored as IPv4
(struct allowed (entries))

;; parse-allowed-clients : string -> allowed
(define (parse-allowed-clients str)
  (define entries
    (filter-map parse-allowed-entry (string-split str #px"[,\\s]+")))
  (when (null? entries)
    (log-fastcgi-warning "allowed clients \"~a\": no valid address, every TCP client is denied"
                         (log-escape str)))
  (allowed entries))

;; parse-allowed-entry : string -> (or/c (cons bytes int) #f)
(define (parse-allowed-entry entry)
  (define m (regexp-match #px"^([^/]+)(?:/([0-9]{1,3}))?$" entry))
  (define addr (and m (ip->bytes (cadr m))))
  (define bits (and addr (* 8 (bytes-length addr))))
  (define prefix (and addr (if (caddr m) (string->number (caddr m)) bits)))
  (cond
    [(not (and prefix (<= prefix bits)))
     (log-fastcgi-warning "allowed clients: ignoring invalid entry \"~a\"" (log-escape entry))
     #f]
    [(and (= bits 128) (>= prefix 96) (= 4 (bytes-length (unmap-ipv4 addr))))
     (cons (unmap-ipv4 addr) (- prefix 96))]
    [else (cons addr prefix)]))

;; client-allowed? : allowed string -> boolean
(define (client-allowed? a peer)
  (or (equal? peer "unix")
      (let ([addr (ip->bytes peer)])
        (and addr
             (for/or ([entry (in-list (allowed-entries a))])
               (prefix-match? (car entry) (cdr entry) (unmap-ipv4 addr)))))))

;; prefix-match? : bytes int bytes -> boolean
(define (prefix-match? net prefix addr)
  (and (= (bytes-length net) (bytes-length addr))
       (let-values ([(whole rest) (quotient/remainder prefix 8)])
         (and (equal? (subbytes net 0 whole) (subbytes addr 0 whole))
              (or (zero? rest)
                  (let ([mask (bitwise-and #xff (arithmetic-shift #xff (- 8 rest)))])
                    (= (bitwise-and mask (bytes-ref net whole))
                       (bitwise-and mask (bytes-ref addr whole)))))))))
