#lang racket/base
;; The connections a front keeps are spread over the pool's workers, so that the pool uses
;; every core: nginx (upstream keepalive 16, fastcgi_keep_conn on) opens its connections in
;; a burst when wrk's 16 clients start at once, and each of the 2 workers must take a fair
;; share of them (at least a quarter), with shedding on (--max-queue-delay: a thread
;; accepts) and off (the event loop accepts). Before the accepting thread took one
;; connection a turn, it accepted the whole burst before its sibling woke: with shedding
;; on, 15 of the 17 connections went to one worker in each of the 3 rounds, and the pool
;; served on one core (the reliability run's overload then offered 6 x what it served).
(module+ test
  (require racket/file
           racket/list
           racket/string
           rackunit
           "lib.rkt"
           "servlet-pool.rkt")

  (define wrk (find-executable-path "wrk"))
  (unless wrk (error 'accept-balance "wrk is not installed (make test-deps installs it)"))

  ;; /cpu: 5 ms of this thread's CPU; anything else: a few bytes
  (define app-source
    (string-append
     "#lang racket/base\n"
     "(require fastcgi)\n"
     "(provide fastcgi-handler)\n"
     "(define (spin! ms)\n"
     "  (define end (+ (current-process-milliseconds (current-thread)) ms))\n"
     "  (let loop ([x 0]) (when (< (current-process-milliseconds (current-thread)) end) (loop (add1 x)))))\n"
     "(define (fastcgi-handler r)\n"
     "  (when (equal? (fastcgi-param r \"REQUEST_URI\" #\"/\") #\"/cpu\") (spin! 5))\n"
     "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

  (define rounds 3)
  (define conns 16)                     ; wrk's, and nginx's upstream keepalive

  ;; worker-connections : server -> (listof natural) ; each ready worker's connections
  (define (worker-connections s)
    (for/list ([w (in-list (hash-ref (or (read-board s) (hasheq)) 'workers '()))]
               #:when (member (hash-ref w 'state #f) '("idle" "busy")))
      (hash-ref w 'connections 0)))

  (call-with-temp-dir
   "fcgi-balance"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (display-to-file app-source app)
     (for* ([mode (in-list '(("--max-queue-delay" "1") ()))]
            [round (in-range rounds)])
       (define name (format "b~a~a" (if (null? mode) "loop" "shed") round))
       (call-with-server
        dir name app mode 2
        (λ (s)
          (call-with-nginx
           dir name s
           (λ (f)
             (define-values (code out err)
               (run-program wrk (list "-t1" (format "-c~a" conns) "-d2s"
                                      (format "http://127.0.0.1:~a/cpu" (fronts-keep f)))
                            #:timeout 30))
             (check-equal? code 0 (format "wrk: ~a" err))
             ;; the status is written every second or so: wait until it counts them all
             (define counts
               (with-handlers ([exn:fail? (λ (e) (worker-connections s))])
                 (wait-until 10 "the status to count the kept connections"
                             (λ () (let ([cs (worker-connections s)])
                                     (and (= 2 (length cs)) (positive? (apply + cs)) cs))))))
             (define what (format "~a, round ~a: connections per worker ~a"
                                  (if (null? mode) "the loop accepts" "shedding on") (add1 round) counts))
             (printf "accept-balance: ~a\n" what)
             (check-equal? (length counts) 2 what)
             (check-true (for/and ([c (in-list counts)]) (>= (* 4 c) (apply + counts))) what)))))))))
