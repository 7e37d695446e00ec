#lang racket/base
;; Continuation managers for servlets served by a pool of worker processes.
;;
;; web-server's managers number instances and continuations with a counter per process and
;; salt them with (random 100000000): in a pool, two workers hand out the same ids, and an id
;; can be guessed. A routed manager wraps any web-server manager (the threshold LRU one by
;; default) and owns both problems:
;;   - an instance id names the worker that owns it: (local id << 32) | worker id, so that
;;     any worker can tell from a continuation URL which worker holds the continuation
;;     (owner-of);
;;   - a salt is the inner manager's salt plus 10^8 times 96 bits of an HMAC-SHA256, under a
;;     key made at the worker's start, of the outer instance, the continuation id and the
;;     inner salt: a URL that was not handed out fails the check before any look-up.
;; Instances are made in the inner manager only when they store their first continuation:
;; web-server makes one for every request that does not resume a continuation, and the LRU
;; manager keeps an instance until its collector runs (every 10 minutes when memory is
;; low), which for a servlet that never suspends is a table entry per request for nothing.
(require "../util/entropy.rkt"
         "../util/lazy.rkt"
         "../util/hmac.rkt"
         web-server/http/request-structs
         web-server/http/response-structs
         web-server/managers/lru
         web-server/managers/manager)
(provide make-routed-manager
         routed-manager?
         routed-manager-manager
         routed-manager-worker-id
         routed-manager-new-instance!
         routed-manager-live-sessions
         routed-manager-sweep!
         make-default-manager
         memory-limit
         owner-of
         expired-page
         worker-bits)

;; Bits of an instance id that name the worker.
(define worker-bits 32)
(define worker-mask (sub1 (arithmetic-shift 1 worker-bits)))
(define salt-base 100000000)               ; web-server's salts are below this

