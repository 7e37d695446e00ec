#lang racket/base
;; The published deploy/cluster/haproxy.cfg across three machines, made as network
;; namespaces: hosts h1, h2, h3 (10.231.87.11-13) each run deploy-app.rkt with `raco
;; fastcgi serve`, and a fourth namespace holds a bridge (10.231.87.1), HAProxy and the load
;; client. The /24 exists only inside these namespaces: the root namespace gets no address
;; or route in it, and nothing here connects outside loopback and the namespaces.
;; HAProxy starts once the three apps answer, and the load once HAProxy routes to all
;; three (HAProxy started first takes every host out on its first checks, and answers
;; 503 itself for about a second: the 503s this test used to tolerate).
;; Under a bounded load (4 clients, each pausing 20 ms between requests; at most 30000
;; requests or 300 s), h2's app is stopped
;; (SIGTERM) and its link taken down: no request may fail. Then its link comes back and its
;; app restarts: it must receive requests again. Needs root (CI runs as root).
;;
;; The load client is this module's main submodule, run inside the LB namespace:
;;   racket cluster-test.rkt wait ADDRESS ...     until each app answers GET_VALUES
;;   racket cluster-test.rkt load PORT            one line per answer: "STATUS HOST"
;; `load` stops when its stdin closes or says "stop", then prints "done".
(require racket/list
         racket/string
         "../../fastcgi/client.rkt"
         "lib.rkt")

