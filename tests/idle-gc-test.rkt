#lang racket/base
;; --gc-when-idle (fastcgi/private/idle-gc.rkt): the rule on a table; then with
;; `raco fastcgi serve` for real, a worker whose memory has grown past the rule while a
;; request is in flight does not collect until that request has ended, then collects
;; while idle (its debug line, and the count on the status). Every wait is bounded.
(require racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "../fastcgi/private/idle-gc.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(test-case "idle-collect-due?: once the memory in use has grown by three fifths of what the last major left"
  (for ([row (in-list '((100 100 #f) (159 100 #f) (160 100 #t) (400 100 #t) (0 0 #t) (4 3 #f) (5 3 #t)))])
    (check-equal? (idle-collect-due? (car row) (cadr row)) (caddr row) (format "~s" row))))

;; The app: /slow logs that it begins, holds new memory of about three quarters of what
;; the worker held when it began (past the rule, short of what makes the runtime collect),
;; sleeps, and logs that it ends; any other path answers at once.
(define app-source
  (string-append
   "#lang racket/base\n"
   "(require fastcgi)\n"
   "(provide fastcgi-handler)\n"
   "(define-logger app)\n"
   "(define (fastcgi-handler r)\n"
   "  (when (regexp-match? #rx#\"^/slow\" (fastcgi-param r \"REQUEST_URI\" #\"/\"))\n"
   "    (log-app-warning \"slow begins\")\n"
   "    (define n (quotient (* 3 (current-memory-use)) (* 4 8016)))\n"
   "    (define held (for/list ([i (in-range n)]) (make-vector 1000 i)))\n"
   "    (sleep 1.5)\n"
   "    (log-app-warning \"slow ends holding ~a vectors\" (length held)))\n"
   "  (write-string \"Content-Type: text/plain\\r\\n\\r\\nok\\n\" (fastcgi-request-stdout r)))\n"))

;; call-with-serve : (listof string) (string string path -> any) -> any
;; `raco fastcgi serve app --workers 1` on a unix socket in a fresh folder with the
;; options; body gets the socket address, the status file and the stderr file.
(define (call-with-serve opts body)
  (call-with-temp-dir
   "fcgi-idlegc"
   (λ (dir)
     (define app (path->string (build-path dir "app.rkt")))
     (define sock (path->string (build-path dir "app.sock")))
     (define pid-file (path->string (build-path dir "manager.pid")))
     (display-to-file app-source app)
     (call-with-process
      "serve" raco (append (list "fastcgi" "serve" app "--listen" (string-append "unix:" sock)
                                 "--workers" "1" "--pid-file" pid-file "--log-level" "debug")
                           opts)
      #:dir dir
      (λ (p)
        (define stderr (build-path dir "serve.stderr"))
        (define status-file (pid-file->status-file pid-file))
        (with-handlers ([exn:fail? (λ (e) (raise (exn:fail (format "~a\nserve's stderr:\n~a" (exn-message e)
                                                                   (file->string stderr))
                                                           (exn-continuation-marks e))))])
          (wait-for-unix-socket sock 30)
          (wait-until 60 "a ready worker" (λ () (pair? (board-pids (read-status-file status-file) '("idle")))))
          (body (string-append "unix:" sock) status-file stderr)))))))

;; the worker's idle_collections on the status
(define (idle-collections status-file)
  (define b (read-status-file status-file))
  (and b (pair? (hash-ref b 'workers '())) (hash-ref (car (hash-ref b 'workers)) 'idle_collections #f)))

;; get! : string string -> natural ; one request, bounded; its status
(define (get! address uri)
  (define-values (status headers body) (fastcgi-request address #:uri uri #:timeout 30))
  status)

(test-case "--gc-when-idle: never with a request in flight; once idle, it collects"
  (call-with-serve
   '("--gc-when-idle")
   (λ (address status-file stderr)
     (check-equal? (idle-collections status-file) 0)
     ;; a /slow, then a bounded wait for the collection; again (at most 3 times) if the
     ;; runtime's own major collection came first, during the allocation, and took its place
     (define collected?
       (for/or ([_ (in-range 3)])
         (check-equal? (get! address "/slow") 200)
         (with-handlers ([exn:fail? (λ (e) #f)])
           (wait-until 5 "an idle collection on the status" (λ () (positive? (or (idle-collections status-file) 0)))))))
     (check-true collected? "an idle collection after /slow")
     (wait-until 10 "its debug line and the end of /slow"
                 (λ () (let ([text (file->string stderr)])
                         (and (regexp-match? #rx"idle collection 1: " text) (regexp-match? #rx"slow ends" text)))))
     ;; the lines come in the order they were logged, through one receiver: no collection
     ;; between a /slow's beginning and its end
     (define lines (string-split (file->string stderr) "\n"))
     (define in-slow? #f)
     (for ([l (in-list lines)])
       (cond
         [(regexp-match? #rx"slow begins" l) (set! in-slow? #t)]
         [(regexp-match? #rx"slow ends" l) (set! in-slow? #f)]
         [(regexp-match? #rx"idle collection [0-9]+: " l)
          (check-false in-slow? (format "an idle collection while /slow ran: ~a" l))]))
     (check-regexp-match #rx"slow ends[^\n]*\n(.*\n)*[^\n]*idle collection 1: " (file->string stderr)
                         "the collection after a /slow ended")
     (when (getenv "SHOW") (display (file->string stderr))))))

(test-case "without --gc-when-idle: no idle collections"
  (call-with-serve
   '()
   (λ (address status-file stderr)
     (check-equal? (get! address "/slow") 200)
     (sleep 0.5)
     (check-equal? (idle-collections status-file) 0)
     (check-false (regexp-match? #rx"idle collection" (file->string stderr))))))
