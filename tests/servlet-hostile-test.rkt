#lang racket/base
;; HOSTILE.md items 39 and 40 through the real server (`raco fastcgi serve` subprocesses):
;; - continuation URLs forged, truncated, oversized and tampered, for a servlet with
;;   continuations (tests/servlets/dispatch.rkt) and a stateless one (tests/servlets/lang.rkt,
;;   default stuffer, no --secret-file): each answered within 2 s with the expiration page
;;   or 400, never 500; the process still serves afterwards;
;; - the stateless servlet's one warning line about the missing --secret-file;
;; - a flood of new sessions, each holding 200 KiB (tests/servlets/big.rkt), against
;;   --servlet-memory 64m: the worker's resident memory stays within the bound below, the
;;   live-session count is exact and stops growing, and requests that capture nothing make
;;   no session.
(require json
         racket/file
         racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "servlets/harness.rkt")

(compile-apps! '("dispatch.rkt" "lang.rkt" "big.rkt"))

(define dir (make-temporary-directory "fcgi-svh-~a" #:base-dir "/tmp"))
(define at-exit (plumber-add-flush! (current-plumber)
                                    (λ (h) (with-handlers ([exn:fail? void]) (delete-directory/files dir)))))

;; started together: each takes seconds to load
(define stateful (start-server "dispatch.rkt" '("--single-process") #:dir dir #:name "k"))
(define stateless (start-server "lang.rkt" '("--single-process") #:dir dir #:name "c"))
(define flood (start-server "big.rkt" '("--workers" "1" "--servlet-memory" "64m" "--continuation-timeout" "14400"
                                        "--status-path" "/status")
                            #:dir dir #:name "f"))

(define expired-rx #rx"^Page Has Expired. Sorry, this page has expired. Please go back.$")

;; timed : browser -> browser ; the same, failing a request that takes 2 s or more
(define ((timed get) method uri [form #f])
  (define t0 (current-inexact-milliseconds))
  (define r (get method uri form))
  (define ms (- (current-inexact-milliseconds) t0))
  (check-true (< ms 2000.) (format "answered in ~a ms: ~a" (round ms) (shorten uri)))
  r)

(define (shorten s) (if (> (string-length s) 120) (string-append (substring s 0 120) "...") s))

;; encode-param : string -> string ; a path parameter as a browser sends it
(define (encode-param s)
  (regexp-replace* #rx"[^A-Za-z0-9()._~-]" s
                   (λ (c) (format "%~a" (string-upcase (number->string (char->integer (string-ref c 0)) 16))))))

;; k-url : string -> string ; a URL whose last segment has this raw path parameter
(define (param-url p) (string-append "/;" (encode-param p)))

;; The client sends the path (decoded) in DOCUMENT_URI and PATH_INFO too: replaced by "/",
;; so that a 100 KB URI stays within the server's 128 KiB of params (the servlet reads the
;; URI from REQUEST_URI).
(define short-paths '(("DOCUMENT_URI" . "/") ("PATH_INFO" . "/")))

;; check-refused : resp string -> void ; the expiration page or a 400, nothing else
(define (check-refused r what #:expect [expect '(expired 400)])
  (define kind
    (cond [(and (= (resp-status r) 200) (regexp-match? expired-rx (resp-text r))) 'expired]
          [(= (resp-status r) 400) 400]
          [else (list (resp-status r) (resp-body r))]))
  (check-not-false (member kind expect) (format "~a: got ~s, expected one of ~s" what kind expect)))

;; resp-text* : resp -> string ; the text, or the body when it is not XML
(define (resp-text* r)
  (with-handlers ([exn:fail? (λ (e) (bytes->string/utf-8 (resp-body r) #\?))]) (resp-text r)))

;; ---------------------------------------------------------------------------------------

(test-case "continuation URLs forged, truncated, oversized, tampered: the expiration page or 400, within 2 s"
  (wait-server-ready stateful 90)
  (define get (timed (fcgi-browser (server-address stateful) #:params-extra short-paths)))
  (define r0 (get "GET" "/"))
  (define good (link r0 "plus"))
  (define k (read (open-input-string (continuation-param good))))
  (define-values (inst k-id salt) (apply values k))
  (define (k-param i n s) (format "~s" `(("k" . ,(format "~s" (list i n s))))))
  (check-regexp-match #rx"count: 1" (resp-text (get "GET" (param-url (k-param inst k-id salt)))) "rebuilt: works")
  ;; forged: the right shape, wrong numbers -> the expiration page
  (for ([p (list (k-param inst k-id (add1 salt))
                 (k-param inst k-id (modulo salt 100000000))
                 (k-param inst k-id (random 1000000000))
                 (k-param inst (add1 k-id) salt)
                 (k-param inst 999999 salt)
                 (k-param (+ inst (arithmetic-shift 1 32)) k-id salt)
                 (k-param (add1 inst) k-id salt)
                 (k-param 1 1 1)
                 (k-param 0 0 0)
                 (k-param (expt 10 39) (expt 10 39) (expt 10 79)))]
        [what '("salt + 1" "inner salt" "random salt" "next k-id" "unknown k-id" "unknown instance"
                "another worker's instance" "web-server's first ids" "zeros" "huge numbers")])
    (check-refused (get "GET" (param-url p)) what #:expect '(expired)))
  ;; tampered: one character of the good URL
  (for ([i (in-range 0 (string-length good) 3)])
    (define c (string-ref good i))
    (define t (string-append (substring good 0 i) (string (if (char=? c #\1) #\2 #\1)) (substring good (add1 i))))
    (define r (with-handlers ([exn:fail? (λ (e) (resp 'client-error '() (string->bytes/utf-8 (exn-message e))))])
                (get "GET" t)))
    (unless (eq? (resp-status r) 'client-error)
      (check-not-equal? (resp-status r) 500 (format "tampered at ~a: ~a" i t))
      (check-true (or (regexp-match? expired-rx (resp-text* r)) (= (resp-status r) 400)
                      ;; a change outside the parameter (the segment's name) leaves the
                      ;; continuation as it was, or leaves a URL with none (a new session)
                      (regexp-match? #rx"count: [01]" (resp-text* r)))
                  (format "tampered at ~a: ~a -> ~a" i t (resp-status r)))))
  ;; truncated: every prefix of the parameter that is not a whole one -> 400
  (define p (k-param inst k-id salt))
  (for ([n (in-list (list 1 2 5 8 (- (string-length p) 1) (- (string-length p) 2) (- (string-length p) 10)))])
    (check-refused (get "GET" (param-url (substring p 0 n))) (format "truncated to ~a" n) #:expect '(400)))
  ;; oversized, within the params limit (128 KiB): a 100 KB salt, a 100 KB nesting
  (check-refused (get "GET" (param-url (k-param inst k-id (string->number (make-string 100000 #\9)))))
                 "100 KB salt" #:expect '(400))
  (check-refused (get "GET" (param-url (string-append (make-string 50000 #\() (make-string 50000 #\)))))
                 "100 KB of nesting" #:expect '(400))
  (check-refused (get "GET" (param-url (string-append "((\"k\" . \"(" (make-string 100000 #\1) " 1 1)\"))")))
                 "100 KB instance id" #:expect '(400))
  ;; shapes `read` would take badly
  (for ([p '("#0=(#0#)" "((k . \"(1 2 3)\"))" "#reader racket/base 1" "#hash((\"k\" . \"(1 2 3)\"))"
             "((\"k\" . #0=(1 2 . #0#)))" "#&1" "#rx\"(a*)*b\"")])
    (check-refused (get "GET" (param-url p)) p #:expect '(400)))
  ;; still serving, and the good URL still works
  (check-regexp-match #rx"count: 1" (resp-text (get "GET" good)))
  (check-regexp-match #rx"count: 0" (resp-text (get "GET" "/")))
  (check-eq? (subprocess-status (proc-subprocess (server-proc stateful))) 'running))

(test-case "stateless: one warning line at load about --secret-file"
  (wait-server-ready stateless 90)
  (define lines (filter (λ (l) (regexp-match? #rx"no --secret-file was given" l))
                        (string-split (server-log stateless) "\n")))
  (check-equal? (length lines) 1 (format "~s" lines))
  (check-regexp-match #rx"warning .*lang.rkt is a stateless servlet" (if (pair? lines) (car lines) "")))

(test-case "stateless URLs and kont fields tampered, unsigned, oversized, cyclic, deep: 400 within 2 s"
  (wait-server-ready stateless 90)
  (define get (timed (fcgi-browser (server-address stateless) #:params-extra short-paths)))
  (define r0 (get "GET" "/"))
  (define kont (cdr (assoc "kont" (form-inputs r0))))
  (define r1 (get "POST" (form-action r0) `(("kont" . ,kont) ("word" . "owl"))))
  (check-regexp-match #rx"word: owl" (resp-text r1))
  (define next (link r1 "next"))
  (define c (continuation-param next))
  (define m (regexp-match #px"^(.*)[.]([0-9a-f]{32})$" c))
  (check-true (and m #t) "a signed c value")
  (define stuffed (cadr m))
  (define sig (caddr m))
  (define (c-url v) (param-url (format "~s" `(("c" . ,v)))))
  (check-regexp-match #rx"still: owl" (resp-text (get "GET" (c-url c))) "rebuilt: works")
  (define (flip s i) (string-append (substring s 0 i)
                                    (string (if (char=? (string-ref s i) #\A) #\B #\A))
                                    (substring s (add1 i))))
  (for ([v (list stuffed                                    ; web-server's own, unsigned
                 (string-append stuffed ".")
                 (flip c 0) (flip c (quotient (string-length stuffed) 2)) (flip c (sub1 (string-length stuffed)))
                 (string-append stuffed "." (flip sig 0)) (string-append stuffed "." (flip sig 31))
                 (string-append stuffed "." (substring sig 0 31))
                 (string-append stuffed "." (make-string 32 #\0))
                 (substring c 0 (quotient (string-length c) 2))
                 (string-append stuffed stuffed "." sig)
                 (string-append (make-string 100000 #\A) "." sig)
                 "")]
        [what '("unsigned" "empty signature" "first char" "middle char" "last stuffed char"
                "signature's first" "signature's last" "short signature" "zero signature" "half"
                "doubled" "100 KB" "empty")])
    (check-refused (get "GET" (c-url v)) (format "c: ~a" what) #:expect '(400)))
  ;; the kont field: one written byte string, signed
  (for ([v (list "#0=(#0#)"
                 (string-append (make-string 10000 #\() (make-string 10000 #\)))
                 (string-append "#\"" (make-string 100000 #\A) "\"")
                 (format "~s" (string->bytes/utf-8 stuffed))           ; unsigned
                 (format "~s" (string->bytes/utf-8 (flip (bytes->string/utf-8 (read (open-input-string kont))) 3)))
                 "symbol" "42" "\"a string\"" "#\"unterminated" "#\"a\" #\"b\"" "")]
        [what '("cycle" "10000 deep" "100 KB" "unsigned" "tampered" "symbol" "number" "string"
                "unterminated" "two values" "empty")])
    (check-refused (get "POST" "/" `(("kont" . ,v) ("word" . "x"))) (format "kont: ~a" what) #:expect '(400)))
  ;; the good ones still work, and the server serves
  (check-regexp-match #rx"word: hare" (resp-text (get "POST" "/" `(("kont" . ,kont) ("word" . "hare")))))
  (check-regexp-match #rx"still: owl" (resp-text (get "GET" next)))
  (check-eq? (subprocess-status (proc-subprocess (server-proc stateless))) 'running)
  (check-false (regexp-match? #rx"(?i:error)" (server-log stateless)) (server-log stateless)))

;; ---------------------------------------------------------------------------------------
;; A flood of sessions.

;; status : string -> hash ; the pool's status, as JSON
(define (status address)
  (define-values (st h b) (fastcgi-request address #:uri "/status?json" #:timeout 10))
  (string->jsexpr (bytes->string/utf-8 b)))

(test-case "a flood of new sessions: memory within the bound, sessions counted, requests that capture nothing make none"
  (wait-server-ready flood 90)
  (define address (server-address flood))
  (define pid (hash-ref (car (hash-ref (status address) 'workers)) 'pid))
  (define (rss-kb) (status-memory-kb pid 'VmRSS))
  (define (sessions) (hash-ref (status address) 'sessions))
  ;; requests that capture no continuation: no session, no growth
  (for ([i 20]) (fastcgi-request address #:uri "/small"))
  (define baseline-kb (rss-kb))
  (for ([i 2000]) (fastcgi-request address #:uri "/small"))
  (sleep 2.5)                           ; a sweep (every 2 s) has counted
  (check-equal? (sessions) 0 "2000 requests that never suspend: no session")
  (check-true (< (- (rss-kb) baseline-kb) (* 32 1024))
              (format "2000 requests that never suspend: RSS ~a -> ~a kB" baseline-kb (rss-kb)))
  ;; the flood: n sessions of 200 KiB each, from 4 clients at once, bounded at 60 s; the
  ;; first and the last session's URLs are kept
  (define n 6000)
  (define session-kb 200)
  (reset-peak-memory! pid)
  (define t0 (current-inexact-milliseconds))
  (define failures (box 0))
  (define made (box 0))
  (define urls (make-vector 4 #f))       ; each client's first URL
  (define last-url (box #f))
  (define clients
    (for/list ([c 4])
      (thread (λ ()
                (for ([i (in-range (quotient n 4))])
                  #:break (> (- (current-inexact-milliseconds) t0) 60000.)
                  (define-values (st h b) (with-handlers ([exn:fail? (λ (e) (values 0 '() #""))])
                                            (fastcgi-request address #:uri "/" #:timeout 10)))
                  (cond
                    [(= st 200)
                     (set-box! made (add1 (unbox made)))
                     (define m (regexp-match #rx#"href=\"([^\"]*)\"" b))
                     (when m
                       (define u (bytes->string/utf-8 (cadr m)))
                       (unless (vector-ref urls c) (vector-set! urls c u))
                       (set-box! last-url u))]
                    [else (set-box! failures (add1 (unbox failures)))]))))))
  ;; while it runs: a neighbour's request answered within 2 s
  (define slowest-ms
    (let loop ([slowest 0.])
      (cond
        [(andmap thread-dead? clients) slowest]
        [else
         (define t (current-inexact-milliseconds))
         (define-values (st h b) (fastcgi-request address #:uri "/small" #:timeout 10))
         (check-equal? st 200)
         (sleep 0.25)
         (loop (max slowest (- (current-inexact-milliseconds) t 250.)))])))
  (define secs (/ (- (current-inexact-milliseconds) t0) 1000.))
  (define peak-kb (status-memory-kb pid 'VmHWM))
  (define rate (/ (unbox made) secs))
  ;; The bound. Past --servlet-memory (64 MiB over what the worker held once the app
  ;; loaded) a store ends the least recently used half of the sessions, at most once a
  ;; second unless past the bound by a quarter, so what the worker holds does not grow with
  ;; the flood, however fast it comes (the flood's duration depends on the machine, so
  ;; it is not a condition; sessions ended is, below): it must stay under half
  ;; of the flood's data (6000 sessions of 200 KiB: 1.2 GB). Without the hard bound,
  ;; web-server's manager keeps every session of the last 2 minutes, all of them here, and
  ;; the worker holds at least the whole data (1.7 times it, measured). The margin over
  ;; the 64 MiB is what accumulates between two evictions and what the collector has not
  ;; yet given back (reported below).
  (define data-kb (* (unbox made) session-kb))
  (printf "flood: ~a sessions in ~a s (~a a second); peak RSS ~a kB over a baseline of ~a kB; the sessions' data ~a kB\n"
          (unbox made) (/ (round (* 10 secs)) 10) (round rate) peak-kb baseline-kb data-kb)
  (check-true (< (- peak-kb baseline-kb) (quotient data-kb 2))
              (format "peak RSS ~a kB over a baseline of ~a kB: not under half of the sessions' ~a kB"
                      peak-kb baseline-kb data-kb))
  (check-equal? (unbox failures) 0 "every session page answered 200")
  (check-true (< slowest-ms 2000.) (format "a neighbour's request during the flood took ~a ms" slowest-ms))
  ;; sessions ended: fewer live than made, the first ones expired, the last one alive
  (sleep 2.5)
  (define live (sessions))
  (check-true (< 0 live (unbox made)) (format "~a live sessions of ~a made" live (unbox made)))
  (for ([u (in-vector urls)] #:when u)
    (define-values (st h b) (fastcgi-request address #:uri u #:timeout 10))
    (check-equal? st 200)
    (check-regexp-match #rx"this page has expired" (bytes->string/utf-8 b #\?) "an early session ended"))
  (define-values (st h b) (fastcgi-request address #:uri (unbox last-url) #:timeout 10))
  (check-regexp-match #rx"held 204800 bytes" (bytes->string/utf-8 b #\?) "the last session lives")
  (check-eq? (subprocess-status (proc-subprocess (server-proc flood))) 'running))

;; ---------------------------------------------------------------------------------------
(for ([s (list stateful stateless flood)])
  (stop-server! s))
(plumber-flush-handle-remove! at-exit)
(delete-directory/files dir)
