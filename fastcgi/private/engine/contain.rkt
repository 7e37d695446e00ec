#lang racket/base
;; A handler that runs away ends its own request, not the process: `exit` called by a
;; handler, and, with a request-memory limit, a handler that holds too much memory.
;;
;; exit. install-exit-handler! wraps the exit handler of the thread that starts a server
;; (its threads inherit it): called where a handler runs (inside call-handler's prompt),
;; it escapes to that prompt and the request is answered 500; called in a thread that a
;; handler started, it ends that thread; anywhere else it does what it did. As
;; web-server's servlet dispatcher does for a servlet (whose exit handler every thread it
;; starts inherits).
;;
;; Memory. With a limit, the handler runs in a thread of its own under a custodian of its
;; own, limited with custodian-limit-memory: Racket charges that custodian with what its
;; threads reach and the rest of the process does not, and shuts it down when a major
;; collection finds it over the limit, which kills the thread wherever it is. The thread
;; that called waits for it, and answers for it. Without a limit none of this is made
;; (no custodian, no thread); with one, every major collection also does the accounting.
;; A thread killed so gives back nothing it held: the connection's write lock, if it died
;; in a send, is taken back here (recover-lock!); a lock of the application's own stays
;; taken, as after any kill-thread.
(require "../util/catch.rkt"
         "../util/log.rkt"
         "request.rkt"
         (only-in "wire.rkt" conn-lock conn-broken!))
(provide call-handler
         install-exit-handler!
         handler-ended?)

;; What call-handler's box holds when the handler was ended here (already logged): the
;; request is answered 500 (or ended, if some of its answer left).
(struct handler-ended ())
(define ended (handler-ended))

;; call-handler : (fastcgi-request -> any) fastcgi-request (or/c #f natural) -> (or/c #f box)
;; Runs the handler on r, breaks enabled: #f when it returned; else a box of what it
;; raised, or of a handler-ended value when it called exit or went over limit bytes.
(define (call-handler handler r limit)
  (if limit
      (call-limited handler r limit)
      (call-here handler r)))

;; The prompt around a handler, which its exit escapes to.
(define exit-tag (make-continuation-prompt-tag 'fastcgi-exit))

;; call-here : (fastcgi-request -> any) fastcgi-request -> (or/c #f box)
;; In this thread, as r's handler thread (request-state.rkt's handler-request: a thread
;; the handler starts is r's too, for as long as it lives, and exit there ends it).
(define (call-here handler r)
  (call-as-handler-of
   r
   (λ ()
     (call-with-continuation-prompt
      (λ () (catch-all box (parameterize-break #t (handler r)) #f))
      exit-tag
      (λ ()
        (log-ended r "handler called exit: request ended")
        (box ended))))))

;; call-limited : (fastcgi-request -> any) fastcgi-request natural -> (or/c #f box)
;; In a thread of its own under a custodian limited to limit bytes (see the top). That
;; thread is the request's handler thread (the slow log shows its stack); a break that
;; reaches this one instead (the request timeout) is passed on to it.
(define (call-limited handler r limit)
  (define cust (make-custodian))
  (custodian-limit-memory cust limit cust)
  (define result none)
  (define t
    (parameterize ([current-custodian cust])
      (thread (λ () (set! result (call-here handler r))))))
  (request-handler-started! r t)
  (let wait ()
    (with-handlers ([exn:break? (λ (e) (break-thread t) (wait))])
      (sync/enable-break t)))
  (cond
    [(not (eq? result none)) result]
    [else
     (recover-lock! (fastcgi-request-conn r))
     (log-ended r (if (custodian-shut-down? cust)
                      (format "over --request-memory ~a: ended" (mib limit))
                      "handler thread killed: request ended"))
     (box ended)]))

(define none (string->uninterned-symbol "none"))

;; recover-lock! : conn -> void
;; A thread killed while it held the connection's write lock (in a send, which may have
;; left half a record) never gives it back. Free at once, as it nearly always is, or
;; within a second (a send of another request finishing), it was not the killed thread's.
;; Else it is the killed thread's, or a send's that waits on a front that does not read:
;; the lock is given back, and the connection closed at once (its bytes can no longer be
;; trusted; closing ends such a send, and aborts the connection's requests, which takes
;; the lock). A second holder, if the send's was live, can only find the connection
;; closed.
(define (recover-lock! c)
  (define lock (conn-lock c))
  (cond
    [(sync/timeout lock-wait lock) (semaphore-post lock)]
    [else
     (semaphore-post lock)
     (conn-broken! c)]))

(define lock-wait 1)

;; log-ended : fastcgi-request string -> void
(define (log-ended r what)
  (log-fastcgi-warning "request ~a from ~a ~a ~a: ~a"
                       (fastcgi-request-id r) (log-escape (fastcgi-request-peer r))
                       (log-escape (or (request-param r #"REQUEST_METHOD") #"-"))
                       (log-escape (or (request-param r #"REQUEST_URI") #"-"))
                       what))

;; mib : natural -> string ; 50 MiB, 47.7 MiB
(define (mib n)
  (define m (/ n 1048576))
  (format "~a MiB" (if (integer? m) m (/ (round (* 10.0 m)) 10))))

;; install-exit-handler! : -> void
;; In the current thread (and the threads it makes from now on), exit called by a handler
;; ends its request, and called by a thread a handler started ends that thread; anywhere
;; else, the exit handler that was there does what it did.
(define (install-exit-handler!)
  (define outer (exit-handler))
  (unless (request-exit? outer)
    (exit-handler (request-exit outer))))

;; An exit handler that escapes to call-here's prompt where there is one; in a thread a
;; handler started, ends that thread; else calls outer.
(struct request-exit (outer)
  #:property prop:procedure
  (λ (self v)
    (cond
      [(continuation-prompt-available? exit-tag) (abort-current-continuation exit-tag)]
      [(handler-request)
       => (λ (r)
            (log-ended r "a thread its handler started called exit: that thread ended")
            (kill-thread (current-thread)))]
      [else ((request-exit-outer self) v)])))
