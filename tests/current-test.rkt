#lang racket/base
;; fastcgi/private/engine/current.rkt: current-fastcgi-request, the raw request behind a servlet's
;; request. Its own default and value; the servlet adapter binds it around each servlet's
;; call (served here over a connection of pipes, and by a server's event loop), including
;; a continuation resumed by a later request; a raw handler never needs it, and the thread
;; that served a servlet's request holds #f again after it. (Behind nginx:
;; tests/integration/nginx-test.rkt.)
(require racket/runtime-path
         rackunit
         web-server/http
         (only-in web-server/servlet send/suspend)
         "../fastcgi/main.rkt"
         (prefix-in private: "../fastcgi/private/engine/current.rkt")
         (only-in "../fastcgi/private/servlet/servlet.rkt"
                  load-servlet start->servlet loaded-servlet-run)
         (only-in "../fastcgi/private/servlet/web.rkt" servlet->handler)
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

(test-case "a parameter, #f by default; the public one is this one"
  (check-eq? current-fastcgi-request private:current-fastcgi-request)
  (check-false (current-fastcgi-request))
  (check-equal? (parameterize ([current-fastcgi-request 'r]) (current-fastcgi-request)) 'r))

;; seen : -> list ; what the current request is: whether one, its id, role and X param
(define (seen)
  (define r (current-fastcgi-request))
  (list (fastcgi-request? r) (and r (fastcgi-request-id r)) (and r (fastcgi-request-role r))
        (and r (fastcgi-param r "X"))))

;; what-servlet-saw : request -> response ; seen, as the body
(define (what-servlet-saw req)
  (define v (seen))
  (response/output (λ (out) (write v out))))

;; get : natural string [string] -> bytes ; a GET of uri with X = x
(define (get id x [uri "/"])
  (request-bytes id #:params (params "REQUEST_METHOD" "GET" "REQUEST_URI" uri
                                     "SERVER_NAME" "t" "SERVER_PORT" "80" "X" x)))

;; body-of : answer -> any ; the body read as a datum
(define (body-of a) (read (open-input-bytes (cgi-body (answer-stdout a)))))

(test-case "inside a servlet: the raw FastCGI request being served, a new one each request"
  (call-with-pipe-conn
   (servlet->handler what-servlet-saw default-limits)
   (λ (p c)
     (for ([id '(1 2)] [x '("one" "two")])
       (peer-send! p (get id x))
       (define a (peer-answer p id))
       (check-status a 200)
       (check-equal? (body-of a) (list #t id 'responder (string->bytes/utf-8 x)))))))

(test-case "a raw handler: no servlet request, the parameter stays #f"
  (call-with-pipe-conn
   (λ (r)
     (write-bytes ok-head (fastcgi-request-stdout r))
     (write (current-fastcgi-request) (fastcgi-request-stdout r)))
   (λ (p c)
     (peer-send! p (request-bytes 1))
     (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"#f"))))

;; servlet-then-raw : [#:wait-abort? boolean] -> (values handler (-> list))
;; A handler that serves odd ids with the servlet adapter and even ones as a raw handler,
;; which answers what it sees of the parameter; and the threads each ran in. wait-abort?:
;; the servlet first waits a moment on its abort-evt, which, inline, makes the engine start
;; a new reader (or a new event loop) from inside the servlet's call.
(define (servlet-then-raw #:wait-abort? [wait-abort? #f])
  (define servlet
    (servlet->handler (if wait-abort?
                          (λ (req)
                            (sync/timeout 0.05 (fastcgi-request-abort-evt (current-fastcgi-request)))
                            (what-servlet-saw req))
                          what-servlet-saw)
                      default-limits))
  (define threads '())
  (values (λ (r)
            (set! threads (cons (current-thread) threads))
            (cond
              [(odd? (fastcgi-request-id r)) (servlet r)]
              [else
               (write-bytes ok-head (fastcgi-request-stdout r))
               (write (seen) (fastcgi-request-stdout r))]))
          (λ () (reverse threads))))

;; servlet-then-raw-on : peer peer -> void
;; Request 1 (the servlet) on p1, then request 2 (raw) on p2: the servlet sees its own
;; request, the raw handler none.
(define (servlet-then-raw-on p1 p2)
  (peer-send! p1 (get 1 "one"))
  (check-equal? (body-of (peer-answer p1 1)) '(#t 1 responder #"one"))
  (peer-send! p2 (get 2 "two"))
  (check-equal? (body-of (peer-answer p2 2)) '(#f #f #f #f)))

(test-case "after a servlet's request, the thread that served it holds #f: a raw request next on the connection sees none"
  (define-values (handler threads) (servlet-then-raw))
  (call-with-pipe-conn
   handler
   (λ (p c) (servlet-then-raw-on p p)))
  ;; both inline, in the reader's thread: the very thread that ran the servlet
  (check-equal? (length (threads)) 2)
  (check-eq? (car (threads)) (cadr (threads))))

(test-case "a server's event loop: a raw request of another connection after a servlet's sees none"
  (define-values (handler threads) (servlet-then-raw))
  (call-with-server
   handler
   (λ (path) (with-peer path (λ (p1) (with-peer path (λ (p2) (servlet-then-raw-on p1 p2))))))))

(test-case "a handler in a thread of its own (its body still arriving), and a thread the servlet starts"
  (call-with-pipe-conn
   (servlet->handler (λ (req)
                       (define v (seen))
                       (define in-thread #f)
                       (thread-wait (thread (λ () (set! in-thread (seen)))))
                       (response/output (λ (out) (write (list v in-thread) out))))
                     default-limits)
   (λ (p c)
     (define all (request-bytes 3 #:params (params "REQUEST_METHOD" "POST" "REQUEST_URI" "/"
                                                  "CONTENT_LENGTH" "2" "X" "three")
                                #:stdin #"ab"))
     ;; all but the last record (the end of STDIN), which comes once the handler could run
     (define cut (- (bytes-length all) 8))
     (peer-send! p (subbytes all 0 cut))
     (sleep 0.1)
     (peer-send! p (subbytes all cut))
     (check-equal? (body-of (peer-answer p 3))
                   (list '(#t 3 responder #"three") '(#t 3 responder #"three"))))))

;; A servlet that suspends once (as a plain send/suspend, or inside a parameterize of its
;; own, whose parameterization the continuation keeps) and, resumed, answers what it sees.
(define (suspending around)
  (λ (req)
    (define first (seen))
    (around
     (λ ()
       (send/suspend (λ (k-url) (response/output (λ (out) (write k-url out)))))
       (define later (seen))
       (response/output (λ (out) (write (list first later) out)))))))

(for ([kind '("send/suspend" "send/suspend in a parameterize of the servlet's own")]
      [around (list (λ (th) (th)) (λ (th) (parameterize ([print-graph #t]) (th))))])
  (test-case (format "a continuation (~a) resumed by a later request sees that request" kind)
    (define s (start->servlet (suspending around) #:manager #f #:memory (* 64 1024 1024) #:timeout 60))
    (call-with-pipe-conn
     (servlet->handler (loaded-servlet-run s) default-limits)
     (λ (p c)
       (peer-send! p (get 1 "one"))
       (define k-url (body-of (peer-answer p 1)))
       (check-regexp-match #rx"^/;" k-url)
       (peer-send! p (get 2 "two" k-url))
       (check-equal? (body-of (peer-answer p 2))
                     (list '(#t 1 responder #"one") '(#t 2 responder #"two")))
       ;; and again: the same continuation, by a third request
       (peer-send! p (get 3 "three" k-url))
       (check-equal? (body-of (peer-answer p 3))
                     (list '(#t 1 responder #"one") '(#t 3 responder #"three")))))
    (check-false (current-fastcgi-request))))

(define-runtime-path v2-app "servlets/current-v2.rkt")

(test-case "a 'v2 servlet (run in its folder): its continuation resumed by a later request sees that request"
  (define s (load-servlet v2-app #:worker-id 0 #:memory (* 64 1024 1024) #:timeout 60
                          #:secret #f #:warn void))
  (call-with-pipe-conn
   (servlet->handler (loaded-servlet-run s) default-limits)
   (λ (p c)
     (peer-send! p (get 1 "one"))
     (define k-url (body-of (peer-answer p 1)))
     (peer-send! p (get 2 "two" k-url))
     (check-equal? (body-of (peer-answer p 2)) '((1 #"one") (2 #"two"))))))

(test-case "a servlet that waits on its abort-evt inline: the reader started meanwhile serves the next raw request with none"
  (define-values (handler threads) (servlet-then-raw #:wait-abort? #t))
  (call-with-pipe-conn
   handler
   (λ (p c) (servlet-then-raw-on p p)))
  (check-false (eq? (car (threads)) (cadr (threads))) "request 2 was read by the new reader"))

(test-case "a server's event loop: after a servlet that waits on its abort-evt, another connection's raw request sees none"
  (define-values (handler threads) (servlet-then-raw #:wait-abort? #t))
  (call-with-server
   handler
   (λ (path) (with-peer path (λ (p1) (with-peer path (λ (p2) (servlet-then-raw-on p1 p2))))))))
