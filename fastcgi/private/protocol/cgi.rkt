#lang racket/base
;; Every CGI answer the server makes itself, and what it reads of the CGI answers handlers
;; make. The server speaks HTTP only through the front, as CGI: a head of header lines (a
;; `Status:` line for any status but 200), an empty line, the body. This module is that
;; format, so that the connection layer, requests, the server, the worker's status paths
;; and the dev front name a status or a reason and never write a head by hand:
;; - status-reason: the reason phrase of a code. web-server's own table
;;   (message-for-status-code), copied below since loading it would load racket/contract
;;   into every worker (tests/cgi-test.rkt checks the copy against it), except the codes this server sends that web-server words
;;   after RFC 7231 or lacks: 413 is "Content Too Large" (RFC 9110), 431 "Request Header
;;   Fields Too Large" (RFC 6585);
;; - cgi-head and status-page: the head of an answer, and a whole plain-text status answer;
;; - refusal-status and refusal-page: why the server refused a request before (or instead
;;   of) its handler's answer, as a symbol, to its status and page;
;; - parse-content-length: CONTENT_LENGTH as the engine reads it;
;; - head-status: the status of a CGI head a handler wrote (for the access log).
;; Pure: byte strings in, byte strings out. No contracts (it is not the public boundary, and
;; racket/contract would be loaded by every worker only for it); the `private` submodule
;; names the bindings the engine calls per request.

(provide status-reason
         cgi-head
         status-page
         refusal-reason?
         refusal-status
         refusal-page
         parse-content-length
         head-status)
(module+ private
  (provide status-page refusal-status refusal-page parse-content-length head-status))

;; The codes whose phrase is not web-server's (see the header).
(define own-reasons (hasheqv 413 "Content Too Large" 431 "Request Header Fields Too Large"))

