#lang racket/base
;; tests/reliability/loadgen.rkt : builds and drives the open-loop, fixed-rate HTTP load
;; generator in tests/reliability/loadgen (Go, standard library only; its flags, its
;; behaviour and its JSON are described at the top of loadgen/main.go).
;;
;;   (define bin (build-loadgen! (build-path tmp "bin")))
;;   (define r (run-loadgen bin #:url "http://127.0.0.1:8080/hello" #:rate 1000 #:seconds 5))
;;   (hash-ref r 'sent) (hash-ref (hash-ref r 'by_status) '|200| 0)
;;   (hash-ref (hash-ref (hash-ref r 'latency) 'all) 'p99)
;;
;; or, to stop early: (define h (start-loadgen bin ...)) ... (loadgen-stop! h) (loadgen-wait h).
;; The result is the JSON as read-json gives it: hasheq tables with symbol keys (so statuses
;; are keys like '|200|), and a percentile over no latencies is the symbol 'null.

(require json
         racket/file
         racket/runtime-path
         racket/string)

(provide build-loadgen!
         start-loadgen
         loadgen-wait
         loadgen-stop!
         run-loadgen
         loadgen?)

(define-runtime-path loadgen-source-dir "loadgen")

(define go-program "/usr/bin/go")

;; build-loadgen! : path-string -> path ; go build into dir, as bench/run.rkt builds its Go peer
(define (build-loadgen! dir)
  (unless (file-exists? go-program)
    (error 'build-loadgen! "~a not found: install Debian's golang-go (apt-get install golang-go)"
           go-program))
  (define out-dir (path->complete-path dir))
  (make-directory* out-dir)
  (define bin (build-path out-dir "loadgen"))
  (define env (environment-variables-copy (current-environment-variables)))
  (for ([kv (in-list (list (cons "GOFLAGS" "-mod=mod") (cons "GOPROXY" "off")
                           (cons "GOCACHE" (path->string (build-path out-dir "gocache")))
                           (cons "GOPATH" (path->string (build-path out-dir "gopath")))))])
    (environment-variables-set! env (string->bytes/utf-8 (car kv)) (string->bytes/utf-8 (cdr kv))))
  (define-values (status err)
    (parameterize ([current-directory loadgen-source-dir]
                   [current-environment-variables env])
      (run-to-completion go-program (list "build" "-o" (path->string bin) ".") 300)))
  (unless (eqv? status 0)
    (error 'build-loadgen! "go build in ~a failed (status ~a):\n~a" loadgen-source-dir status err))
  bin)

;; run-to-completion : path-string (listof string) seconds -> (values status stderr-string)
;; stdout and stderr go to temporary files, so no pipe can fill up
(define (run-to-completion program args timeout)
  (define tmp (make-temporary-file "loadgen-build-~a" 'directory))
  (dynamic-wind
   void
   (λ ()
     (define out-file (build-path tmp "stdout"))
     (define err-file (build-path tmp "stderr"))
     (define p (spawn program args out-file err-file))
     (dynamic-wind
      void
      (λ ()
        (unless (sync/timeout timeout p)
          (subprocess-kill p #t)
          (subprocess-wait p)
          (error 'build-loadgen! "~a did not finish within ~a s" program timeout))
        (values (subprocess-status p)
                (string-append (file->string out-file) (file->string err-file))))
      (λ () (kill-if-running p))))
   (λ () (delete-directory/files tmp #:must-exist? #f))))

;; spawn : path-string (listof string) path path -> subprocess
;; stdin is closed at once; stdout and stderr are files (Racket 8.7 takes file-stream ports)
(define (spawn program args out-file err-file)
  (define out (open-output-file out-file #:exists 'truncate))
  (define err (open-output-file err-file #:exists 'truncate))
  (define-values (p _out in _err)
    (dynamic-wind
     void
     (λ ()
       ;; should the custodian be shut down, the child gets SIGINT and writes what it has
       (parameterize ([current-subprocess-custodian-mode 'interrupt])
         (apply subprocess out #f err program args)))
     (λ () (close-output-port out) (close-output-port err))))
  (close-output-port in)
  p)

(define (kill-if-running p)
  (when (eq? (subprocess-status p) 'running)
    (subprocess-kill p #t)
    (subprocess-wait p)))

;; ---------------------------------------------------------------------------------------

;; a running (or finished) generator
(struct loadgen (proc dir out-file err-file deadline [result #:mutable]))

;; start-loadgen : path url ... -> loadgen
;; #:mix is #f, a "PATH=W,PATH=W" string, or a list of (cons path weight).
;; #:post-share F sends that share of the requests (the others as #:method) as POSTs to
;; #:post-path (default: the url's path) with a body of #:post-bytes (a size, or a pair
;; (cons min max) picked per request); #:post-echo? checks each 200 answers the body's length.
(define (start-loadgen bin
                       #:url url
                       #:rate rate
                       #:seconds seconds
                       #:mix [mix #f]
                       #:max-inflight [max-inflight 4000]
                       #:timeout [timeout 10]
                       #:method [method "GET"]
                       #:body-bytes [body-bytes 0]
                       #:expect-bytes [expect-bytes #f]
                       #:post-share [post-share 0]
                       #:post-path [post-path #f]
                       #:post-bytes [post-bytes 1024]
                       #:post-echo? [post-echo? #f]
                       #:seed [seed 1])
  (unless (string? url) (raise-argument-error 'start-loadgen "string?" url))
  (unless (and (real? rate) (positive? rate)) (raise-argument-error 'start-loadgen "positive real?" rate))
  (unless (and (real? seconds) (positive? seconds))
    (raise-argument-error 'start-loadgen "positive real?" seconds))
  (unless (exact-positive-integer? max-inflight)
    (raise-argument-error 'start-loadgen "exact-positive-integer?" max-inflight))
  (unless (and (real? timeout) (positive? timeout))
    (raise-argument-error 'start-loadgen "positive real?" timeout))
  (unless (member method '("GET" "POST")) (raise-argument-error 'start-loadgen "(or/c \"GET\" \"POST\")" method))
  (unless (exact-nonnegative-integer? body-bytes)
    (raise-argument-error 'start-loadgen "exact-nonnegative-integer?" body-bytes))
  (unless (or (not expect-bytes) (exact-nonnegative-integer? expect-bytes))
    (raise-argument-error 'start-loadgen "(or/c #f exact-nonnegative-integer?)" expect-bytes))
  (unless (exact-integer? seed) (raise-argument-error 'start-loadgen "exact-integer?" seed))
  (unless (and (real? post-share) (<= 0 post-share 1))
    (raise-argument-error 'start-loadgen "(real-in 0 1)" post-share))
  (unless (or (not post-path) (string? post-path))
    (raise-argument-error 'start-loadgen "(or/c #f string?)" post-path))
  (define post-bytes-arg
    (cond
      [(exact-nonnegative-integer? post-bytes) (number->string post-bytes)]
      [(and (pair? post-bytes) (exact-nonnegative-integer? (car post-bytes))
            (exact-nonnegative-integer? (cdr post-bytes)) (<= (car post-bytes) (cdr post-bytes)))
       (format "~a-~a" (car post-bytes) (cdr post-bytes))]
      [else (raise-argument-error 'start-loadgen "(or/c natural? (cons/c natural? natural?))" post-bytes)]))
  (define mix-arg
    (cond
      [(not mix) #f]
      [(string? mix) mix]
      [(and (list? mix) (andmap (λ (e) (and (pair? e) (string? (car e)) (real? (cdr e)))) mix))
       (string-join (for/list ([e (in-list mix)]) (format "~a=~a" (car e) (num (cdr e)))) ",")]
      [else (raise-argument-error 'start-loadgen "(or/c #f string? (listof (cons/c string? real?)))" mix)]))
  (define dir (make-temporary-file "loadgen-~a" 'directory))
  (define out-file (build-path dir "result.json"))
  (define err-file (build-path dir "stderr"))
  (define args
    (append (list "-url" url "-rate" (num rate) "-duration" (num seconds)
                  "-max-inflight" (number->string max-inflight) "-timeout" (num timeout)
                  "-method" method "-body-bytes" (number->string body-bytes)
                  "-seed" (number->string seed) "-out" (path->string out-file))
            (if mix-arg (list "-mix" mix-arg) '())
            (if expect-bytes (list "-expect-bytes" (number->string expect-bytes)) '())
            (if (positive? post-share)
                (append (list "-post-share" (num post-share) "-post-bytes" post-bytes-arg)
                        (if post-path (list "-post-path" post-path) '())
                        (if post-echo? (list "-post-echo") '()))
                '())))
  (define p (spawn bin args (build-path dir "stdout") err-file))
  ;; the run is bounded: sending for seconds, then in-flight requests for at most timeout
  (define deadline (+ (current-inexact-milliseconds) (* 1000 (+ seconds timeout 30))))
  (loadgen p dir out-file err-file deadline #f))

;; num : real -> string, in a form Go's ParseFloat takes
(define (num x)
  (if (exact-integer? x) (number->string x) (number->string (exact->inexact x))))

;; loadgen-wait : loadgen -> jsexpr ; waits for the end (or kills the process at the deadline)
(define (loadgen-wait h)
  (or (loadgen-result h)
      (let ([p (loadgen-proc h)])
        (dynamic-wind
         void
         (λ ()
           (define left (/ (max 0 (- (loadgen-deadline h) (current-inexact-milliseconds))) 1000))
           (unless (sync/timeout left p)
             (kill-if-running p)
             (error 'loadgen-wait "the load generator did not finish by its deadline; killed it\n~a"
                    (stderr-of h)))
           (define status (subprocess-status p))
           (unless (eqv? status 0)
             (error 'loadgen-wait "the load generator exited with status ~a:\n~a" status (stderr-of h)))
           (define result
             (with-handlers ([exn:fail? (λ (e)
                                          (error 'loadgen-wait "no readable result (~a):\n~a"
                                                 (exn-message e) (stderr-of h)))])
               (define r (call-with-input-file (loadgen-out-file h) read-json))
               (unless (hash? r) (error 'loadgen-wait "the result is not a JSON object"))
               r))
           (set-loadgen-result! h result)
           result)
         (λ ()
           (kill-if-running p)
           (delete-directory/files (loadgen-dir h) #:must-exist? #f))))))

(define (stderr-of h)
  (define f (loadgen-err-file h))
  (define text (if (file-exists? f) (string-trim (file->string f)) ""))
  (if (equal? text "") "(no stderr)" text))

;; loadgen-stop! : loadgen -> void ; SIGINT: stop sending, await the in-flight requests, write
;; the result (a second call cancels the in-flight requests; they count as error "other")
(define (loadgen-stop! h)
  (define p (loadgen-proc h))
  (when (eq? (subprocess-status p) 'running)
    (subprocess-kill p #f)))

;; run-loadgen : like start-loadgen (the same arguments), and waits for the result
(define run-loadgen
  (make-keyword-procedure
   (λ (kws vals bin) (loadgen-wait (keyword-apply start-loadgen kws vals (list bin))))))
