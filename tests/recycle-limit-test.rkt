#lang racket/base
;; --max-requests-jitter with `raco fastcgi serve` for real: each worker draws its own
;; limit in [max, max + jitter] when it starts (the status shows it per worker); two
;; workers started together, and the two of the next generation after a reload, draw
;; apart; a worker recycles at its drawn limit, not before, and its replacement draws
;; again; bad values are one error line. Every wait is bounded; loads are bounded in count.
(require racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/os/recycle-limit.rkt"
         "../fastcgi/private/os/signals.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

;; call-with-serve : (listof string) (proc string string path -> any) -> any
;; `raco fastcgi serve app` on a unix socket in a fresh folder with the options, not
;; waiting for workers; body gets the process, the socket address, the status file and
;; serve's stderr file.
(define (call-with-serve opts body)
  (call-with-served-app app-source opts #:name "fcgi-jitter" #:ready 0
                        (λ (s) (body (served-proc s) (served-address s) (served-status-file s)
                                     (proc-stderr-file (served-proc s))))))

;; board : string -> hash ; the status the manager publishes (empty while unreadable)
(define (board status-file) (or (read-status-file status-file) (hasheq)))

;; ready-workers : string natural -> (listof hash) ; the ready workers of a generation
(define (ready-workers status-file gen)
  (for/list ([w (in-list (hash-ref (board status-file) 'workers '()))]
             #:when (and (member (hash-ref w 'state #f) '("idle" "busy"))
                         (eqv? (hash-ref w 'generation #f) gen)))
    w))

;; wait-for-ready : string natural natural -> (listof hash) ; n ready workers of gen
(define (wait-for-ready status-file gen n)
  (wait-until 60 (format "~a ready worker(s) of generation ~a" n gen)
              (λ () (let ([ws (ready-workers status-file gen)]) (and (= (length ws) n) ws)))))

;; limits : (listof hash) -> (listof any) ; each worker's drawn limit as the status shows it
(define (limits ws) (map (λ (w) (hash-ref w 'max_requests 'missing)) ws))

(define (in-range? lo hi) (λ (n) (and (exact-integer? n) (<= lo n hi))))

;; get! : string -> natural ; one request, bounded; its status
(define (get! address)
  (define-values (status headers body) (fastcgi-request address #:uri "/" #:timeout 5))
  status)

(test-case "draw-request-limit: none, no jitter, the ends of the range, real draws in range"
  (check-false (draw-request-limit #f 5))
  (check-equal? (draw-request-limit 10 0) 10)
  (check-equal? (draw-request-limit 10 9 (λ (n) (make-bytes n 0))) 10)
  ;; 2^64 - 1 modulo 10
  (check-equal? (draw-request-limit 10 9 (λ (n) (make-bytes n 255))) 15)
  (check-equal? (draw-request-limit 10 9 (λ (n) (bytes 0 0 0 0 0 0 0 19))) 19)
  (define draws (for/list ([_ (in-range 200)]) (draw-request-limit 10 1)))
  (check-equal? (sort (remove-duplicates draws) <) '(10 11))
  (check-true (for/and ([_ (in-range 200)]) (<= 1000 (draw-request-limit 1000 (expt 10 12)) (+ 1000 (expt 10 12))))))

(test-case "two workers started together draw apart, and so does the next generation"
  (call-with-serve
   '("--workers" "2" "--max-requests" "1000" "--max-requests-jitter" "1000000")
   (λ (p address status-file stderr)
     (define gen1 (limits (wait-for-ready status-file 1 2)))
     (check-true (andmap (in-range? 1000 1001000) gen1) (format "generation 1: ~s" gen1))
     ;; a chance of one in a million that two draws are equal
     (check-false (check-duplicates gen1) (format "generation 1: ~s" gen1))
     ;; a reload starts a fresh generation, which draws again
     (check-true (send-signal! (hash-ref (board status-file) 'master_pid) SIGHUP))
     (define gen2 (limits (wait-for-ready status-file 2 2)))
     (check-true (andmap (in-range? 1000 1001000) gen2) (format "generation 2: ~s" gen2))
     (check-false (check-duplicates (append gen1 gen2)) (format "~s then ~s" gen1 gen2)))))

(test-case "a worker recycles at its drawn limit, not before; its replacement draws again"
  (call-with-serve
   '("--workers" "1" "--max-requests" "2" "--max-requests-jitter" "20")
   (λ (p address status-file stderr)
     (define w (car (wait-for-ready status-file 1 1)))
     (define limit (hash-ref w 'max_requests 'missing))
     (check-pred (in-range? 2 22) limit)
     (when (exact-integer? limit)
       (for ([_ (in-range (sub1 limit))]) (check-equal? (get! address) 200))
       ;; the worker reports its count every 0.1 s: a recycle would show well within this
       (sleep 0.5)
       (check-equal? (hash-ref (board status-file) 'recycled #f) 0 "recycled before its limit")
       (check-equal? (get! address) 200)
       (wait-until 20 "the worker recycled" (λ () (eqv? (hash-ref (board status-file) 'recycled #f) 1)))
       (check-regexp-match (regexp (format "recycling worker ~a: after ~a requests "
                                           (hash-ref w 'pid) limit))
                           (file->string stderr))
       ;; its replacement, of the same generation, with a draw of its own
       (define next
         (wait-until 30 "the replacement ready"
                     (λ () (for/first ([x (in-list (ready-workers status-file 1))]
                                       #:unless (eqv? (hash-ref x 'pid) (hash-ref w 'pid)))
                             x))))
       (check-pred (in-range? 2 22) (hash-ref next 'max_requests 'missing))))))

(test-case "no jitter: every worker's limit is --max-requests; without it, none"
  (call-with-serve
   '("--workers" "2" "--max-requests" "7")
   (λ (p address status-file stderr)
     (check-equal? (limits (wait-for-ready status-file 1 2)) '(7 7))))
  (call-with-serve
   '("--workers" "1")
   (λ (p address status-file stderr)
     (check-equal? (limits (wait-for-ready status-file 1 1)) '(null)))))

(define expected-rx #rx"^raco-fastcgi: --max-requests-jitter: expected an integer \\(0 or more\\), got ")

(test-case "bad values: one error line naming the flag"
  (call-with-temp-dir
   "fcgi-jitter"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (display-to-file app-source app)
     (for ([row (in-list `((("--max-requests" "10" "--max-requests-jitter" "-1") ,expected-rx)
                           (("--max-requests" "10" "--max-requests-jitter" "1.5") ,expected-rx)
                           (("--max-requests" "10" "--max-requests-jitter" "x") ,expected-rx)
                           (("--max-requests-jitter" "5")
                            #rx"^raco-fastcgi: --max-requests-jitter \\(5\\) needs --max-requests")))])
       (define args (car row))
       (define-values (code out err)
         (run-program raco (append (list "fastcgi" "serve" app "--check") args)))
       (define text (bytes->string/utf-8 err #\?))
       (check-not-equal? code 0 (format "~s" args))
       (check-regexp-match (cadr row) text (format "~s" args))
       (check-equal? (length (string-split (string-trim text) "\n")) 1 (format "~s: ~a" args text))))))