;; status-reason : natural -> string ; "Status" for a code no table knows
(define (status-reason code)
  (or (hash-ref own-reasons code #f) (hash-ref web-server-reasons code #f) "Status"))

;; web-server's message-for-status-code, code by code
(define web-server-reasons
  #hasheqv((100 . "Continue") (101 . "Switching Protocols") (200 . "OK") (201 . "Created")
           (202 . "Accepted") (203 . "Non-Authoritative Information") (204 . "No Content")
           (205 . "Reset Content") (206 . "Partial Content") (300 . "Multiple Choices")
           (301 . "Moved Permanently") (302 . "Found") (303 . "See Other") (305 . "Use Proxy")
           (307 . "Temporary Redirect") (308 . "Permanent Redirect") (400 . "Bad Request")
           (401 . "Unauthorized") (402 . "Payment Required") (403 . "Forbidden")
           (404 . "Not Found") (405 . "Method Not Allowed") (406 . "Not Acceptable")
           (407 . "Proxy Authentication Required") (408 . "Request Timeout") (409 . "Conflict")
           (410 . "Gone") (411 . "Length Required") (413 . "Payload Too Large")
           (414 . "URI Too Long") (415 . "Unsupported Media Type") (417 . "Expectation Failed")
           (426 . "Upgrade Required") (500 . "Internal Server Error") (501 . "Not Implemented")
           (502 . "Bad Gateway") (503 . "Service Unavailable") (504 . "Gateway Timeout")
           (505 . "HTTP Version Not Supported")))

;; cgi-head : (or/c natural #f) bytes [(listof (cons bytes bytes))] #:length (or/c natural #f)
;;            -> bytes
;; Status line (none when code is #f: CGI's 200), Content-Type, the extra header lines in
;; order, Content-Length when given, the empty line. The values are the server's own:
;; none holds a CR or LF.
(define (cgi-head code type [extra '()] #:length [len #f])
  (apply bytes-append
         (if code (string->bytes/latin-1 (format "Status: ~a ~a\r\n" code (status-reason code))) #"")
         #"Content-Type: " type #"\r\n"
         (append (for/list ([h (in-list extra)]) (bytes-append (car h) #": " (cdr h) #"\r\n"))
                 (list (if len (string->bytes/latin-1 (format "Content-Length: ~a\r\n" len)) #"")
                       #"\r\n"))))

;; status-page : natural [bytes] -> bytes
;; A whole plain-text answer: the status head with its Content-Length, then body, by
;; default the code and its phrase on a line ("503 Service Unavailable\n"). The default
;; pages are made once per code: a shed request under overload costs a table look-up.
(define (status-page code [body #f])
  (if body
      (bytes-append (cgi-head code plain-text '() #:length (bytes-length body)) body)
      (hash-ref! pages code
                 (λ () (bytes->immutable-bytes
                        (status-page code (string->bytes/latin-1
                                           (format "~a ~a\n" code (status-reason code)))))))))

(define plain-text #"text/plain; charset=utf-8")
(define pages (make-hasheqv))

;; Why the server answers a request itself, and with what status:
;;   params-over-bytes         its params total more than max-params-bytes
;;   params-over-pairs         more params than max-params-pairs
;;   params-malformed          params that do not parse as name-value pairs
;;   content-length-malformed  CONTENT_LENGTH is not a number
;;   content-length-over       CONTENT_LENGTH is over max-body
;;   stopping                  the server is stopping
;;   shed                      over max-concurrent handlers, or max-queue-delay
;;   connections-over          a connection past max-connections
;;   handler-timeout           the handler ran past request-timeout
;;   body-over                 the body went over max-body (or its CONTENT_LENGTH)
;;   handler-raised            the handler raised (or ran out of request-memory)
(define refusals
  (hasheq 'params-over-bytes 431 'params-over-pairs 431 'params-malformed 400
          'content-length-malformed 400 'content-length-over 413 'stopping 503 'shed 503
          'connections-over 503 'handler-timeout 503 'body-over 413 'handler-raised 500))

;; refusal-reason? : any -> boolean
(define (refusal-reason? v) (and (symbol? v) (hash-ref refusals v #f) #t))

;; refusal-status : symbol -> natural
(define (refusal-status reason) (hash-ref refusals reason))

;; refusal-page : symbol -> bytes ; the status page of the reason's status
(define (refusal-page reason) (status-page (refusal-status reason)))

;; parse-content-length : (or/c bytes #f) -> (or/c natural #f 'bad)
;; #f when absent or empty (no body declared); 'bad unless 1 to 18 decimal digits (more
;; would be over any max-body; a bound keeps string->number off a hostile length).
(define (parse-content-length v)
  (cond
    [(or (not v) (zero? (bytes-length v))) #f]
    [(regexp-match? #px#"^[0-9]{1,18}$" v) (string->number (bytes->string/latin-1 v))]
    [else 'bad]))

;; head-status : bytes natural natural -> (or/c natural #f)
;; The status of the CGI head in bs[start, end): that of the first line that begins
;; "Status:" (any case), then spaces or tabs, then three digits 100-599; 200 when the head
;; has none; #f when the head does not end (an empty line) before end. A scan of the lines,
;; not regexps: it runs for every answer the access log records.
(define (head-status bs start end)
  (define (at i) (if (< i end) (bytes-ref bs i) -1))
  (define (lower b) (if (<= 65 b 90) (+ b 32) b))
  (define (digit i) (let ([b (at i)]) (and (<= 48 b 57) (- b 48))))
  ;; status-at : natural -> (or/c natural #f) ; the status on the line at i, if it has one
  (define (status-at i)
    (and (for/and ([c (in-bytes #"status:")] [k (in-naturals)]) (eqv? (lower (at (+ i k))) c))
         (let skip ([j (+ i 7)])
           (define b (at j))
           (if (or (eqv? b 32) (eqv? b 9))
               (skip (add1 j))
               (let ([d0 (digit j)] [d1 (digit (+ j 1))] [d2 (digit (+ j 2))])
                 (and d0 d1 d2 (<= 1 d0 5) (+ (* 100 d0) (* 10 d1) d2)))))))
  ;; the head ends at a line that is empty (LF or CR LF) after a line
  (let line ([i start] [found #f] [first? #t])
    (cond
      [(and (not first?) (or (eqv? (at i) 10) (and (eqv? (at i) 13) (eqv? (at (+ i 1)) 10))))
       (or found 200)]
      [else
       (define found* (or found (status-at i)))
       (let next ([j i])
         (cond
           [(>= j end) #f]
           [(eqv? (bytes-ref bs j) 10) (line (add1 j) found* #f)]
           [else (next (add1 j))]))])))