;; owner-of : number -> (or/c natural #f) ; the worker id in an instance id
(define (owner-of instance-id)
  (and (exact-nonnegative-integer? instance-id) (bitwise-and instance-id worker-mask)))

;; inner: the wrapped manager. locals: outer instance id -> local, for the instances that
;; stored a continuation (lock guards it). next: a box, the last local id handed out.
;; expired: the inner manager's instance expiration handler. memory: #f, or the bytes of
;; memory past which sessions are ended at once (the least recently used half, at most
;; once a second). clock: uses so far, for "least recently used". manager: the
;; web-server manager to hand to the servlet (current-servlet-manager).
(struct routed-manager (inner worker-id key lock locals next expired memory
                              [clock #:mutable] [last-evict-ms #:mutable] [manager #:mutable]))

;; An instance that stored a continuation: its id in the inner manager, its last use.
(struct local (inner [used #:mutable]))

;; make-routed-manager : manager natural [#:memory (or/c natural #f)] -> routed-manager
;; memory: a hard bound (bytes of the process's memory use, as memory-limit gives it) on
;; top of the inner manager's own expiry. web-server's LRU manager
;; ages continuations while memory is over its threshold, 24 steps of 5 s: a flood of
;; new sessions holds two minutes' worth of them, as much memory as the flood is fast.
;; With memory, a store that finds the process over it first ends the least recently used
;; half of the sessions (their continuations are dropped at once; their URLs get the
;; expiration page), at most once a second.
(define (make-routed-manager inner worker-id #:memory [memory #f])
  (unless (<= 0 worker-id worker-mask)
    (raise-argument-error 'make-routed-manager "worker id below 2^32" worker-id))
  (define rm (routed-manager inner worker-id (random-bytes 32) (make-semaphore 1)
                             (make-hasheqv) (box 0) (instance-expiration-handler inner) memory
                             0 -inf.0 #f))
  (set-routed-manager-manager!
   rm
   (make-manager (λ (expire) (routed-manager-new-instance! rm))
                 (λ (id secs) ((manager-adjust-timeout! inner) (inner-id rm id #t) secs))
                 (λ (id) ((manager-clear-continuations! inner) (inner-id rm id #t)))
                 (λ (id k expiration-handler) (store! rm id k expiration-handler))
                 (λ (id k-id salt) (lookup rm manager-continuation-lookup id k-id salt))
                 (λ (id k-id salt) (lookup rm manager-continuation-peek id k-id salt))))
  rm)

;; routed-manager-new-instance! : routed-manager -> natural
;; A fresh outer instance id; nothing is made in the inner manager yet (no lock: every
;; request that does not resume a continuation comes here).
(define (routed-manager-new-instance! rm)
  (define next (routed-manager-next rm))
  (let retry ()
    (define n (unbox next))
    (if (box-cas! next n (add1 n))
        (bitwise-ior (arithmetic-shift (add1 n) worker-bits) (routed-manager-worker-id rm))
        (retry))))

;; inner-id : routed-manager number boolean -> (or/c number #f)
;; The inner instance of an outer id; with make?, made when there is none yet (only an id
;; of this worker's: another's, or one never handed out, raises no-instance).
(define (inner-id rm id make?)
  (define (no-instance)
    (raise (exn:fail:servlet-manager:no-instance
            (format "No instance for id: ~a" id) (current-continuation-marks)
            (routed-manager-expired rm))))
  (unless (and (exact-positive-integer? id)
               (eqv? (owner-of id) (routed-manager-worker-id rm))
               (<= (arithmetic-shift id (- worker-bits)) (unbox (routed-manager-next rm))))
    (no-instance))
  (call-with-semaphore
   (routed-manager-lock rm)
   (λ ()
     (define clock (add1 (routed-manager-clock rm)))
     (set-routed-manager-clock! rm clock)
     (define l (hash-ref (routed-manager-locals rm) id #f))
     (cond
       [l (set-local-used! l clock) (local-inner l)]
       [make?
        (define inner ((manager-create-instance (routed-manager-inner rm)) void))
        (hash-set! (routed-manager-locals rm) id (local inner clock))
        inner]
       [else (no-instance)]))))

;; store! : routed-manager number any (or/c #f procedure) -> (list number number)
(define (store! rm id k expiration-handler)
  (bound-memory! rm)
  (define inner (inner-id rm id #t))
  (define k-id+salt ((manager-continuation-store! (routed-manager-inner rm)) inner k expiration-handler))
  (define k-id (car k-id+salt))
  (define salt (cadr k-id+salt))
  (list k-id (+ salt (* salt-base (signature rm id k-id salt)))))

;; lookup : routed-manager (manager -> procedure) number number number -> any
(define (lookup rm which id k-id salt)
  (define inner (inner-id rm id #f))
  (define inner-salt (and (exact-nonnegative-integer? salt) (modulo salt salt-base)))
  (unless (and inner-salt (exact-nonnegative-integer? k-id)
               (= salt (+ inner-salt (* salt-base (signature rm id k-id inner-salt)))))
    (raise (exn:fail:servlet-manager:no-continuation
            (format "No continuation for id: ~a" k-id) (current-continuation-marks)
            (routed-manager-expired rm))))
  (with-handlers ([exn:fail:servlet-manager:no-instance?
                   (λ (e)
                     (forget! rm id)
                     (raise e))])
    ((which (routed-manager-inner rm)) inner k-id inner-salt)))

;; signature : routed-manager number number number -> natural ; 96 bits
(define (signature rm id k-id salt)
  (define mac (hmac-sha256 (routed-manager-key rm) (string->bytes/utf-8 (format "~a ~a ~a" id k-id salt))))
  (for/fold ([n 0]) ([b (in-bytes mac 0 12)]) (+ (* n 256) b)))

;; bound-memory! : routed-manager -> void
;; Past the memory bound (and not in the last second, unless past it by a quarter): the
;; least recently used half of the sessions end now, their continuations cleared in the
;; inner manager, and a major collection returns their memory. Once a second alone let a
;; fast enough flood of new sessions add any amount of memory between two evictions; the
;; quarter makes the bound hold at any rate, at the price of more major collections while
;; a flood lasts.
(define (bound-memory! rm)
  (define memory (routed-manager-memory rm))
  (define use (current-memory-use))
  (when (and memory (> use memory)
             (or (> use (* 5/4 memory))
                 (> (current-inexact-monotonic-milliseconds) (+ (routed-manager-last-evict-ms rm) 1000))))
    (define victims
      (call-with-semaphore
       (routed-manager-lock rm)
       (λ ()
         (set-routed-manager-last-evict-ms! rm (current-inexact-monotonic-milliseconds))
         (define by-use (sort (hash->list (routed-manager-locals rm)) < #:key (λ (p) (local-used (cdr p)))))
         (define n (quotient (add1 (length by-use)) 2))
         (for/list ([p (in-list by-use)] [_ (in-range n)])
           (hash-remove! (routed-manager-locals rm) (car p))
           (local-inner (cdr p))))))
    (define clear! (manager-clear-continuations! (routed-manager-inner rm)))
    (for ([inner (in-list victims)])
      (with-handlers ([exn:fail? void]) (clear! inner)))
    ;; give their memory back now: the next check then sees what the sessions left hold,
    ;; not garbage (a pause of one major collection, at most once a second, only while
    ;; the worker is past its bound)
    (collect-garbage)))

;; forget! : routed-manager number -> void
(define (forget! rm id)
  (call-with-semaphore (routed-manager-lock rm) (λ () (hash-remove! (routed-manager-locals rm) id))))

;; routed-manager-sweep! : routed-manager -> natural
;; Forgets the instances the inner manager no longer has (it expired them); the count of
;; those it still has: the live sessions of this worker.
(define (routed-manager-sweep! rm)
  (define ids (call-with-semaphore (routed-manager-lock rm)
                                   (λ () (hash->list (routed-manager-locals rm)))))
  (define peek (manager-continuation-peek (routed-manager-inner rm)))
  (for/sum ([p (in-list ids)])
    ;; continuation 0 is never handed out: the answer says whether the instance lives
    (define live?
      (with-handlers ([exn:fail:servlet-manager:no-instance? (λ (e) #f)]
                      [exn:fail? (λ (e) #t)])
        (peek (local-inner (cdr p)) 0 0)
        #t))
    (cond [live? 1] [else (forget! rm (car p)) 0])))

;; routed-manager-live-sessions : routed-manager -> natural ; as of the last sweep
(define (routed-manager-live-sessions rm)
  (call-with-semaphore (routed-manager-lock rm) (λ () (hash-count (routed-manager-locals rm)))))

;; instance-expiration-handler : manager -> (or/c #f procedure)
(define (instance-expiration-handler inner)
  ;; the LRU and none managers keep theirs in a struct field of their own; ask by a
  ;; look-up that cannot succeed
  (with-handlers ([exn:fail:servlet-manager:no-instance? exn:fail:servlet-manager:no-instance-expiration-handler]
                  [exn:fail:servlet-manager:no-continuation? exn:fail:servlet-manager:no-continuation-expiration-handler]
                  [exn:fail? (λ (e) #f)])
    ((manager-continuation-peek inner) -1 0 0)
    #f))

;; expired-page : request -> response ; serve/servlet's own expiration page
(define (expired-page req)
  (response/xexpr `(html (head (title "Page Has Expired."))
                         (body (p "Sorry, this page has expired. Please go back.")))))

;; response/xexpr : xexpr -> response (web-server/http/xexpr, loaded with the page)
(define-lazy web-server/http/xexpr response/xexpr)

;; memory-limit : natural -> natural
;; The process's memory use now (after a major collection), plus budget: the bound for
;; make-default-manager and make-routed-manager. web-server compares its threshold with
;; the whole process's use, which with web-server/servlet loaded on Racket CS is already
;; over serve/servlet's 128 MiB: every continuation would be under pressure
;; from the start (2 minutes to live). Here the budget is what sessions may add.
(define (memory-limit budget)
  (collect-garbage)
  (+ (current-memory-use) budget))

;; make-default-manager : #:limit natural #:timeout real -> manager
;; serve/servlet's manager: web-server's threshold LRU manager with serve/servlet's
;; expiration page. A continuation has 24 life points, loses one every timeout/24 seconds
;; and gains one each time it is used, so it lives about `timeout` seconds after its last
;; use; while the process uses more than `limit` bytes (memory-limit), every continuation
;; also loses a point every 5 s (all of them are gone within 2 minutes of pressure, the
;; least used first). serve/servlet's own: 4 hours, and 128 MiB for the whole process.
(define (make-default-manager #:limit limit #:timeout timeout)
  (create-LRU-manager expired-page 5 (/ timeout 24) (λ () (>= (current-memory-use) limit))
                      #:initial-count 24 #:inform-p void))
