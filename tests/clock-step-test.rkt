#lang racket/base
;; The wall clock steps under a running pool (NTP, a resumed virtual machine, `date -s`):
;; `raco fastcgi serve` runs under libfaketime, which moves the wall clock its processes
;; read (and only that: FAKETIME_DONT_FAKE_MONOTONIC) when the test rewrites a file. An hour
;; forward: a slow request still answers 200 rather than the request timeout's 503, and a
;; kept idle connection and a connection that has not sent its first record still serve.
;; Two hours back: a handler that hangs still gets its 503 within the request timeout, and
;; the status page still follows the requests. A route that answers the app's
;; (current-seconds) shows that the processes do see the faked clock.
(require json
         racket/file
         rackunit
         "../fastcgi/client.rkt"
         (only-in (submod "../fastcgi/private/transport/client.rkt" private) cgi-params)
         "integration/lib.rkt"
         "lib/serve.rkt")

(define libfaketime "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
(define request-timeout 5)

(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define (fastcgi-handler r)\n"
   "  (define uri (bytes->string/utf-8 (fastcgi-param r \"REQUEST_URI\" #\"/\") #\\?))\n"
   "  (define out (fastcgi-request-stdout r))\n"
   "  (define (answer body) (write-string (string-append \"Content-Type: text/plain\\r\\n\\r\\n\" body) out))\n"
   "  (cond\n"
   "    [(equal? uri \"/now\") (answer (number->string (current-seconds)))]\n"
   "    [(equal? uri \"/slow\") (sleep 2) (answer \"slow\")]\n"
   "    [(equal? uri \"/hang\") (let loop () (sleep 1) (loop))]\n"
   "    [else (answer \"hello\")]))\n"))

