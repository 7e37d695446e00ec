#lang racket/base
;; Byte-string primitives the codec and the request path use many times a request, done by
;; Chez Scheme directly on Racket CS: a buffer made without zeroing it, and a comparison of
;; two ranges that takes 4 bytes a step. Elsewhere, the plain Racket equivalents. That a
;; Chez bytevector is a Racket byte string is not documented by Racket: each is probed at
;; load against the plain one (probes.rkt), which is used where the probe fails.
(require ffi/unsafe/vm
         (only-in racket/unsafe/ops unsafe-bytes-ref unsafe-fx= unsafe-fx+)
         "probes.rkt")
(provide make-unfilled-bytes
         bytes-range=?
         checked-unfilled
         checked-range=?)

;; checked-unfilled : any -> (natural -> bytes)
;; make (Chez Scheme's make-bytevector) where it makes a mutable byte string of the length
;; asked, whose bytes can be set and read back; else make-bytes, with one line.
(define (checked-unfilled make)
  (if (assumption-holds?
       "Chez Scheme's make-bytevector as a byte string"
       (λ ()
         (cond
           [(not (and (procedure? make) (procedure-arity-includes? make 1)))
            (format "is ~.s, not a procedure of one argument" make)]
           [else
            (define b (make 300))
            (cond
              [(not (and (bytes? b) (not (immutable? b)) (= (bytes-length b) 300)))
               "does not make a mutable byte string of the length asked"]
              [else
               (for ([i (in-range 300)]) (bytes-set! b i (modulo (* 7 i) 256)))
               (or (for/and ([i (in-range 300)]) (= (bytes-ref b i) (modulo (* 7 i) 256)))
                   "its bytes do not read back as set")])]))
       "buffers are zeroed as they are made")
      make
      make-bytes))

;; make-unfilled-bytes : natural -> bytes
;; A new mutable byte string whose content is whatever the memory held: for buffers whose
;; every byte is written before it is read or sent (the decoder's, a request's stdout).
;; On Racket CS it is Chez Scheme's make-bytevector with no fill: make-bytes zeroes, which
;; costs a new connection's decoder buffer far more than the allocation itself.
(define make-unfilled-bytes
  (if (eq? (system-type 'vm) 'chez-scheme)
      (checked-unfilled (vm-primitive 'make-bytevector))
      make-bytes))

;; portable-range=? : bytes natural bytes natural natural -> boolean ; a byte at a time
(define (portable-range=? a i b j n)
  (let same? ([k 0])
    (or (unsafe-fx= k n)
        (and (unsafe-fx= (unsafe-bytes-ref a (unsafe-fx+ i k)) (unsafe-bytes-ref b (unsafe-fx+ j k)))
             (same? (unsafe-fx+ k 1))))))

;; checked-range=? : (-> procedure) -> procedure
;; What make makes where it compiles and agrees with portable-range=? on every range of
;; two strings that differ in one byte (each position, each length up to 12); else the
;; portable one, with one line.
(define (checked-range=? make)
  (define fast (with-handlers ([exn:fail? (λ (e) (format "its Chez Scheme code does not compile: ~a" (exn-message e)))])
                 (make)))
  (if (assumption-holds?
       "the Chez Scheme comparison of byte ranges"
       (λ ()
         (cond
           [(string? fast) fast]
           [else
            (define a (string->bytes/latin-1 "0123456789abcdefghij"))
            (define b (string->bytes/latin-1 "xx0123456789abcdXfghij"))
            (or (for*/or ([i (in-range 0 8)] [n (in-range 0 13)])
                  (define want (portable-range=? a i b (+ i 2) n))
                  (and (not (eq? (fast a i b (+ i 2) n) want))
                       (format "answers ~a for ~a bytes from ~a, expected ~a" (not want) n i want)))
                #t)]))
       "ranges are compared a byte at a time")
      fast
      portable-range=?))

;; bytes-range=? : bytes natural bytes natural natural -> boolean
;; Whether a[i, i+n) and b[j, j+n) hold the same bytes. UNCHECKED: the caller makes sure
;; both ranges lie inside their strings. On Racket CS, a loop compiled by Chez Scheme that
;; compares 4 bytes a step, several times quicker than a byte loop in Racket (the params
;; of each request are compared with the previous request's this way).
(define bytes-range=?
  (if (eq? (system-type 'vm) 'chez-scheme)
      (checked-range=?
       (λ ()
         (vm-eval
          '(lambda (a i b j n)
             (let loop ([k 0])
               (if (($primitive 3 fx<=) (($primitive 3 fx+) k 4) n)
                   (and (($primitive 3 fx=)
                         (($primitive 3 bytevector-s32-ref) a (($primitive 3 fx+) i k) 'little)
                         (($primitive 3 bytevector-s32-ref) b (($primitive 3 fx+) j k) 'little))
                        (loop (($primitive 3 fx+) k 4)))
                   (let tail ([k k])
                     (or (($primitive 3 fx=) k n)
                         (and (($primitive 3 fx=)
                               (($primitive 3 bytevector-u8-ref) a (($primitive 3 fx+) i k))
                               (($primitive 3 bytevector-u8-ref) b (($primitive 3 fx+) j k)))
                              (tail (($primitive 3 fx+) k 1)))))))))))
      portable-range=?))
