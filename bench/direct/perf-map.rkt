#lang racket/base
;; (write-perf-map! roots) : names Racket CS machine code for Linux `perf`.
;; perf samples code that Chez Scheme generated as "[JIT] 0x...", with no name. perf reads
;; names for such addresses from /tmp/perf-PID.map ("START SIZE NAME" per line, hex). This
;; writes that file for the calling process: every code object reachable from roots
;; (procedures; also through closures' free variables, code relocations, pairs, vectors,
;; boxes and structs), then every code object that follows one of those in memory (which
;; finds Racket's own core, the code of the io and thread layers, that nothing exported
;; reaches). Names are Chez's: a procedure's name, or "[...path.rkt:LINE:COL" for a
;; lambda. Code that nothing led to is named after the code before it: read small
;; percentages of an unexpected name with doubt.
;; A profiling aid for bench/direct/cost.rkt (PERF=FILE), not part of the server. It reads
;; code object headers through the FFI, as laid out by Racket 8.7 CS on x86_64 (a header
;; word whose low byte is #xbe, the code's length after it, the code at 64 bytes): on
;; another version or machine it may name nothing, or name wrongly.
(require ffi/unsafe
         ffi/unsafe/vm
         racket/list
         (only-in racket/os getpid)
         (only-in racket/unsafe/ops unsafe-struct*-ref))
(provide write-perf-map!)

;; reachable-code : (listof any) (struct natural -> any) -> (listof (cons address string))
(define reachable-code
  (vm-eval
   '(lambda (roots struct-ref)
      (let ([seen (make-eq-hashtable)] [out '()] [count 0])
        (define (visit v)
          (cond
            [(($primitive $code?) v) (visit-code v)]
            [(procedure? v) (visit-procedure v)]
            [(> count 3000000) (void)]            ; enough of the heap
            [(or (pair? v) (vector? v) (box? v) (record? v))
             (unless (hashtable-contains? seen v)
               (hashtable-set! seen v #t)
               (set! count (+ count 1))
               (cond
                 [(pair? v) (visit (car v)) (visit (cdr v))]
                 [(vector? v) (vector-for-each visit v)]
                 [(box? v) (visit (unbox v))]
                 [else
                  (let ([n (let loop ([rtd (record-rtd v)])
                             (if rtd
                                 (+ (vector-length (record-type-field-names rtd))
                                    (loop (record-type-parent rtd)))
                                 0))])
                    (do ([k 0 (+ k 1)]) ((= k n))
                      (guard (e [#t (void)]) (visit (struct-ref v k)))))]))]
            [else (void)]))
        (define (visit-procedure p)
          (unless (hashtable-contains? seen p)
            (hashtable-set! seen p #t)
            (guard (e [#t (void)])                ; not a closure (a primitive, say)
              (visit-code (($primitive $closure-code) p))
              (let* ([i (inspect/object p)] [n (i 'length)])
                (do ([k 0 (+ k 1)]) ((= k n))
                  (guard (e [#t (void)]) (visit (((i 'ref k) 'ref) 'value))))))))
        (define (visit-code c)
          (unless (hashtable-contains? seen c)
            (hashtable-set! seen c #t)
            (set! out (cons (cons (($primitive $object-address) c 0) (code-name c)) out))
            (guard (e [#t (void)])
              (for-each visit (((inspect/object c) 'reloc) 'value)))))
        (define (code-name c)
          (let ([n (($primitive $code-name) c)]) (if (string? n) n "?")))
        (for-each visit roots)
        out))))

(define address->object (vm-eval '($primitive $address->object)))
(define code? (vm-eval '($primitive $code?)))
(define code-name (vm-eval '(lambda (c) (let ([n (($primitive $code-name) c)]) (if (string? n) n "?")))))

;; word : address -> integer ; the 8 bytes at address
(define (word at) (ptr-ref (cast at _intptr _pointer) _int64 0))

;; with-neighbours : (listof (cons address string)) -> (listof (cons address string))
;; Adds the code objects that follow each known one in memory, while the next object's
;; header looks like code's and Chez agrees that it is code.
(define (with-neighbours known)
  (define seen (make-hasheqv))
  (for ([k (in-list known)]) (hash-set! seen (car k) (cdr k)))
  (for ([k (in-list known)])
    (let loop ([a (car k)] [n 0])
      (define header (+ a 1))             ; $object-address is one byte before the header
      (define len (word (+ header 8)))
      (when (and (< 0 len 4000000) (< n 100000))
        (define next (+ header (* 16 (quotient (+ 64 len 15) 16))))
        (define next-a (- next 1))
        (when (and (= (bitwise-and (word next) #xff) #xbe)
                   (< 0 (word (+ next 8)) 4000000)
                   (not (hash-ref seen next-a #f)))
          (define o (address->object next-a 0))
          (when (code? o)
            (hash-set! seen next-a (code-name o))
            (loop next-a (add1 n)))))))
  (for/list ([(a name) (in-hash seen)]) (cons a name)))

;; write-perf-map! : (listof any) -> path-string ; the file written
(define (write-perf-map! roots)
  (define codes (sort (with-neighbours (reachable-code roots (λ (r k) (unsafe-struct*-ref r k))))
                      < #:key car))
  (define file (format "/tmp/perf-~a.map" (getpid)))
  (with-output-to-file file #:exists 'truncate
    (λ ()
      (for ([a (in-list codes)]
            [b (in-list (append (cdr codes) (list (cons (+ (car (last codes)) 4096) ""))))])
        (printf "~x ~x ~a\n" (car a) (min 65536 (max 1 (- (car b) (car a)))) (cdr a)))))
  file)
