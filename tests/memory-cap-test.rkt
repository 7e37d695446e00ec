#lang racket/base
;; Memory caps that hold under a fast allocator. With only --max-memory 300m, a handler
;; that allocates and holds 400 MiB a second is ended alone (its request gets 500: by
;; default one request may hold --max-memory), promptly (memory-guard.rkt starts a major
;; collection as the heap grows, where Racket would wait for it to double): a sampler at
;; 50 ms never sees the worker's private memory (resident less shared, from
;; /proc/PID/smaps_rollup) at the hard ceiling (2 x --max-memory), and the requests sent
;; beside it meanwhile are answered. Real `raco fastcgi serve`, one worker, a unix socket;
;; every loop bounded.
(require racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (define out (fastcgi-request-stdout r))\n"
   "  (when (equal? (fastcgi-param r \"REQUEST_URI\" #\"/\") #\"/grow\")\n"
   "    ;; 40 MiB every 0.1 s, held: 400 MiB a second, for 10 s at most\n"
   "    (let loop ([held '()] [i 0])\n"
   "      (when (< i 100)\n"
   "        (sleep 0.1)\n"
   "        (loop (cons (make-bytes (* 40 1024 1024) 1) held) (add1 i)))))\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" out))\n"))

(define MiB (* 1024 1024))

;; the status of /grow's answer, once it came
(define grow-status #f)

;; private-memory : natural -> (or/c natural #f) ; resident less shared, in bytes
(define (private-memory pid)
  (with-handlers ([exn:fail? (λ (e) #f)])
    (define t (file->string (format "/proc/~a/smaps_rollup" pid)))
    (define (kb name) (string->number (cadr (regexp-match (pregexp (string-append "(?m:^" name ":\\s+([0-9]+) kB)")) t))))
    (* 1024 (- (kb "Rss") (kb "Shared_Clean") (kb "Shared_Dirty")))))

(test-case "--max-memory 300m alone: a handler allocating 400 MiB/s is ended alone, the worker never at the hard ceiling, the requests beside it answered"
  (call-with-served-app
   app-source '("--workers" "1" "--max-memory" "300m") #:name "fcgi-memcap"
   (λ (s)
     (define pid (car (board-pids (read-status-file (served-status-file s)) '("idle" "busy"))))
     (define peak 0)
     (define sampling? #t)
     (define sampler
       (thread (λ ()
                 (let loop ([n 0])
                   (when (and sampling? (< n 400))
                     (define m (private-memory pid))
                     (when m (set! peak (max peak m)))
                     (sleep 0.05)
                     (loop (add1 n)))))))
     (define grow (thread (λ () (with-handlers ([exn:fail? exn-message])
                                  (define-values (st hd body) (fastcgi-request (served-address s) #:uri "/grow" #:timeout 30))
                                  (set! grow-status st)))))
     (define beside
       (for/list ([_ (in-range 25)])
         (sleep 0.2)
         (with-handlers ([exn:fail? exn-message])
           (define-values (st hd body) (fastcgi-request (served-address s) #:uri "/" #:timeout 10))
           st)))
     (sync/timeout 30 grow)
     (set! sampling? #f)
     (sync/timeout 5 sampler)
     (define log (file->string (proc-stderr-file (served-proc s))))
     (check-equal? grow-status 500 log)
     (check-regexp-match #rx"GET /grow: over --request-memory 300 MiB: ended" log)
     (check-equal? beside (make-list 25 200) "the requests beside it")
     (check-true (< peak (* 600 MiB)) (format "the worker's private memory peaked at ~a MiB" (quotient peak MiB)))
     (printf "memory-cap: private memory peaked at ~a MiB\n" (quotient peak MiB)))))

