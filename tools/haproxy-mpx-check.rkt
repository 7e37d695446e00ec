#lang racket/base
;; tools/haproxy-mpx-check.rkt : whether this machine's HAProxy can multiplex requests to
;; the app without answering some itself. The published deploy/haproxy/haproxy.cfg leaves
;; `option mpxs-conns` and `option max-reqs 100` commented out because HAProxy 2.6.12,
;; multiplexing under load, answers a share of requests with its own 500 (termination
;; state IH; haproxy/haproxy#2568): deploy/haproxy/README.md has the figures this printed.
;; Run it after a HAProxy upgrade, before uncommenting the two lines:
;;
;;   racket tools/haproxy-mpx-check.rkt [--seconds S] [--connections N,M,...]
;;
;; For each client connection count, wrk (half GETs, half POSTs of 2000 bytes) runs S
;; seconds through the published file as it is, then with the two lines uncommented, in
;; front of tests/reliability/app.rkt under `raco fastcgi serve --workers 2`, on loopback
;; and a unix socket under a temporary folder. It prints the requests and the answers other
;; than 200 of each run. Needs haproxy and wrk (`make test` installs both), and root or the
;; haproxy user's group for the chroot, as tests/integration/haproxy-test.rkt.
(require racket/cmdline
         racket/file
         racket/list
         racket/string
         "../tests/integration/deploy-lib.rkt"
         "../tests/integration/lib.rkt")

(define seconds 10)
(define connection-counts '(24 64))
(command-line
 #:once-each
 [("--seconds") s "Seconds of load per run (default 10)"
                (set! seconds (or (string->number s) (raise-user-error 'haproxy-mpx-check "--seconds: ~a" s)))]
 [("--connections") ns "Client connection counts, comma-separated (default 24,64)"
                    (set! connection-counts
                          (for/list ([n (in-list (string-split ns ","))])
                            (or (string->number n) (raise-user-error 'haproxy-mpx-check "--connections: ~a" n))))])

(define haproxy (require-program! "/usr/sbin/haproxy" "haproxy"))
(define wrk (require-program! "/usr/bin/wrk" "wrk"))
(define app (repo-file "tests" "reliability" "app.rkt"))

;; The load (lossless-test's): half GET /hello, half POST /upload with 2000 bytes; wrk
;; prints the totals and each status's count.
(define wrk-script (repo-file "tests" "integration" "wrk-mix.lua"))

;; run : boolean natural -> (values natural natural) ; requests, answers other than 200
(define (run mpx? connections)
  (call-with-temp-dir
   "fcgi-mpx-check"
   (λ (dir)
     (define port (car (free-ports 1)))
     (define-values (cfg run-dir) (haproxy-published-conf! dir (format "127.0.0.1:~a" port)))
     (when mpx? (display-to-file (haproxy-multiplexing-on (file->string cfg)) cfg #:exists 'truncate))
     (define address (string-append "unix:" (path->string (build-path run-dir "app.sock"))))
     (define pool (start-app "pool" app address #:dir dir #:args '("--workers" "2" "--socket-group" "haproxy")))
     (define hp (start-process "haproxy" haproxy (list "-f" (path->string cfg) "-db") #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (wait-for-app address pool)
        (wait-for-tcp port 10)
        (define-values (code out err)
          (run-program wrk (list "-t2" (format "-c~a" connections) (format "-d~as" seconds)
                                 "-s" (path->string wrk-script) (format "http://127.0.0.1:~a/" port))
                       #:timeout (+ seconds 30)))
        (define text (if (bytes? out) (bytes->string/utf-8 out #\?) out))
        (define total (regexp-match #rx"RESULT requests=([0-9]+) " text))
        (define codes (regexp-match #rx"CODES([ 0-9=]*)" text))
        (unless (and total codes) (error 'haproxy-mpx-check "wrk printed no result (exit ~a):\n~a~a" code out err))
        ;; socket errors count too: a request with no answer is not the app's 200
        (define requests (string->number (cadr total)))
        (define ok (for/sum ([p (in-list (regexp-match* #rx"([0-9]+)=([0-9]+)" (cadr codes) #:match-select cdr))]
                             #:when (equal? (car p) "200"))
                     (string->number (cadr p))))
        (values requests (- requests ok)))
      (λ ()
        (stop-process! hp)
        (stop-process! pool #:timeout 30))))))

(define-values (_c version _e) (run-program haproxy '("-v")))
(printf "~a" (car (string-split (if (bytes? version) (bytes->string/utf-8 version #\?) version) "\n" #:trim? #f)))
(printf "\n~a s of wrk per run\n\n| HAProxy file | client connections | requests | answers other than 200 |\n|---|---|---|---|\n" seconds)
(for* ([n (in-list connection-counts)] [mpx? (in-list '(#t #f))])
  (define-values (requests other) (run mpx? n))
  (printf "| ~a | ~a | ~a | ~a |\n" (if mpx? "with mpxs-conns" "as published") n requests other)
  (flush-output))
