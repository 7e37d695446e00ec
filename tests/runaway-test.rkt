#lang racket/base
;; Runaway containment (issue 25), against a real `raco fastcgi serve` pool of one worker,
;; through the FastCGI client:
;; - --request-memory: a handler that allocates without bound (/leak) is ended alone, its
;;   request answered 500, while the requests sent beside it all answer 200 from the same
;;   worker; one log line says so; one ended in the middle of a send (/leak-write) leaves
;;   the worker serving too;
;; - `exit` in a handler ends that request only: 500 when nothing of its answer left, else
;;   the request ends (application status 1); the worker serves on (with a memory limit,
;;   where the handler has a thread of its own, and without, where it may run in the
;;   reader's thread);
;; - past the hard ceiling (2 x --max-memory), a runaway's worker is stopped at once, not
;;   recycled gracefully behind it: a new worker answers, and the old one's resident
;;   memory stayed bounded.
;; Every wait is bounded; the runaway handlers of the app stop by themselves at 1 GiB.
(require racket/file
         racket/list
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

;; The app. /leak: 1 KiB pieces, all kept, up to 1 GiB (a pause each 64 KiB, so that the
;; requests beside it have time to come); /leak-write: the same with 64 KiB pieces, each
;; also written out (most of its time is spent in a send, holding the connection's write
;; lock); /grow: 1 MiB every 20 ms, all kept in a module-level box (the process's memory,
;; which no request's limit counts), up to 1 GiB; /slow: answers after 2 s;
;; /exit: exit before any output; /write-exit: exit after some output left;
;; /thread-exit: a thread the handler starts calls exit, and the handler answers once that
;; thread has ended; /late-exit: a thread the handler starts calls exit 0.3 s after the
;; answer; anything else: the worker's pid.
(define app-source #<<END
#lang racket/base
(require racket/os fastcgi)
(provide fastcgi-handler)
;; what /grow keeps: the process's (a module-level box), not its request's
(define kept (box '()))
(define (fastcgi-handler r)
  (define uri (fastcgi-param r "REQUEST_URI" #"/"))
  (define out (fastcgi-request-stdout r))
  (define (answer s) (write-string (string-append "Content-Type: text/plain\r\n\r\n" s) out))
  (cond
    [(equal? uri #"/leak")
     (let loop ([acc '()] [n 0])
       (when (zero? (remainder n 64)) (sleep 0.001))
       (if (< n (* 1024 1024))
           (loop (cons (make-bytes 1024) acc) (add1 n))
           (answer (format "leaked ~a\n" (length acc)))))]
    [(equal? uri #"/leak-write")
     (write-string "Content-Type: text/plain\r\n\r\n" out)
     (let loop ([acc '()] [n 0])
       (when (< n 16384)
         (define piece (make-bytes 65536 65))
         (write-bytes piece out)
         (loop (cons piece acc) (add1 n))))]
    [(equal? uri #"/grow")
     (let loop ([n 0])
       (cond
         [(< n 1024) (sleep 0.02) (set-box! kept (cons (make-bytes (* 1024 1024) 1) (unbox kept))) (loop (add1 n))]
         [else (answer (format "grown ~a\n" (length (unbox kept))))]))]
    [(equal? uri #"/slow") (sleep 2) (answer (format "~a" (getpid)))]
    [(equal? uri #"/exit") (exit 3)]
    [(equal? uri #"/write-exit") (answer "partial") (flush-output out) (exit 3)]
    [(equal? uri #"/thread-exit") (thread-wait (thread (λ () (exit 4)))) (answer "thread ended")]
    [(equal? uri #"/late-exit") (thread (λ () (sleep 0.3) (exit 5))) (answer "answered")]
    [else (answer (format "~a" (getpid)))]))

END
  )

;; A pool under test: its socket address and the manager's process.
(struct pool (address manager))

;; call-with-pool : (listof string) (pool -> any) -> any
;; One worker serving app-source with the extra options; waits until it answers.
(define (call-with-pool opts body)
  (call-with-temp-dir
   "fcgi-runaway"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define app (path->string (build-path dir "app.rkt")))
     (display-to-file app-source app)
     (define mgr (start-process "manager" raco
                                (append (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                              "--workers" "1")
                                        opts)
                                #:dir dir))
     (define p (pool (string-append "unix:" sock) mgr))
     (dynamic-wind
      void
      (λ ()
        (wait-until 60 "the worker answers"
                    (λ ()
                      (unless (eq? (subprocess-status (proc-subprocess mgr)) 'running)
                        (error 'runaway-test "the manager exited: ~a" (log-text p)))
                      (with-handlers ([exn:fail? (λ (e) #f)]) (get-pid p))))
        (body p))
      (λ () (stop-process! mgr #:timeout 10))))))

;; get : pool string -> (values status bytes)
(define (get p uri #:timeout [timeout 30])
  (define-values (status headers body) (fastcgi-request (pool-address p) #:uri uri #:timeout timeout))
  (values status body))

;; get-pid : pool -> natural ; the pid of the worker that answered /
(define (get-pid p)
  (define-values (status body) (get p "/" #:timeout 10))
  (and (= status 200) (string->number (bytes->string/utf-8 body))))

;; log-text : pool -> string ; the manager's stderr so far (the worker logs there too)
(define (log-text p) (file->string (proc-stderr-file (pool-manager p))))

;; wait-for-log : pool regexp -> void ; until a line of the log matches (the worker's log
;; lines pass through a logging thread, and may come after the answer)
(define (wait-for-log p rx)
  (void (wait-until 10 (format "~a in the log" (object-name rx)) (λ () (regexp-match? rx (log-text p))))))

;; call-raw : pool string -> fcgi-reply ; the whole reply, with its application status
(define (call-raw p uri)
  (define c (fastcgi-connect (pool-address p)))
  (dynamic-wind
   void
   (λ () (fastcgi-call c #:params `(("REQUEST_METHOD" . "GET") ("REQUEST_URI" . ,uri)) #:timeout 30))
   (λ () (fcgi-client-close c))))

;; rss-kb : natural -> (or/c natural #f) ; #f once the process is gone
(define (rss-kb pid)
  (with-handlers ([exn:fail? (λ (e) #f)]) (status-memory-kb pid 'VmRSS)))

;; check-exit : pool natural -> void ; /exit and /write-exit end their requests only
(define (check-exit p pid)
  (define-values (status body) (get p "/exit"))
  (check-equal? status 500 "exit before any output: 500")
  (check-equal? (get-pid p) pid "the same worker serves after exit")
  (define r (call-raw p "/write-exit"))
  (check-equal? (fcgi-reply-app-status r) 1 "exit after output: the request ends with status 1")
  (check-true (regexp-match? #rx#"partial$" (fcgi-reply-stdout r)) "what left before the exit")
  (check-equal? (get-pid p) pid "the same worker serves after exit")
  (wait-for-log p #rx"GET /write-exit: handler called exit: request ended")
  (check-equal? (length (regexp-match* #rx"handler called exit" (log-text p))) 2 "a log line each")
  ;; a thread the handler started: exit ends that thread, never the worker (as under
  ;; web-server's servlet dispatcher, whose exit handler such threads inherit)
  (define-values (t-status t-body) (get p "/thread-exit"))
  (check-equal? (list t-status t-body) '(200 #"thread ended") "the handler went on after its thread's exit")
  (define-values (l-status l-body) (get p "/late-exit"))
  (check-equal? (list l-status l-body) '(200 #"answered"))
  (wait-for-log p #rx"GET /late-exit: a thread its handler started called exit: that thread ended")
  (check-equal? (get-pid p) pid "the same worker serves after its threads' exits")
  (check-equal? (length (regexp-match* #rx"a thread its handler started called exit" (log-text p))) 2))

(test-case "--request-memory: a runaway request alone is ended; its neighbours and the worker go on"
  (call-with-pool
   '("--request-memory" "50m")
   (λ (p)
     (define pid (get-pid p))
     ;; in flight all along
     (define slow-result (box #f))
     (define slow (thread (λ () (set-box! slow-result (call-with-values (λ () (get p "/slow")) list)))))
     (define leak-result (box #f))
     (define leak-start (current-inexact-milliseconds))
     (define leak (thread (λ () (set-box! leak-result
                                              (with-handlers ([exn:fail? (λ (e) (list (exn-message e)))])
                                                (call-with-values (λ () (get p "/leak" #:timeout 60)) list))))))
     ;; requests beside it, from 4 clients, until it is answered (at most 200 each)
     (define results (for/list ([_ (in-range 4)]) (box '())))
     (define clients
       (for/list ([b (in-list results)])
         (thread (λ ()
                   (for ([_ (in-range 200)] #:break (thread-dead? leak))
                     (define answer (with-handlers ([exn:fail? (λ (e) (list (exn-message e)))])
                                      (call-with-values (λ () (get p "/")) list)))
                     (set-box! b (cons answer (unbox b))))))))
     (check-not-false (sync/timeout 60 leak) "/leak answered within 60 s")
     (printf "/leak answered after ~a s\n" (/ (round (/ (- (current-inexact-milliseconds) leak-start) 100)) 10.))
     (for ([t (in-list clients)]) (check-not-false (sync/timeout 60 t) "a client finished"))
     (check-equal? (car (unbox leak-result)) 500 (format "the runaway request: 500, got ~s" (unbox leak-result)))
     (check-not-false (sync/timeout 30 slow) "/slow answered")
     (check-equal? (unbox slow-result) (list 200 (string->bytes/utf-8 (number->string pid))) "/slow, in flight beside it")
     (define answers (append* (map unbox results)))
     (printf "~a requests answered beside the runaway\n" (length answers))
     (check-true (pair? answers) "requests went beside the runaway")
     (check-equal? (remove-duplicates answers) (list (list 200 (string->bytes/utf-8 (number->string pid))))
                   "every request beside it: 200 from the same worker")
     (check-equal? (get-pid p) pid "the worker goes on")
     (wait-for-log p #rx"GET /leak: over --request-memory 50 MiB: ended")
     (check-equal? (length (regexp-match* #rx"over --request-memory" (log-text p))) 1 "one log line")
     ;; ended in the middle of its answer: a truncated one, or a closed connection when
     ;; it was killed in a send
     (for ([_ (in-range 2)])
       (define r (with-handlers ([exn:fail? exn-message]) (call-raw p "/leak-write")))
       (unless (string? r) (check-equal? (fcgi-reply-app-status r) 1 "/leak-write ends with status 1")))
     (wait-for-log p #rx"(?s:GET /leak-write: over --request-memory 50 MiB: ended.*GET /leak-write: over)")
     (check-equal? (get-pid p) pid "the worker goes on")
     (check-exit p pid))))

(test-case "exit without --request-memory: that request only ends"
  (call-with-pool '() (λ (p) (check-exit p (get-pid p)))))

(test-case "past the hard ceiling (2 x --max-memory), the worker is replaced at once"
  (call-with-pool
   '("--max-memory" "150m")
   (λ (p)
     (define pid (get-pid p))
     ;; /grow runs on past 300 MiB at about 50 MiB/s, up to 1 GiB
     (define grow (thread (λ () (with-handlers ([exn:fail? void]) (get p "/grow" #:timeout 60)))))
     (define peak
       (let loop ([peak 0] [n 0])
         (define kb (rss-kb pid))
         (cond
           [(not kb) peak]
           [(> n 1000) (error 'runaway-test "worker ~a still running after 20 s" pid)]
           [else (sleep 0.02) (loop (max peak kb) (add1 n))])))
     (printf "the runaway's worker held at most ~a MiB\n" (quotient peak 1024))
     (check-true (< peak (* 550 1024)) (format "resident memory ~a MiB stayed near the ceiling" (quotient peak 1024)))
     (define new-pid (wait-until 30 "a new worker answers" (λ () (with-handlers ([exn:fail? (λ (e) #f)]) (get-pid p)))))
     (check-not-equal? new-pid pid)
     (wait-for-log p #rx"memory [0-9]+ MiB over the hard ceiling of 300 MiB \\(2 x --max-memory\\)")
     (void (sync/timeout 10 grow)))))
