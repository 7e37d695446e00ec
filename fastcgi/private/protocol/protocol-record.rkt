#lang racket/base
;; FastCGI 1.0 records: the protocol's numbers (version, record types, roles, protocol
;; statuses) and their symbols, the codec's exceptions, the 8-byte record header, whole
;; records written to a port, and the three records of fixed content (BEGIN_REQUEST,
;; END_REQUEST, UNKNOWN_TYPE) made and parsed. Wire numbers become symbols here and
;; nowhere else. Pure over byte strings and ports.
(provide (struct-out exn:fail:fastcgi)
         (struct-out exn:fail:fastcgi:protocol)
         raise-protocol-error
         (struct-out record)
         fcgi-version max-content-length max-padding-length header-length
         type->symbol symbol->type
         role->symbol symbol->role
         protocol-status->symbol symbol->protocol-status
         parse-begin-request parse-end-request parse-unknown-type
         record-header record-header! padding-for
         record->bytes write-record write-stream
         begin-request-content end-request-content end-request-content! unknown-type-content)

(struct exn:fail:fastcgi exn:fail ())
(struct exn:fail:fastcgi:protocol exn:fail:fastcgi ())

;; raise-protocol-error : symbol string any ... -> none
(define (raise-protocol-error who fmt . args)
  (raise (exn:fail:fastcgi:protocol
          (string-append (symbol->string who) ": " (apply format fmt args))
          (current-continuation-marks))))

(define fcgi-version 1)
(define max-content-length 65535)
(define max-padding-length 255)
(define header-length 8)

;; A decoded record. type: a symbol for the 11 known types, the number otherwise.
(struct record (type id content) #:transparent)

(define type-names
  '#(#f begin-request abort-request end-request params stdin stdout stderr data
        get-values get-values-result unknown-type))

;; type->symbol : byte -> (or/c symbol? byte?)
(define (type->symbol n)
  (if (and (>= n 1) (<= n 11)) (vector-ref type-names n) n))

