#lang racket/base
;; The number of requests after which a worker asks to be replaced (--max-requests), drawn
;; by each worker when it starts in [max-requests, max-requests + jitter]
;; (--max-requests-jitter), as gunicorn's max_requests_jitter: workers started together
;; (a pool's start, a reload's generation) then recycle apart instead of all at once.
;; The draw reads the kernel's random source, not Racket's default generator, whose seed
;; comes from the clock: two workers started in the same millisecond would draw alike.
(require (only-in "ffi.rkt" [c-getpid getpid]))
(provide draw-request-limit)

;; draw-request-limit : (or/c exact-positive-integer #f) exact-nonnegative-integer
;;                      [(natural -> bytes)] -> (or/c exact-positive-integer #f)
;; #f without a limit; max-requests itself without jitter. random-bytes gets a count.
(define (draw-request-limit max-requests jitter [random-bytes urandom-bytes])
  (cond
    [(not max-requests) #f]
    [(zero? jitter) max-requests]
    ;; 64 random bits modulo jitter + 1: uniform but for a bias below jitter / 2^64
    [else (+ max-requests (modulo (integer-bytes->integer (random-bytes 8) #f #t) (add1 jitter)))]))

;; urandom-bytes : natural -> bytes ; from /dev/urandom, else from Racket's generator
;; seeded with the pid as well as the clock
(define (urandom-bytes n)
  (with-handlers ([exn:fail:filesystem? (λ (e) (fallback-bytes n))])
    (define bs (call-with-input-file "/dev/urandom" (λ (in) (read-bytes n in))))
    (if (and (bytes? bs) (= (bytes-length bs) n)) bs (fallback-bytes n))))

;; fallback-bytes : natural -> bytes
(define (fallback-bytes n)
  (define g (make-pseudo-random-generator))
  (parameterize ([current-pseudo-random-generator g])
    (random-seed (modulo (+ (* 7919 (getpid)) (current-milliseconds)) 2147483647))
    (apply bytes (for/list ([_ (in-range n)]) (random 256)))))
