#lang racket/base
;; What a canary reload costs in time against a plain one (issue 41): a pool of 4 workers
;; (a hello-world app, preloaded) under a steady load of 8 clients on its unix socket; in
;; turns, `ctl reload` and `ctl reload --canary SECS` (--canary-requests 20), ROUNDS of each;
;; the time from ctl's start to its exit (the new generation serving). Side by side in one
;; run, as BENCH.md asks; the figures and the command go to bench/canary-results.md.
;;
;;   racket bench/canary.rkt [--rounds N] [--canary SECS] [--out FILE]
(require racket/cmdline
         racket/file
         racket/format
         racket/list
         racket/string
         "../fastcgi/client.rkt"
         "../tests/integration/lib.rkt")

(define rounds (box 5))
(define canary-box (box 1))
(define out-box (box (build-path (current-directory) "bench" "canary-results.md")))

(define app-source
  (string-append "#lang racket/base\n(require fastcgi)\n(provide fastcgi-handler)\n"
                 "(define (fastcgi-handler r)\n"
                 "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nhello\\n\" (fastcgi-request-stdout r)))\n"))

(define raco (find-executable-path "raco"))

;; timed-reload : path (listof string) -> (values real natural)
(define (timed-reload pid-file extra)
  (define t0 (current-inexact-monotonic-milliseconds))
  (define-values (code out err)
    (run-program raco (append (list "fastcgi" "ctl" "reload" "--pid-file" (path->string pid-file)) extra)
                 #:timeout 120))
  (values (- (current-inexact-monotonic-milliseconds) t0) code))

(define (median xs)
  (define s (sort xs <))
  (define n (length s))
  (if (odd? n) (list-ref s (quotient n 2)) (/ (+ (list-ref s (sub1 (quotient n 2))) (list-ref s (quotient n 2))) 2)))

(module+ main
  (command-line
   #:once-each
   [("--rounds") n "Reloads of each kind (default 5)" (set-box! rounds (string->number n))]
   [("--canary") s "The canary's trial in seconds (default 1)" (set-box! canary-box (string->number s))]
   [("--out") f "Where the results go (default bench/canary-results.md)" (set-box! out-box f)])
  (run (unbox rounds) (unbox canary-box) (unbox out-box)))

;; run : natural real path-string -> void
(define (run rounds canary-secs out-file)
  (call-with-temp-dir
   "fcgi-bench-canary"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (define sock (build-path dir "app.sock"))
     (define pid-file (build-path dir "pool.pid"))
     (display-to-file app-source app)
     (define addr (string-append "unix:" (path->string sock)))
     (define pool (start-process "pool" raco (list "fastcgi" "serve" (path->string app) "--listen" addr
                                                   "--workers" "4" "--pid-file" (path->string pid-file)
                                                   "--canary-requests" "20")
                                 #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (wait-for-unix-socket (path->string sock) 60)
        (sleep 3)
        ;; the steady load: 8 clients, each one request after another
        (define stop? (box #f))
        (define answered (box 0))
        (define clients
          (for/list ([_ (in-range 8)])
            (thread (λ ()
                      (let loop ()
                        (unless (unbox stop?)
                          (with-handlers ([exn:fail? void])
                            (fastcgi-request addr #:uri "/" #:timeout 10)
                            (set-box! answered (add1 (unbox answered))))
                          (loop)))))))
        (sleep 2)
        (define results
          (for/list ([i (in-range rounds)])
            (define-values (plain pc) (timed-reload pid-file '()))
            (sleep 1)
            (define-values (canary cc) (timed-reload pid-file (list "--canary" (number->string canary-secs))))
            (sleep 1)
            (printf "round ~a: plain ~a ms (exit ~a), canary ~a ms (exit ~a)\n"
                    (add1 i) (round plain) pc (round canary) cc)
            (list plain pc canary cc)))
        (set-box! stop? #t)
        (for-each thread-wait clients)
        (define plain (median (map first results)))
        (define canary (median (map third results)))
        (define text
          (string-append
           "# A canary reload against a plain one\n\n"
           (format "Command: `racket bench/canary.rkt --rounds ~a --canary ~a` (~a, commit ~a, ~a cores, Racket ~a).\n\n"
                   rounds canary-secs (date-string) (commit) (processor-count*) (version))
           "A pool of 4 preloaded workers (hello world) under 8 clients looping on its unix socket; "
           (format "each round a plain `ctl reload`, then `ctl reload --canary ~a` (--canary-requests 20); " canary-secs)
           "the time from ctl's start to its exit, when the new generation serves.\n\n"
           "| round | plain (ms) | canary (ms) |\n| --- | --- | --- |\n"
           (string-append*
            (for/list ([r (in-list results)] [i (in-naturals 1)])
              (format "| ~a | ~a~a | ~a~a |\n" i (round (first r)) (if (zero? (second r)) "" " (failed)")
                      (round (third r)) (if (zero? (fourth r)) "" " (failed)"))))
           (format "| median | ~a | ~a |\n\n" (round plain) (round canary))
           (format "A canary reload took ~a times as long as a plain one (~a ms more: the trial of ~a s, then the other 3 workers start after it).\n"
                   (~r (/ canary plain) #:precision 2) (round (- canary plain)) canary-secs)
           (format "Requests answered meanwhile: ~a.\n" (unbox answered))))
        (display-to-file text out-file #:exists 'truncate)
        (display text))
      (λ () (stop-process! pool #:timeout 30))))))

(define (date-string)
  (define d (seconds->date (current-seconds) #f))
  (format "~a-~a-~a" (date-year d) (~r (date-month d) #:min-width 2 #:pad-string "0")
          (~r (date-day d) #:min-width 2 #:pad-string "0")))
(define (commit)
  (define-values (code out err) (run-program (find-executable-path "git") '("rev-parse" "--short" "HEAD")))
  (string-trim (bytes->string/utf-8 out #\?)))
(define (processor-count*) ((dynamic-require 'racket/future 'processor-count)))