;; symbol->type : (or/c symbol? byte?) -> byte
(define (symbol->type s)
  (cond [(exact-integer? s) s]
        [else (case s
                [(begin-request) 1] [(abort-request) 2] [(end-request) 3] [(params) 4]
                [(stdin) 5] [(stdout) 6] [(stderr) 7] [(data) 8] [(get-values) 9]
                [(get-values-result) 10] [(unknown-type) 11]
                [else (raise-argument-error 'symbol->type "record type" s)])]))

;; role->symbol : integer -> (or/c 'responder 'authorizer 'filter integer?)
(define (role->symbol n)
  (case n [(1) 'responder] [(2) 'authorizer] [(3) 'filter] [else n]))
;; symbol->role : symbol -> integer
(define (symbol->role s)
  (case s [(responder) 1] [(authorizer) 2] [(filter) 3]
    [else (if (exact-integer? s) s (raise-argument-error 'symbol->role "role" s))]))

;; protocol-status->symbol : byte -> (or/c symbol? byte?)
(define (protocol-status->symbol n)
  (case n [(0) 'request-complete] [(1) 'cant-mpx-conn] [(2) 'overloaded] [(3) 'unknown-role]
    [else n]))
;; symbol->protocol-status : symbol -> byte
(define (symbol->protocol-status s)
  (case s [(request-complete) 0] [(cant-mpx-conn) 1] [(overloaded) 2] [(unknown-role) 3]
    [else (raise-argument-error 'symbol->protocol-status "protocol status" s)]))

;; parse-begin-request : bytes -> (values role keep-conn?)
;; role is a symbol for the three known roles, the number otherwise.
(define (parse-begin-request content)
  (unless (= (bytes-length content) 8)
    (raise-protocol-error 'begin-request "content length ~a, expected 8" (bytes-length content)))
  (values (role->symbol (+ (* 256 (bytes-ref content 0)) (bytes-ref content 1)))
          (odd? (bytes-ref content 2))))

;; parse-end-request : bytes -> (values app-status protocol-status)
(define (parse-end-request content)
  (unless (= (bytes-length content) 8)
    (raise-protocol-error 'end-request "content length ~a, expected 8" (bytes-length content)))
  (values (integer-bytes->integer content #f #t 0 4)
          (protocol-status->symbol (bytes-ref content 4))))

;; parse-unknown-type : bytes -> (or/c symbol? byte?)
(define (parse-unknown-type content)
  (unless (= (bytes-length content) 8)
    (raise-protocol-error 'unknown-type "content length ~a, expected 8" (bytes-length content)))
  (type->symbol (bytes-ref content 0)))

;; ---------------------------------------------------------------------------------------
;; Encoding.

;; padding-for : natural -> natural ; pad records to a multiple of 8 bytes
(define (padding-for len) (bitwise-and (- 8 (bitwise-and len 7)) 7))

(define zero-padding (make-bytes 8 0))

;; record-header : (or/c symbol? byte?) natural natural [natural] -> bytes
(define (record-header type id len [pad (padding-for len)])
  (define h (make-bytes header-length))
  (record-header! h 0 type id len pad)
  h)

;; record-header! : bytes natural (or/c symbol? byte?) natural natural natural -> void
;; Writes a record header into buf at `at`, for a writer that builds its records in
;; place (the server's answers) and so allocates nothing per record.
(define (record-header! buf at type id len pad)
  (bytes-set! buf at fcgi-version)
  (bytes-set! buf (+ at 1) (symbol->type type))
  (bytes-set! buf (+ at 2) (quotient id 256))
  (bytes-set! buf (+ at 3) (bitwise-and id 255))
  (bytes-set! buf (+ at 4) (quotient len 256))
  (bytes-set! buf (+ at 5) (bitwise-and len 255))
  (bytes-set! buf (+ at 6) pad)
  (bytes-set! buf (+ at 7) 0))

;; record->bytes : type natural bytes -> bytes ; one record, content at most 65535 bytes
(define (record->bytes type id content)
  (define len (bytes-length content))
  (when (> len max-content-length)
    (raise-argument-error 'record->bytes "content of at most 65535 bytes" content))
  (define pad (padding-for len))
  (bytes-append (record-header type id len pad) content (subbytes zero-padding 0 pad)))

;; write-record : type natural bytes output-port [natural natural] -> void
;; Writes content[start,end) as one record (at most 65535 bytes), padded to 8.
(define (write-record type id content out [start 0] [end (bytes-length content)])
  (define len (- end start))
  (define pad (padding-for len))
  (write-bytes (record-header type id len pad) out)
  (write-bytes content out start end)
  (write-bytes zero-padding out 0 pad)
  (void))

;; write-stream : type natural bytes output-port #:end? boolean -> void
;; A whole stream: as many records as needed (65528 bytes each keeps 8-byte alignment),
;; then, when end?, the empty record that closes the stream.
(define (write-stream type id content out #:end? [end? #t])
  (define len (bytes-length content))
  (let loop ([i 0])
    (when (< i len)
      (define j (min len (+ i 65528)))
      (write-record type id content out i j)
      (loop j)))
  (when end? (write-bytes (record-header type id 0 0) out))
  (void))

;; begin-request-content : (or/c symbol? natural) boolean -> bytes
(define (begin-request-content role keep-conn?)
  (define r (symbol->role role))
  (bytes (quotient r 256) (bitwise-and r 255) (if keep-conn? 1 0) 0 0 0 0 0))

;; end-request-content : natural symbol -> bytes
(define (end-request-content app-status protocol-status)
  (define bs (make-bytes 8 0))
  (end-request-content! bs 0 app-status protocol-status)
  bs)

;; end-request-content! : bytes natural integer symbol -> void
;; The same 8 bytes written into buf at `at` (no list of arguments, no new string).
(define (end-request-content! buf at app-status protocol-status)
  (define s (bitwise-and app-status #xffffffff))
  (bytes-set! buf at (arithmetic-shift s -24))
  (bytes-set! buf (+ at 1) (bitwise-and (arithmetic-shift s -16) 255))
  (bytes-set! buf (+ at 2) (bitwise-and (arithmetic-shift s -8) 255))
  (bytes-set! buf (+ at 3) (bitwise-and s 255))
  (bytes-set! buf (+ at 4) (symbol->protocol-status protocol-status))
  (bytes-set! buf (+ at 5) 0)
  (bytes-set! buf (+ at 6) 0)
  (bytes-set! buf (+ at 7) 0))

;; unknown-type-content : (or/c symbol? byte?) -> bytes
(define (unknown-type-content type) (bytes (symbol->type type) 0 0 0 0 0 0 0))
