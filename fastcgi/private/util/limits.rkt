#lang racket/base
;; Every limit and deadline of the server, in one struct with safe defaults.
;; The manual's "Limits" section documents each field, its default and the answer a peer
;; gets when it is hit; keep the two in step.
(provide (struct-out limits)
         make-limits
         default-limits)

(struct limits
  (max-params-bytes        ; total PARAMS bytes of one request           -> 431
   max-params-pairs        ; name-value pairs of one request             -> 431
   max-body                ; STDIN bytes of one request (and CONTENT_LENGTH) -> 413
   max-requests-per-connection ; live requests on one connection     -> END_REQUEST OVERLOADED
   max-concurrent          ; handlers running in this process            -> 503
   max-connections         ; open connections in this process        -> 64 more get 503, then the backlog
   stdin-buffer            ; bytes of body queued for one handler not yet read
   connection-buffer       ; input held for the live requests of a multiplexed connection -> OVERLOADED / ended
   first-byte-timeout      ; seconds from accept to the first whole record -> close
   idle-timeout            ; seconds between requests on a kept connection -> close
   read-timeout            ; seconds without progress while a request's input is incomplete -> close
   write-timeout           ; seconds one write may block (peer not reading) -> close, abort its requests
   request-timeout         ; seconds a handler may run (#f: no limit)    -> 503 and the handler is broken
   request-memory          ; bytes a handler's threads may hold (#f: no limit) -> 500 and the handler is killed
   max-queue-delay         ; seconds runnable threads wait for the CPU, smoothed (#f: off) -> new requests 503
   drain-timeout)          ; seconds to drain the peer's remaining bytes when closing
  #:transparent)

;; make-limits : keyword arguments -> limits ; every field has the default documented above
(define (make-limits #:max-params-bytes [max-params-bytes (* 128 1024)]
                     #:max-params-pairs [max-params-pairs 1000]
                     #:max-body [max-body (* 64 1024 1024)]
                     #:max-requests-per-connection [max-requests-per-connection 100]
                     #:max-concurrent [max-concurrent 1000]
                     #:max-connections [max-connections 1024]
                     #:stdin-buffer [stdin-buffer (* 256 1024)]
                     #:connection-buffer [connection-buffer (* 1024 1024)]
                     #:first-byte-timeout [first-byte-timeout 10]
                     #:idle-timeout [idle-timeout 120]
                     #:read-timeout [read-timeout 30]
                     #:write-timeout [write-timeout 30]
                     #:request-timeout [request-timeout #f]
                     #:request-memory [request-memory #f]
                     #:max-queue-delay [max-queue-delay #f]
                     #:drain-timeout [drain-timeout 2])
  (limits max-params-bytes max-params-pairs max-body max-requests-per-connection
          max-concurrent max-connections stdin-buffer connection-buffer first-byte-timeout idle-timeout
          read-timeout write-timeout request-timeout request-memory max-queue-delay drain-timeout))

(define default-limits (make-limits))
