#lang racket/base
;; The FastCGI 1.0 codec, one module for its users: record headers, content and padding,
;; name-value pairs, and the decoder of a record stream. Pure over byte strings and ports;
;; knows nothing of sockets, threads or HTTP.
;;
;; Every length read from the wire is untrusted: it is checked against what is actually
;; present before anything is allocated, and no arithmetic is done in 16 or 32 bits
;; (Racket integers do not wrap). Each concern is its own module:
;;   protocol-record.rkt   the protocol's numbers as symbols, exceptions, headers, the
;;                         records of fixed content, records written to a port
;;   protocol-pairs.rkt    name-value pairs (PARAMS): checked, looked up, parsed, encoded
;;   protocol-decoder.rkt  a connection's stream of bytes cut into records
;;   fast-bytes.rkt        the byte-string primitives they use on the request path
(require "../util/fast-bytes.rkt"
         "protocol-decoder.rkt"
         "protocol-pairs.rkt"
         "protocol-record.rkt")
(provide (struct-out exn:fail:fastcgi)
         (struct-out exn:fail:fastcgi:protocol)
         raise-protocol-error
         (struct-out record)
         fcgi-version max-content-length
         type->symbol symbol->type
         role->symbol symbol->role
         protocol-status->symbol symbol->protocol-status
         ;; decoding
         make-decoder decoder? decoder-read! decoder-room! decoder-filled! decoder-shrink! decoder-next! decoder-take!
         decoder-view! decoder-buf decoder-id decoder-content-start decoder-content-end
         decoder-content-length decoder-content decoder-header-problem
         decoder-feed!
         decoder-buffered
         decoder-pending
         parse-begin-request parse-end-request parse-unknown-type
         parse-pairs
         parse-params check-params params-ref pair-head bytes-range=? make-unfilled-bytes
         ;; encoding
         record-header record-header! padding-for
         record->bytes write-record write-stream
         begin-request-content end-request-content end-request-content! unknown-type-content
         pairs->bytes)
