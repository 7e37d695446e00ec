#lang racket/base
;; Live stacks (issue 41): `raco fastcgi ctl stacks` and the status path's ?stacks show
;; every running request (worker, request id, method and URI, age) with its handler's
;; stack taken while it runs: a handler blocked in a known function shows that function's
;; name, and the request goes on afterwards (the stack was taken without stopping it). A
;; stopped worker (SIGSTOP) is listed as not answering, and the answer still comes. The
;; same on a single process (--single-process).
(require json
         racket/file
         racket/list
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define SIGSTOP 19)
(define SIGCONT 18)

;; send-signal-number : natural natural -> void
(define (send-signal-number pid sig)
  (run-program (find-executable-path "kill") (list (format "-~a" sig) (number->string pid))))

;; /block waits in wait-in-known-place until the file `released` is in the app's folder
;; (whichever worker took the request); its recursion keeps the function's own frames on
;; the stack (a call in tail position, or one inlined, would leave none).
(define source
  (string-append
   "#lang racket/base\n(require fastcgi racket/runtime-path)\n(provide fastcgi-handler)\n"
   "(define-runtime-path gate \"released\")\n"
   "(define (wait-in-known-place n)\n"
   "  (if (zero? n)\n"
   "      (list (let loop () (unless (file-exists? gate) (sleep 0.05) (loop))))\n"
   "      (list (wait-in-known-place (sub1 n)))))\n"
   "(define (fastcgi-handler r)\n"
   "  (define uri (bytes->string/utf-8 (fastcgi-param r \"REQUEST_URI\" #\"\")))\n"
   "  (when (regexp-match? #rx\"^/block\" uri) (wait-in-known-place 3))\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\ndone\\n\" (fastcgi-request-stdout r)))\n"))

;; release! : path -> void ; the blocked requests of the app in dir go on
(define (release! dir) (call-with-output-file (build-path dir "released") void #:exists 'truncate))

;; blocked! : served -> thread ; a request to /block?id=7 under way (its answer: the thread's)
(define (blocked! s)
  (thread (λ () (fastcgi-request (served-address s) #:uri "/block?id=7" #:timeout 60))))

(define (ctl-stacks s . more)
  (define-values (code out err) (run-program* raco (append (list "fastcgi" "ctl" "stacks" "--pid-file" (served-pid-file s)) more)))
  (check-equal? code 0 err)
  out)

(define (status s query)
  (define-values (st headers body) (fastcgi-request (served-address s) #:uri (string-append "/status?" query) #:timeout 30))
  (check-equal? st 200 (bytes->string/utf-8 body #\?))
  (bytes->string/utf-8 body #\?))

;; blocked-request : hash -> (or/c hash #f) ; the /block request of a stacks answer
(define (blocked-request answer)
  (for*/first ([w (in-list (hash-ref answer 'workers))]
               [r (in-list (hash-ref w 'requests))]
               #:when (regexp-match? #rx"^/block" (hash-ref r 'uri)))
    r))

(test-case "a pool: ctl stacks and ?stacks show a blocked handler's function, taken while it runs"
  (call-with-served-app
   source '("--workers" "2" "--status-path" "/status")
   #:name "fcgi-stacks" #:ready 2
   (λ (s)
     (define t (blocked! s))
     (wait-until 20 "the /block request running"
                 (λ () (regexp-match? #rx"/block" (ctl-stacks s))))
     (define text (ctl-stacks s))
     (check-regexp-match #rx"request [0-9]+ GET /block\\?id=7 from .*, running for [0-9.]+ s" text)
     (check-regexp-match #rx"\n    wait-in-known-place" text "the function it waits in")
     (define answer (string->jsexpr (ctl-stacks s "--json")))
     (check-equal? (length (hash-ref answer 'workers)) 2 "every worker listed")
     (check-true (andmap (λ (w) (hash-ref w 'answered)) (hash-ref answer 'workers)))
     (define r (blocked-request answer))
     (check-equal? (hash-ref r 'method) "GET")
     (check-true (exact-nonnegative-integer? (hash-ref r 'age_ms)))
     (check-true (ormap (λ (f) (regexp-match? #rx"^wait-in-known-place" f)) (hash-ref r 'stack)))
     ;; the status path, text and JSON
     (check-regexp-match #rx"\n    wait-in-known-place" (status s "stacks"))
     (check-not-false (blocked-request (string->jsexpr (status s "stacks&json"))))
     ;; the request was not stopped: released, it answers
     (release! (served-dir s))
     (check-not-false (sync/timeout 30 t) "the blocked request was answered after its stacks were taken"))))

(test-case "a stopped worker is listed as not answering, and the answer still comes"
  (call-with-served-app
   source '("--workers" "2")
   #:name "fcgi-stacks-stop" #:ready 2
   (λ (s)
     (define pids (board-pids (read-status-file (served-status-file s)) '("idle" "busy")))
     (define stopped (first pids))
     (send-signal-number stopped SIGSTOP)
     (dynamic-wind
      void
      (λ ()
        (define answer (string->jsexpr (ctl-stacks s "--json")))
        (define by-pid (for/hash ([w (in-list (hash-ref answer 'workers))]) (values (hash-ref w 'pid) w)))
        (check-false (hash-ref (hash-ref by-pid stopped) 'answered) "the stopped one did not answer")
        (check-true (hash-ref (hash-ref by-pid (second pids)) 'answered) "the other did")
        (check-regexp-match (pregexp (format "worker ~a .*: did not answer within 1 s" stopped)) (ctl-stacks s)))
      (λ () (send-signal-number stopped SIGCONT))))))

(test-case "--single-process: ?stacks shows its own running requests"
  (call-with-temp-dir
   "fcgi-stacks-single"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define sock (path->string (build-path dir "app.sock")))
     (display-to-file source app)
     (define p (start-process "serve" raco (list "fastcgi" "serve" app "--single-process"
                                                 "--listen" (string-append "unix:" sock)
                                                 "--status-path" "/status")
                              #:dir dir))
     (dynamic-wind
      void
      (λ ()
        (wait-for-unix-socket sock 30)
        (define addr (string-append "unix:" sock))
        (define t (thread (λ () (fastcgi-request addr #:uri "/block" #:timeout 60))))
        (define (body q)
          (define-values (st h b) (fastcgi-request addr #:uri (string-append "/status?" q) #:timeout 30))
          (bytes->string/utf-8 b #\?))
        (wait-until 20 "the /block request running" (λ () (regexp-match? #rx"/block" (body "stacks"))))
        (check-regexp-match #rx"\n    wait-in-known-place" (body "stacks"))
        (release! dir)
        (check-not-false (sync/timeout 30 t) "the blocked request answered"))
      (λ () (stop-process! p #:timeout 10))))))
