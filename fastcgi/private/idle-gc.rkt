#lang racket/base
;; Out-of-band major collection (--gc-when-idle): a worker runs its major collection
;; between requests, so that the runtime's own rarely falls in the middle of one.
;;
;; The rule. Racket CS collects fully once the memory in use has about doubled since the
;; last major collection (rumble/memory.ss: bytes allocated >= 2 x what the last one left;
;; measured as current-memory-use, its majors come somewhat before that). A worker
;; collects early, out of band, once the memory in use has grown by three fifths of what
;; the last major collection left (idle-collect-due?), and only at an idle moment: no
;; handler running on its servers and no request arriving for quiet-ms. It never starts
;; with a request in flight: the last look and the collection are one atomic step (no
;; other Racket thread runs between them); a request that arrives during the collection
;; waits for it, as it would for the runtime's. Every major collection, its own or the
;; runtime's, resets the rule (the GC:major log topic says what each one left). With the
;; option, a worker also collects once when it starts, before it takes requests, so that
;; the rule starts from what the app really holds.
(require ffi/unsafe/atomic
         "log.rkt"
         "wire.rkt")
(provide start-idle-collector!
         idle-collect-due?)

;; How long no request may arrive before an idle worker collects: short, since under a
;; steady load the gaps between requests are short too (a longer one would never come).
(define quiet-ms 1)
;; How often the rule is looked at while requests run: when it holds, for the moment
;; the worker is idle; when it does not, for the memory that the requests add.
(define due-poll-ms 2)
(define check-ms 100)

;; idle-collect-due? : natural natural -> boolean
;; in-use: the memory in use now; left: what the last major collection left. The share is
;; a compromise: at half, the young generations' ups and downs alone reach it and a worker
;; collected far more often than the runtime would; near the whole, the runtime's own
;; collection comes first.
(define (idle-collect-due? in-use left)
  (>= (* 5 in-use) (* 8 left)))

;; What Racket logs for each collection (the GC topics' message data).
(struct gc-info (mode pre-amount pre-admin-amount code-amount post-amount post-admin-amount
                      start-process-time end-process-time start-time end-time)
  #:prefab)

;; start-idle-collector! : (listof server) (natural -> any) -> thread
;; Collects once now, then between requests by the rule above, each time with a debug
;; line; collected gets how many there have been after each one between requests.
(define (start-idle-collector! servers collected)
  (define majors (make-log-receiver (current-logger) 'debug 'GC:major))
  (collect-garbage 'major)
  (define (idle?) (for/and ([s (in-list servers)]) (eqv? 0 (unbox (server-running s)))))
  (thread
   (λ ()
     (let loop ([left (current-memory-use)] [n 0])
       (define due? (idle-collect-due? (current-memory-use) left))
       ;; posted at the next request, if registered (only while idle)
       (define arrived (make-semaphore 0))
       (define idle-now? (for/and ([s (in-list servers)]) (server-on-next-request! s arrived idle?)))
       (define woke
         (sync/timeout (and (or due? (not idle-now?))
                            (/ (cond [(and due? idle-now?) quiet-ms] [due? due-poll-ms] [else check-ms]) 1000.))
                       (wrap-evt arrived (λ (_) 'request))
                       majors))
       (cond
         [(vector? woke)
          (define info (vector-ref woke 2))
          (loop (if (gc-info? info) (gc-info-post-amount info) left) n)]
         [(and (not woke) due? idle-now?)
          (define before (current-memory-use))
          (define t0 (current-inexact-monotonic-milliseconds))
          (cond
            [(collect-if-idle! idle? arrived)
             (define ms (- (current-inexact-monotonic-milliseconds) t0))
             (define after (current-memory-use))
             (log-fastcgi-debug "idle collection ~a: major collection between requests in ~a ms, ~a MiB in use before, ~a MiB after"
                                (add1 n) (inexact->exact (round ms)) (mib before) (mib after))
             (collected (add1 n))
             ;; (its GC:major message may come later: what it left is known now)
             (loop after (add1 n))]
            [else (loop left n)])]
         [else (loop left n)])))))

;; collect-if-idle! : (-> boolean) semaphore -> boolean
;; A major collection if no handler runs and no request arrived: the look and the
;; collection with no other Racket thread running between them.
(define (collect-if-idle! idle? arrived)
  (start-atomic)
  (define go? (and (idle?) (not (semaphore-try-wait? arrived))))
  (when go? (collect-garbage 'major))
  (end-atomic)
  go?)

;; mib : natural -> natural
(define (mib n) (quotient n 1048576))
