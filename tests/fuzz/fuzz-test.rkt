#lang racket/base
;; The fuzzer in `make test`: every saved input under crashes/, and the hand-made inputs of
;; the known bugs, are replayed (each on its own connection, all at once) against a fresh child server, which must then still answer,
;; stay within its memory bound and log only escaped warnings; then a bounded run of about
;; 60 s (FUZZ_SECONDS) with a new seed each time (FUZZ_SEED to repeat one), whose failing
;; inputs are saved under crashes/ and so become regression inputs.
(require racket/file
         rackunit
         "../integration/lib.rkt"
         "fuzz.rkt")

(define seconds (string->number (or (getenv "FUZZ_SECONDS") "60")))
(define seed (or (string->number (or (getenv "FUZZ_SEED") "")) (current-seconds)))

(test-case "saved inputs (tests/fuzz/crashes) and the known-bug inputs replayed: the server survives"
  (define files (crash-files))
  (call-with-temp-dir
   "fcgi-replay"
   (λ (dir)
     (call-with-fuzz-server
      dir
      (λ (fs)
        (define inputs
          (for/list ([bs (in-list (append (map file->bytes files) (map cdr known-bug-inputs)))]
                     [i (in-naturals)])
            (cons i bs)))
        (check-equal? (append (run-batch fs inputs) (check-server fs)) '()
                      (format "replaying ~a and ~a" (map path->string files)
                              (map car known-bug-inputs))))))))

(test-case (format "fuzzing for ~a s (seed ~a): no problem found" seconds seed)
  (define-values (sent answered problems) (fuzz #:seconds seconds #:seed seed))
  (printf "fuzz: seed ~a, ~a inputs (connections), ~a END_REQUEST records back, ~a problems\n"
          seed sent answered (length problems))
  (check-true (> sent 0))
  (check-true (> answered 0) "some fuzzed requests were answered")
  (check-equal? problems '() (format "seed ~a; repeat with FUZZ_SEED=~a make fuzz" seed seed)))