;; set-offset! : path string -> void ; the faked clock's offset, e.g. "+3600", in one rename
(define (set-offset! file offset)
  (define tmp (path-add-extension file #".new"))
  (display-to-file (string-append offset "\n") tmp #:exists 'truncate)
  (rename-file-or-directory tmp file #t))

;; call : fcgi-client string -> (or/c (list status body) string)
;; One request on a connection kept open; a string says why it failed.
(define (call c uri #:timeout [timeout 10])
  (with-handlers ([exn:fail? exn-message])
    (define r (fastcgi-call c #:params (cgi-params "GET" uri '() #f '()) #:keep-conn? #t
                            #:timeout timeout))
    (define-values (status headers body) (parse-cgi-response (fcgi-reply-stdout r)))
    (list status (bytes->string/utf-8 body #\?))))

;; call-new : string string -> (or/c (list status body) string) ; on a connection of its own
(define (call-new address uri #:timeout [timeout 10])
  (define c (fastcgi-connect address))
  (begin0 (call c uri #:timeout timeout) (fcgi-client-close c)))

;; app-seconds : string -> (or/c real #f) ; the app's wall clock, in seconds
(define (app-seconds address)
  (define r (call-new address "/now"))
  (and (pair? r) (= 200 (car r)) (string->number (cadr r))))

;; status : string symbol -> any ; a field of the status page, or #f
(define (status address field)
  (define r (call-new address "/status?json"))
  (and (pair? r) (= 200 (car r))
       (hash-ref (string->jsexpr (cadr r)) field #f)))

;; within? : (or/c real #f) real -> boolean ; t within a minute of expected
(define (within? t expected) (and t (< (abs (- t expected)) 60)))

(define (run-test)
  (call-with-temp-dir
   "fcgi-clock"
   (λ (dir)
     (define sock (path->string (build-path dir "app.sock")))
     (define address (string-append "unix:" sock))
     (define app (path->string (build-path dir "app.rkt")))
     (define offset-file (build-path dir "faketime.rc"))
     (display-to-file app-source app)
     (set-offset! offset-file "+0")
     (define env (environment-variables-copy (current-environment-variables)))
     (for ([kv (in-list `(("LD_PRELOAD" . ,libfaketime)
                          ("FAKETIME_TIMESTAMP_FILE" . ,(path->string offset-file))
                          ("FAKETIME_NO_CACHE" . "1")
                          ("FAKETIME_DONT_FAKE_MONOTONIC" . "1")))])
       (environment-variables-set! env (string->bytes/utf-8 (car kv)) (string->bytes/utf-8 (cdr kv))))
     (define mgr
       (parameterize ([current-environment-variables env])
         (start-process "manager" raco
                        (list "fastcgi" "serve" app "--listen" address "--workers" "1"
                              "--request-timeout" (number->string request-timeout)
                              "--pid-file" (path->string (build-path dir "manager.pid"))
                              "--status-path" "/status")
                        #:dir dir)))
     (dynamic-wind
      void
      (λ ()
        (wait-for-unix-socket sock 30)
        (wait-until 60 "a worker answers" (λ () (app-seconds address)))
        (check-true (within? (app-seconds address) (current-seconds))
                    "before any step the app reads the real wall clock")
        (define kept (fastcgi-connect address))
        (check-equal? (call kept "/") '(200 "hello") "the kept connection serves")
        (define silent (fastcgi-connect address))   ; no record sent yet
        (step-forward address offset-file kept silent)
        (step-back address offset-file kept)
        (fcgi-client-close kept)
        (fcgi-client-close silent))
      (λ () (stop-process! mgr #:timeout 10))))))

;; step-forward : string path fcgi-client fcgi-client -> void
(define (step-forward address offset-file kept silent)
  (define result (box #f))
  (define slow-call (thread (λ () (set-box! result (call-new address "/slow" #:timeout 20)))))
  (sleep 0.5)
  (set-offset! offset-file "+3600")
  (sync/timeout 20 slow-call)
  (check-equal? (unbox result) '(200 "slow")
                "a request in flight when the clock stepped an hour forward still answers")
  (check-true (within? (app-seconds address) (+ (current-seconds) 3600))
              "the app reads the wall clock an hour ahead")
  (check-equal? (call kept "/") '(200 "hello")
                "the kept idle connection still serves after the step forward")
  (check-equal? (call silent "/") '(200 "hello")
                "a connection opened before the step forward still gets its first request"))

;; step-back : string path fcgi-client -> void
(define (step-back address offset-file kept)
  (define result (box #f))
  (define t0 (current-inexact-monotonic-milliseconds))
  (define hang-call (thread (λ () (set-box! result (call-new address "/hang" #:timeout 20)))))
  (sleep 0.5)
  (set-offset! offset-file "-3600")
  (sync/timeout 20 hang-call)
  (define took (/ (- (current-inexact-monotonic-milliseconds) t0) 1000.0))
  (check-equal? (and (pair? (unbox result)) (car (unbox result))) 503
                (format "a handler hanging when the clock stepped back still gets the request timeout's 503 (~a)"
                        (unbox result)))
  (check-true (< took (+ request-timeout 7))
              (format "the 503 came within the request timeout and the watch's slack (~a s)" took))
  (check-true (within? (app-seconds address) (- (current-seconds) 3600))
              "the app reads the wall clock an hour behind")
  (define before (status address 'requests))
  (check-true (exact-nonnegative-integer? before) "the status page answers")
  (for ([_ (in-range 3)]) (call-new address "/"))
  (check-not-exn
   (λ () (wait-until 10 "the status page's requests counter to move after the step back"
                     (λ () (let ([n (status address 'requests)]) (and n before (>= n (+ before 3))))))))
  ;; a time shown is read from the wall clock when it is shown
  (check-true (within? (status address 'start_time) (- (current-seconds) 3600))
              "the status page's start_time is on the wall clock as it reads now")
  (check-equal? (call kept "/") '(200 "hello")
                "the kept connection still serves after the step back"))

(test-case "libfaketime is there"
  (check-true (file-exists? libfaketime)
              (format "~a is missing: install the Debian package faketime (the Makefile does: apt-get install faketime)"
                      libfaketime)))
(when (file-exists? libfaketime)
  (run-test))
