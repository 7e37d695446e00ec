#lang racket/base
;; racket bench/direct/servlet-calls.rkt : what the calls a servlet hello makes cost in a
;; loop (1,000,000 each, ns and bytes allocated a call): web-server's contracted
;; response/output against its constructor without the contract, the contracted servlet
;; call serve/fastcgi makes, the output procedure response/output hands back (a contract
;; wrapper) against a plain one, and racket/contract alone on procedures shaped like
;; response/output (round 16 of bench/OPTIMISATIONS.md as of c223f0c).
(require racket/contract
         racket/port
         racket/promise
         net/url
         web-server/http
         (prefix-in raw: (submod web-server/http/response-structs private))
         (prefix-in raw: (submod web-server/http/request-structs private)))

(define n 1000000)

;; bench : string (-> any) -> void
(define (bench name thunk)
  (collect-garbage)
  (define m0 (current-memory-use 'cumulative))
  (define t0 (current-inexact-milliseconds))
  (for ([i (in-range n)]) (thunk))
  (define t1 (current-inexact-milliseconds))
  (define m1 (current-memory-use 'cumulative))
  (printf "~a: ~a ns, ~a bytes\n" name (round (/ (* 1e6 (- t1 t0)) n)) (quotient (- m1 m0) n)))

(define body (λ (out) (write-bytes #"Hello, World!\n" out)))
(define answer (response/output body #:mime-type #"text/plain"))
;; taken with the struct's own accessor, as the adapter takes it (web.rkt): the contracted
;; accessor would wrap it once more
(define wrapped-body (raw:response-output answer))
(define req (raw:make-request #"GET" (string->url "/") '() (delay '()) #f "127.0.0.1" 80 "127.0.0.1"))
(define/contract (servlet r) (-> request? response?) answer)
(define nowhere (open-output-nowhere))
(define sink #f)

;; procedures shaped like response/output, under racket/contract alone
(define/contract (kw+ho o #:mime-type [m #f] #:code [c 200])
  (->* ((-> output-port? any)) (#:mime-type (or/c bytes? #f) #:code (integer-in 100 999)) any/c)
  (vector o m c))
(define/contract (kw+flat o #:mime-type [m #f] #:code [c 200])
  (->* (procedure?) (#:mime-type (or/c bytes? #f) #:code (integer-in 100 999)) any/c)
  (vector o m c))
(define/contract (ho o) (-> (-> output-port? any) any/c) (vector o))

(for ([round (in-range 2)])
  (printf "round ~a\n" (add1 round))
  (bench "response/output (contracted)"
         (λ () (set! sink (response/output body #:mime-type #"text/plain"))))
  (bench "response, no contract"
         (λ () (set! sink (raw:response 200 #"OK" (current-seconds) #"text/plain" '() body))))
  (bench "servlet call, (-> request? response?)" (λ () (set! sink (servlet req))))
  (bench "response/output's output procedure" (λ () (wrapped-body nowhere)))
  (bench "a plain output procedure" (λ () (body nowhere)))
  (bench "->*, keywords, (-> output-port? any) argument"
         (λ () (set! sink (kw+ho body #:mime-type #"text/plain"))))
  (bench "->*, keywords, procedure? argument"
         (λ () (set! sink (kw+flat body #:mime-type #"text/plain"))))
  (bench "->, (-> output-port? any) argument" (λ () (set! sink (ho body)))))