;; wait-for-apps : (listof string) -> void
(define (wait-for-apps addresses)
  (for ([a (in-list addresses)])
    (wait-until
     120 (format "the app on ~a" a)
     (λ ()
       (with-handlers ([exn:fail? (λ (e) (sleep 0.2) #f)])
         (define c (fastcgi-connect a #:timeout 2))
         (dynamic-wind void
                       (λ () (pair? (fastcgi-get-values c '("FCGI_MPXS_CONNS") #:timeout 5)))
                       (λ () (fcgi-client-close c)))))))
  (printf "ready\n"))

;; wait-for-balancer : port-number (listof string) -> void
;; Until GETs through HAProxy have been answered by every one of the hosts: then its
;; health checks have every server UP, and load may start. (HAProxy's own 503s in earlier
;; runs were its answer while every server was still DOWN: they had failed the first
;; checks, made before the apps listened.)
(define (wait-for-balancer port hosts)
  (define seen (make-hash))
  (wait-until
   60 (format "HAProxy to route to ~a" hosts)
   (λ ()
     (with-handlers ([exn:fail? (λ (e) (sleep 0.1) #f)])
       (define r (http-request port "/info" #:timeout 5))
       (define host (http-response-header r "X-App-Host"))
       (when (and host (= 200 (http-response-status r))) (hash-set! seen host #t))
       (or (for/and ([h (in-list hosts)]) (hash-ref seen h #f))
           (begin (sleep 0.05) #f)))))
  (printf "ready\n"))

;; run-load : port-number -> void
;; Four clients, each one request at a time on a fresh connection and a 20 ms pause between
;; requests, until told to stop, 30000 requests or 300 s. Every answer (or failure) is one
;; line.
(define (run-load port)
  (define max-requests 30000)
  (define deadline (+ (current-inexact-milliseconds) 300000))
  (define stop? #f)
  (define sent 0)
  (define lock (make-semaphore 1))
  ;; next! : -> boolean ; claims one request, #f once the load is over
  (define (next!)
    (call-with-semaphore
     lock
     (λ ()
       (and (not stop?) (< sent max-requests) (< (current-inexact-milliseconds) deadline)
            (begin (set! sent (add1 sent)) #t)))))
  (define (say line) (call-with-semaphore lock (λ () (write-string line) (newline) (flush-output))))
  (define clients
    (for/list ([_ (in-range 4)])
      (thread
       (λ ()
         (let loop ()
           (when (next!)
             (say (with-handlers ([exn:fail? (λ (e) (format "failed ~a" (string-replace (exn-message e) "\n" " ")))])
                    (define r (http-request port "/info" #:timeout 20))
                    ;; a failure shows who answered: the app's host, or "-" and the start of the body
                    (format "~a ~a" (http-response-status r)
                            (or (http-response-header r "X-App-Host")
                                (string-append "-" (regexp-replace* #rx"[^a-zA-Z0-9]+"
                                                                    (let ([b (http-response-body r)]) (bytes->string/latin-1 (subbytes b 0 (min 40 (bytes-length b)))))
                                                                    "_"))))))
             (sleep 0.02)
             (loop)))))))
  (thread (λ ()
            (let loop ()
              (define l (read-line))
              (if (or (eof-object? l) (equal? l "stop"))
                  (set! stop? #t)
                  (loop)))))
  (for-each thread-wait clients)
  (say "done"))

(module+ main
  (define args (vector->list (current-command-line-arguments)))
  (case (car args)
    [("wait") (wait-for-apps (cdr args))]
    [("wait-lb") (wait-for-balancer (string->number (cadr args)) (cddr args))]
    [("load") (run-load (string->number (cadr args)))]))

(module+ test
  (require racket/os
           rackunit
           "../lib/netns.rkt"
           "deploy-lib.rkt")

  (define ip (require-program! "/usr/sbin/ip" "iproute2"))
  (define haproxy (require-program! "/usr/sbin/haproxy" "haproxy"))
  (define racket-exe (find-system-path 'exec-file))
  (define this-file (variable-reference->module-source (#%variable-reference)))

  (define subnet "10.231.87")
  (define prefix (format "fcgiclu~a-" (getpid)))
  (define (ns name) (string-append prefix name))
  (define hosts '("h1" "h2" "h3"))
  (define (host-address h) (format "~a.1~a" subnet (substring h 1)))
  (define (app-address h) (string-append (host-address h) ":9000"))

  ;; ip! : string ... -> void ; runs ip, failing loudly with its stderr
  (define (ip! . args)
    (define-values (code out err) (run-program ip args))
    (unless (zero? code)
      (error 'cluster-test "ip ~a failed (~a): ~a" (string-join args) code err)))

  ;; delete-namespaces! : -> void ; ours, including what a killed earlier run left
  (define (delete-namespaces!)
    (define-values (code out err) (run-program ip '("netns" "list")))
    (for ([line (in-list (string-split (bytes->string/utf-8 out) "\n"))])
      (define name (car (append (string-split line) '(""))))
      (when (regexp-match? #rx"^fcgiclu[0-9]+-" name)
        (run-program ip (list "netns" "delete" name)))))

  ;; make-network! : -> void ; lb with bridge br0 at .1, a veth to each host (tests/lib/netns.rkt)
  (define (make-network!)
    (make-bridge-network! #:ip! ip! #:ns ns #:subnet subnet #:hosts hosts #:host-address host-address))

  ;; in-ns : string (listof string) -> (listof string) ; ip's arguments to run a program there
  (define (in-ns n program args) (list* "netns" "exec" (ns n) program args))

  ;; start-host-app : path string -> proc
  (define (start-host-app dir h)
    (start-process (string-append "app-" h) ip
                   (in-ns h "/usr/bin/env"
                          (list (string-append "APP_HOST=" h) (path->string raco)
                                "fastcgi" "serve" (path->string deploy-app)
                                "--listen" (app-address h) "--ping-path" "/ping"
                                "--workers" "1" "--allowed-clients" (string-append subnet ".1")))
                   #:dir dir))

  ;; Counts of the load client's lines: status -> count, and the hosts that answered.
  (struct tally ([lines #:mutable] [statuses #:mutable] [hosts #:mutable] [failures #:mutable]))

  ;; reader : proc tally semaphore -> thread ; folds the client's lines into the tally
  (define (start-reader p t lock done)
    (thread
     (λ ()
       (let loop ()
         (define line (read-line (proc-stdout p) 'linefeed))
         (cond
           [(or (eof-object? line) (equal? line "done")) (semaphore-post done)]
           [else
            (call-with-semaphore
             lock
             (λ ()
               (set-tally-lines! t (add1 (tally-lines t)))
               (define parts (string-split line))
               (set-tally-statuses! t (hash-update (tally-statuses t) (car parts) add1 0))
               (unless (equal? (car parts) "200")
                 (set-tally-failures! t (cons line (tally-failures t))))
               (when (equal? (car parts) "200")
                 (set-tally-hosts! t (cons (cadr parts) (tally-hosts t))))))
            (loop)])))))

  (define start-ms (current-inexact-milliseconds))
  ;; phase! : string -> void ; the test's progress, with seconds since the start
  (define (phase! what)
    (printf "cluster-test: ~a s: ~a\n" (round (/ (- (current-inexact-milliseconds) start-ms) 1000.)) what))

  (define (run dir)
    (define port 8080)      ; inside lb's own loopback: no clash with the root namespace
    (define cfg (render-template! (repo-file "deploy" "cluster" "haproxy.cfg") (build-path dir "haproxy.cfg")
                                  `(("LISTEN" . ,(format "127.0.0.1:~a" port))
                                    ("APP1" . ,(app-address "h1")) ("APP2" . ,(app-address "h2"))
                                    ("APP3" . ,(app-address "h3")))))
    (define-values (code out err) (run-program haproxy (list "-c" "-f" (path->string cfg))))
    (unless (zero? code) (error 'cluster-test "haproxy rejects the published file:\n~a~a" out err))
    (delete-namespaces!)
    (define at-exit (plumber-add-flush! (current-plumber) (λ (h) (delete-namespaces!))))
    (define started '())
    (define (started! p) (set! started (cons p started)) p)
    (dynamic-wind
     void
     (λ ()
       (make-network!)
       (test-case "the root namespace has no route into the test's /24"
         (check-root-isolated ip subnet))
       (define apps (make-hash (for/list ([h (in-list hosts)]) (cons h (started! (start-host-app dir h))))))
       (define waiter (started! (start-process "wait" ip
                                               (in-ns "lb" (path->string racket-exe)
                                                      (list* (path->string this-file) "wait"
                                                             (map app-address hosts)))
                                               #:dir dir #:stdout-pipe? #t)))
       (check-equal? (read-line/timeout (proc-stdout waiter) 150 "the three apps") "ready")
       (stop-process! waiter)
       ;; HAProxy starts once the apps listen, and the load once it routes to all three
       (define hp (started! (start-process "haproxy" ip (in-ns "lb" (path->string haproxy)
                                                               (list "-f" (path->string cfg) "-db"))
                                           #:dir dir)))
       (define lb-waiter (started! (start-process "wait-lb" ip
                                                  (in-ns "lb" (path->string racket-exe)
                                                         (list* (path->string this-file) "wait-lb"
                                                                (number->string port) hosts))
                                                  #:dir dir #:stdout-pipe? #t)))
       (check-equal? (read-line/timeout (proc-stdout lb-waiter) 90 "HAProxy routing to the three apps") "ready")
       (stop-process! lb-waiter)
       (phase! "the three apps answer through HAProxy; load starts")
       (define client (started! (start-process "load" ip
                                               (in-ns "lb" (path->string racket-exe)
                                                      (list (path->string this-file) "load" (number->string port)))
                                               #:dir dir #:stdout-pipe? #t)))
       (define t (tally 0 (hash) '() '()))
       (define lock (make-semaphore 1))
       (define done (make-semaphore 0))
       (start-reader client t lock done)
       (define (lines) (call-with-semaphore lock (λ () (tally-lines t))))
       (define (hosts-since n)
         (call-with-semaphore lock (λ () (remove-duplicates (take (tally-hosts t) (min n (length (tally-hosts t))))))))
       (define (wait-lines what n secs) (wait-until secs what (λ () (>= (lines) n))))

       ;; all three answer
       (wait-until 60 "answers from h1, h2 and h3"
                   (λ () (= 3 (length (hosts-since (length (tally-hosts t)))))))
       (wait-lines "300 answers" 300 60)
       ;; h2 goes away: its app stops, then its link goes down
       (phase! "stopping h2")
       (stop-process! (hash-ref apps "h2") #:timeout 35)
       (ip! "-n" (ns "lb") "link" "set" "bh2" "down")
       (define at-stop (lines))
       (wait-lines "1000 answers after h2 stopped" (+ at-stop 1000) 120)
       (define without-h2 (hosts-since 500))
       ;; h2 comes back
       (phase! "h2 link up, app restarting")
       (ip! "-n" (ns "lb") "link" "set" "bh2" "up")
       (hash-set! apps "h2" (started! (start-host-app dir "h2")))
       (wait-until 150 "h2 to answer again" (λ () (member "h2" (hosts-since 50))))
       (phase! "h2 answers again")
       (wait-lines "300 more answers" (+ (lines) 300) 60)
       (write-string "stop\n" (proc-stdin client))
       (flush-output (proc-stdin client))
       (unless (sync/timeout 30 done) (error 'cluster-test "the load client did not stop"))
       (define statuses (call-with-semaphore lock (λ () (tally-statuses t))))
       (printf "cluster-test: ~a answers ~a; h2 stopped after ~a; hosts in the last 500 before it came back: ~a\n"
               (lines) statuses at-stop without-h2)

              ;; Every answer must be the app's 200: any other, the app's own 503 (plain text,
       ;; naming its host), HAProxy's (an HTML page) or a failed connection, fails.
       (define failures (call-with-semaphore lock (λ () (tally-failures t))))
       (test-case "no request failed while h2 stopped and came back"
         (check-equal? failures '() (format "failures: ~a" (take failures (min 10 (length failures)))))
         (check-true (> (lines) 1500)))
       (test-case "h2 was out, then in again"
         (check-false (member "h2" without-h2) (format "h2 still answered: ~a" without-h2))
         (check-not-false (member "h2" (hosts-since 300))))
       (test-case "HAProxy logged h2 down and up again"
         (define log (file-text (proc-stderr-file hp)))
         (check-regexp-match #rx"racket/app2 is DOWN" log)
         (check-regexp-match #rx"racket/app2 is UP" log)))
     (λ ()
       (for-each stop-process! started)
       (delete-namespaces!)
       (plumber-flush-handle-remove! at-exit))))

  (call-with-temp-dir "fcgi-cluster" run))
