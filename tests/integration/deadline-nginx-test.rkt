#lang racket/base
;; Deadlines that hold from outside: a worker that stops answering while it runs a request
;; past --request-timeout (its whole VM held by a foreign call, or SIGSTOPped) is killed by
;; the manager so that its requests, and those on its other kept connections, are settled
;; within the request timeout plus 5 s: nginx (upstream keepalive + fastcgi_keep_conn)
;; answers them, and the replacement serves the next request. One worker, --request-timeout
;; 1; every wait is bounded.
(module+ test
  (require racket/file
           racket/string
           rackunit
           "lib.rkt"
           (only-in "../lib/serve.rkt" board-pids)
           "servlet-pool.rkt")

  ;; /block: libc's sleep through the FFI without #:blocking?: no Racket thread of the
  ;; worker runs until it returns; /slow: a Racket sleep (the worker goes on); else the pid
  (define app-source
    (string-append
     "#lang racket/base\n"
     "(require ffi/unsafe racket/os fastcgi)\n"
     "(provide fastcgi-handler)\n"
     "(define c-sleep (get-ffi-obj \"sleep\" #f (_fun _uint -> _uint)))\n"
     "(define (fastcgi-handler r)\n"
     "  (define uri (fastcgi-param r \"REQUEST_URI\" #\"/\"))\n"
     "  (cond [(equal? uri #\"/block\") (c-sleep 60)]\n"
     "        [(equal? uri #\"/slow\") (sleep 30)])\n"
     "  (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n~a\\n\" (getpid))\n"
     "                (fastcgi-request-stdout r)))\n"))

  (define bound 6.0)                    ; --request-timeout 1, plus 5 s

  ;; timed-request : port-number string -> channel
  ;; The request in a thread of its own; the channel gives (list status seconds), the
  ;; seconds from now to its answer (or to its failure, with status #f).
  (define (timed-request port uri)
    (define ch (make-channel))
    (define t0 (current-inexact-milliseconds))
    (thread (λ ()
              (define st (with-handlers ([exn:fail? (λ (e) #f)])
                           (http-response-status (http-request port uri #:timeout 40))))
              (channel-put ch (list st (/ (- (current-inexact-milliseconds) t0) 1000.)))))
    ch)

  ;; the-worker : server -> natural ; the pid of the one ready worker
  (define (the-worker s)
    (wait-until 20 "one ready worker" (λ () (let ([ps (board-pids (read-board s) '("idle" "busy"))])
                                             (and (= 1 (length ps)) (car ps))))))

  ;; check-settled : channel string -> void
  (define (check-settled ch what)
    (define r (sync/timeout 40 ch))
    (check-true (pair? r) (format "~a: no answer" what))
    (when (pair? r)
      (check-true (<= (cadr r) bound) (format "~a: settled after ~a s (status ~a)" what (cadr r) (car r)))))

  ;; check-replaced : server fronts natural -> void ; a new worker answers through nginx
  (define (check-replaced s f old)
    (define new (wait-until 20 "a new worker" (λ () (let ([p (the-worker s)]) (and (not (= p old)) p)))))
    (define r (http-request (fronts-keep f) "/"))
    (check-equal? (http-response-status r) 200)
    (check-equal? (string-trim (bytes->string/utf-8 (http-response-body r))) (number->string new)))

  (call-with-temp-dir
   "fcgi-deadline"
   (λ (dir)
     (define app (build-path dir "app.rkt"))
     (display-to-file app-source app)
     (call-with-server
      dir "dl" app '("--request-timeout" "1") 1
      (λ (s)
        (call-with-nginx
         dir "dl" s
         (λ (f)
           (test-case "a worker blocked in a foreign call: its request and the one on its other kept connection are settled within the request timeout + 5 s"
             (define old (the-worker s))
             (define beside (timed-request (fronts-keep f) "/slow"))
             (sleep 0.3)
             (define blocked (timed-request (fronts-keep f) "/block"))
             (check-settled blocked "the blocked request")
             (check-settled beside "the request beside it")
             (check-replaced s f old))

           (test-case "a SIGSTOPped worker: killed within the request timeout + 5 s of its request's start"
             ;; its connection closes then: nginx retries the request on the replacement,
             ;; where /slow runs into the request timeout again (a 503 one second later)
             (define old (the-worker s))
             (define t0 (current-inexact-milliseconds))
             (define running (timed-request (fronts-keep f) "/slow"))
             (sleep 0.3)
             (check-equal? (c-kill old 19) 0)                ; SIGSTOP
             (wait-until 20 "the stopped worker killed" (λ () (not (directory-exists? (format "/proc/~a" old)))))
             (define killed-after (/ (- (current-inexact-milliseconds) t0) 1000.))
             (check-true (<= killed-after bound) (format "killed ~a s after its request began" killed-after))
             (define r (sync/timeout 40 running))
             (check-true (and (pair? r) (<= (cadr r) (+ bound 1.5))) (format "the request, retried by nginx: ~s" r))
             (check-replaced s f old)
             (check-regexp-match #rx"sent nothing for [0-9]+ s \\(frozen, stopped, or blocked in a foreign call\\): killing it \\(its oldest request has run [0-9]+ s; --request-timeout 1\\)"
                                 (file->string (proc-stderr-file (server-proc s))))))))))))
