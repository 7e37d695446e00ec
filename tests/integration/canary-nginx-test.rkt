#lang racket/base
;; Canary reloads (issue 41), behind a real nginx (the published deploy/nginx/racket-app.conf,
;; kept upstream connections), under a load of GETs and POSTs (wrk, half of them POSTs with
;; a body): `ctl reload --canary 2` to
;;   - code that answers 500 to one GET in three: rolls back by itself, `ctl reload` exits
;;     1 with the figures, and the old code goes on answering;
;;   - good code: rolls forward, and the new code answers;
;;   - code whose process dies at its first request: rolls back.
;; None lost: every request the load sent got an answer of the app's (200, or the bad
;; code's own 500s), no connection error; where the canary died, only what it held when it
;; died (nginx's "upstream prematurely closed" lines), as for any worker that dies.
(module+ test
  (require racket/file
           racket/string
           rackunit
           "deploy-lib.rkt"
           "lib.rkt"
           (only-in "../lib/serve.rkt" pid-file->status-file read-status-file))

  (define nginx (require-program! "/usr/sbin/nginx" "nginx"))

  ;; app-source : string string -> string
  ;; /hello answers VERSION; /upload answers its body's length; kind: "good", "bad" (one
  ;; GET of /hello in three answered 500) or "crash" (the process exits at its first request).
  (define (app-source version kind)
    (string-append
     "#lang racket/base\n(require fastcgi ffi/unsafe)\n(provide fastcgi-handler)\n"
     "(define n 0)\n"
     ;; (exit in a handler is the server's to contain: _exit ends the process for good)
     "(define _exit (get-ffi-obj \"_exit\" #f (_fun _int -> _void)))\n"
     "(define (fastcgi-handler r)\n"
     (if (equal? kind "crash") "  (_exit 1)\n" "")
     "  (define out (fastcgi-request-stdout r))\n"
     "  (define uri (bytes->string/utf-8 (fastcgi-param r \"REQUEST_URI\" #\"/\")))\n"
     "  (cond\n"
     "    [(regexp-match? #rx\"^/upload\" uri)\n"
     "     (define body (let loop ([k 0]) (define b (read-bytes 65536 (fastcgi-request-stdin r))) (if (eof-object? b) k (loop (+ k (bytes-length b))))))\n"
     "     (write-string (format \"Content-Type: text/plain\\r\\n\\r\\n~a\\n\" body) out)]\n"
     (if (equal? kind "bad")
         "    [(begin (set! n (add1 n)) (zero? (modulo n 3))) (write-string \"Status: 500 Broken\\r\\nContent-Type: text/plain\\r\\n\\r\\nbroken\\n\" out)]\n"
         "")
     "    [else (write-string \"Content-Type: text/plain\\r\\n\\r\\n" version "\\n\" out)]))\n"))

  ;; with-pool : path string (natural path proc -> any) -> any
  ;; The app (app.rkt in dir, first from source) in a pool of 2 on a unix socket, behind
  ;; nginx as the published file has it; body gets nginx's port, the pid file and the pool.
  (define (with-pool dir source body)
    (define port (car (free-ports 1)))
    (define sock (build-path dir "app.sock"))
    (define pid-file (build-path dir "pool.pid"))
    (define app (build-path dir "app.rkt"))
    (display-to-file source app #:exists 'truncate)
    (copy-file "/etc/nginx/fastcgi_params" (build-path dir "fastcgi_params") #t)
    (define site (render-template! (repo-file "deploy" "nginx" "racket-app.conf")
                                   (build-path dir "racket-app.conf")
                                   `(("SOCKET" . ,(path->string sock)) ("LISTEN" . ,(format "127.0.0.1:~a" port)))))
    (define conf (build-path dir "nginx.conf"))
    (call-with-output-file conf #:exists 'truncate (λ (out) (write-string (nginx-main-conf dir (list site)) out)))
    (define listen (string-append "unix:" (path->string sock)))
    (define pool (start-app "pool" app listen #:dir dir
                            #:args (list "--workers" "2" "--pid-file" (path->string pid-file))))
    (define fp (start-process "nginx" nginx (list "-c" (path->string conf) "-p" (path->string dir) "-e" "stderr")
                              #:dir dir))
    (dynamic-wind
     void
     (λ ()
       (wait-for-app listen pool)
       (wait-for-tcp port 10)
       (body port pid-file pool))
     (λ ()
       (stop-process! fp)
       (stop-process! pool #:timeout 30))))

  ;; hello : natural -> string ; what /hello answers through nginx
  (define (hello port)
    (string-trim (bytes->string/utf-8 (http-response-body (http-request port "/hello" #:timeout 10)) #\?)))

  ;; reload-under-load : path natural path string -> (values hash natural string)
  ;; wrk for 12 s; 2 s in, app.rkt is replaced by source and `ctl reload --canary 2` runs:
  ;; wrk's result, ctl's exit status and its output.
  (define (reload-under-load dir port pid-file source)
    (define ctl (box #f))
    (define t (thread (λ ()
                        (sleep 2)
                        (display-to-file source (build-path dir "app.rkt") #:exists 'truncate)
                        (define-values (code out err)
                          (run-program (find-executable-path "raco")
                                       (list "fastcgi" "ctl" "reload" "--canary" "2" "--pid-file" (path->string pid-file))
                                       #:timeout 60))
                        (set-box! ctl (list code (string-append (bytes->string/utf-8 out #\?) (bytes->string/utf-8 err #\?)))))))
    ;; (a request slower than 10 s would count as lost: none is that slow here)
    (define r (run-wrk dir port 12 #:timeout 10))
    (thread-wait t)
    (printf "canary-nginx-test: ctl reload --canary 2 exited ~a: ~a; wrk: ~a\n"
            (car (unbox ctl)) (string-trim (cadr (unbox ctl))) r)
    (values r (car (unbox ctl)) (cadr (unbox ctl))))

  ;; answered-by-app : hash (listof natural) -> boolean ; only these statuses, no error
  (define (answered-by-app r statuses)
    (and (> (hash-ref r 'requests) 500)
         (for/and ([k '(connect read write timeout)]) (zero? (hash-ref r k)))
         (for/and ([(code n) (in-hash (hash-ref r 'codes))]) (and (memv code statuses) #t))))

  (define (board pid-file) (or (read-status-file (pid-file->status-file pid-file)) (hasheq)))

  ;; canary-case : string string (hash natural string path path natural -> any) -> void
  ;; A pool serving v1, then a canary reload to v2 of kind under load; check gets wrk's
  ;; result, ctl's exit status and output, the pool's pid file, the folder and nginx's port.
  (define (canary-case title kind check)
    (test-case title
      (call-with-temp-dir "fastcgi-canary"
        (λ (dir)
          (with-pool dir (app-source "v1" "good")
            (λ (port pid-file pool)
              (define-values (r code out) (reload-under-load dir port pid-file (app-source "v2" kind)))
              (check r code out pid-file dir port)))))))

  (canary-case
   "a canary answering 500 to one GET in three: rolled back, ctl reload exits 1, the old code serves"
   "bad"
   (λ (r code out pid-file dir port)
     (check-equal? code 1 out)
     (check-regexp-match #rx"canary rolled back: [0-9]+ of [0-9]+ answers 5xx against 0 of [0-9]+" out)
     (check-true (answered-by-app r '(200 500)) (format "none lost: ~a" r))
     (check-true (positive? (hash-ref (hash-ref r 'codes) 500 0)) "the canary did answer some")
     (check-equal? (hash-ref (board pid-file) 'canary_rollbacks 0) 1)
     (check-equal? (hash-ref (board pid-file) 'generation) 1 "the old generation serves")
     (for ([_ (in-range 10)]) (check-equal? (hello port) "v1"))))

  (canary-case
   "a canary of good code: rolled forward, the new code serves"
   "good"
   (λ (r code out pid-file dir port)
     (check-equal? code 0 out)
     (check-true (answered-by-app r '(200)) (format "none lost: ~a" r))
     (check-equal? (hash-ref (board pid-file) 'canary_forwards 0) 1)
     (wait-until 20 "only v2 answers" (λ () (for/and ([_ (in-range 10)]) (equal? (hello port) "v2"))))
     (void)))

  (canary-case
   "a canary that dies at its first request: rolled back, the old code serves"
   "crash"
   (λ (r code out pid-file dir port)
     (check-equal? code 1 out)
     (check-regexp-match #rx"canary rolled back" out)
     ;; what the canary held when it died is lost as with any worker that dies: nginx
     ;; answers it 502 and logs the cut (closed, or reset under it)
     (define cut (length (regexp-match* #rx"upstream prematurely closed|Connection reset by peer"
                                        (file->string (build-path dir "nginx.stderr")))))
     (check-true (<= (hash-ref (hash-ref r 'codes) 502 0) cut) (format "only what the canary held: ~a, cut ~a" r cut))
     (check-true (answered-by-app r '(200 502)) (format "no connection error: ~a" r))
     (for ([_ (in-range 10)]) (check-equal? (hello port) "v1")))))
