#lang racket/base
;; The routed continuation manager (fastcgi/private/servlet/sessions.rkt) and the check of
;; continuation URLs (continuation-of in fastcgi/private/servlet/servlet.rkt), in this process, no
;; server: instance ids that name their worker and never collide between workers, salts
;; that cannot be forged, instances made only when a continuation is stored, the sweep's
;; count of live sessions; and a table of path parameters, good and hostile, against what
;; web-server itself reads from them.
(require net/url
         racket/list
         rackunit
         web-server/managers/lru
         web-server/managers/manager
         (only-in web-server/servlet/web continuation-url?)
         "../fastcgi/private/servlet/sessions.rkt"
         (only-in "../fastcgi/private/servlet/servlet.rkt" continuation-of))

;; a manager that never expires anything (its collector runs once an hour)
(define (lru) (create-LRU-manager #f 3600 3600 (λ () #f) #:initial-count 24 #:inform-p void))

;; store : routed-manager natural any -> (list instance k-id salt)
(define (store rm id v)
  (cons id ((manager-continuation-store! (routed-manager-manager rm)) id v #f)))

;; lookup : routed-manager (list instance k-id salt) -> any
(define (lookup rm k) (apply (manager-continuation-lookup (routed-manager-manager rm)) k))

(define-syntax-rule (check-raises pred expr msg)
  (check-true (with-handlers ([pred (λ (e) #t)] [(λ (e) #t) (λ (e) (list 'wrong-exception e))])
                expr
                #f)
              msg))

;; ---------------------------------------------------------------------------------------

(test-case "owner-of: the worker bits of an instance id; #f for what is not an id"
  (check-equal? worker-bits 32)
  (check-equal? (owner-of (bitwise-ior (arithmetic-shift 5 32) 7)) 7)
  (check-equal? (owner-of (arithmetic-shift 1 32)) 0)
  (check-equal? (owner-of (bitwise-ior (arithmetic-shift 99 32) #xFFFFFFFF)) #xFFFFFFFF)
  (check-equal? (owner-of (+ (arithmetic-shift 1 100) 3)) 3 "a bignum id")
  (for ([v (list -1 1.5 'x "1" #f)])
    (check-false (owner-of v) (format "~s" v))))

(test-case "two workers' instance ids never collide and each carries its worker"
  ;; the inner managers number from 1 alike: without the routing both would hand out 1, 2, ...
  (define a (make-routed-manager (lru) 1))
  (define b (make-routed-manager (lru) 2))
  (define ids-a (for/list ([i 1000]) (routed-manager-new-instance! a)))
  (define ids-b (for/list ([i 1000]) (routed-manager-new-instance! b)))
  (check-equal? (length (remove-duplicates (append ids-a ids-b))) 2000)
  (check-true (andmap (λ (id) (eqv? (owner-of id) 1)) ids-a))
  (check-true (andmap (λ (id) (eqv? (owner-of id) 2)) ids-b))
  ;; and through the web-server manager interface, as web-server's setup code calls it
  (define id ((manager-create-instance (routed-manager-manager b)) void))
  (check-eqv? (owner-of id) 2)
  (check-false (memv id ids-b))
  (check-exn exn:fail:contract? (λ () (make-routed-manager (lru) (arithmetic-shift 1 32))) "worker id past 32 bits"))

(test-case "salts: the URL handed out works; a salt changed by one, the inner salt alone, another manager's: no-continuation"
  (define rm (make-routed-manager (lru) 3))
  (define id (routed-manager-new-instance! rm))
  (define k (store rm id 'the-continuation))
  (check-equal? (lookup rm k) 'the-continuation)
  (check-equal? (lookup rm k) 'the-continuation "looked up again")
  (define salt (caddr k))
  (check-true (>= salt (expt 10 8)) "the salt carries the signature above the inner salt")
  (for ([forged (list (add1 salt) (sub1 salt) (modulo salt 100000000) 0 (+ salt (expt 10 8)) (- salt))]
        [what '("salt + 1" "salt - 1" "inner salt alone" "zero" "signature + 1" "negative")])
    (check-raises exn:fail:servlet-manager:no-continuation? (lookup rm (list id (cadr k) forged)) what))
  (check-raises exn:fail:servlet-manager:no-continuation? (lookup rm (list id (add1 (cadr k)) salt))
                "the next continuation id with this salt")
  (check-raises exn:fail:servlet-manager:no-continuation? (lookup rm (list id 1.5 salt)) "a non-integer k-id")
  ;; a manager with the same worker id (a restarted worker): same ids, same inner counters,
  ;; another key
  (define again (make-routed-manager (lru) 3))
  (define id2 (routed-manager-new-instance! again))
  (check-equal? id2 id)
  (define k2 (store again id2 'other))
  (check-equal? (cadr k2) (cadr k) "the same continuation id")
  (check-raises exn:fail:servlet-manager:no-continuation? (lookup again k) "the old worker's URL")
  ;; peek checks the salt too
  (check-raises exn:fail:servlet-manager:no-continuation?
                ((manager-continuation-peek (routed-manager-manager rm)) id (cadr k) (add1 salt)) "peek"))

(test-case "an instance id of another worker, or one never handed out: no-instance, with the inner manager's handler"
  (define (expired-handler req) 'expired)
  (define rm (make-routed-manager (create-LRU-manager expired-handler 3600 3600 (λ () #f) #:initial-count 24 #:inform-p void) 4))
  (define other (make-routed-manager (lru) 5))
  (define id (routed-manager-new-instance! rm))
  (define k (store rm id 'v))
  (define k-other (store other (routed-manager-new-instance! other) 'w))
  ;; the handler's name (the LRU manager's contract wraps it)
  (define (no-instance-handler thunk)
    (with-handlers ([exn:fail:servlet-manager:no-instance?
                     (λ (e) (object-name (exn:fail:servlet-manager:no-instance-expiration-handler e)))]
                    [(λ (e) #t) (λ (e) (list 'wrong-exception e))])
      (thunk)
      'no-exception))
  (for ([bad (list (car k-other)                                    ; worker 5's
                   (bitwise-ior (arithmetic-shift 1 worker-bits) 5) ; worker 5's first
                   (+ id (arithmetic-shift 1000 worker-bits))       ; this worker's, not handed out
                   (routed-manager-new-instance! rm)                ; handed out, nothing stored
                   0 4 -1)]
        [what '("another worker's" "another worker's first" "not handed out" "no continuation stored"
                "zero" "the bare worker id" "negative")])
    (check-equal? (no-instance-handler (λ () (lookup rm (list bad (cadr k) (caddr k))))) 'expired-handler what))
  (check-equal? (no-instance-handler (λ () ((manager-clear-continuations! (routed-manager-manager rm)) (car k-other))))
                'expired-handler "clearing another worker's instance")
  (check-equal? (lookup rm k) 'v "the real one still works"))

(test-case "lazy instances: the inner manager makes one only when a continuation is first stored"
  (define inner (lru))
  (define created 0)
  (define counting
    (make-manager (λ (expire) (set! created (add1 created)) ((manager-create-instance inner) expire))
                  (manager-adjust-timeout! inner) (manager-clear-continuations! inner)
                  (manager-continuation-store! inner) (manager-continuation-lookup inner)
                  (manager-continuation-peek inner)))
  (define rm (make-routed-manager counting 6))
  (define m (routed-manager-manager rm))
  (define ids (for/list ([i 100]) ((manager-create-instance m) void)))
  (check-equal? created 0 "100 requests that never suspend: no inner instance")
  (check-equal? (routed-manager-live-sessions rm) 0)
  (define k1 (store rm (car ids) 'a))
  (check-equal? created 1)
  (store rm (car ids) 'b)
  (check-equal? created 1 "a second continuation of the same instance")
  (store rm (cadr ids) 'c)
  (check-equal? created 2)
  (check-equal? (routed-manager-live-sessions rm) 2)
  (check-equal? (lookup rm k1) 'a))

(test-case "sweep: counts the instances that hold continuations, forgets the ones the inner manager expired"
  ;; the collector runs every 0.05 s; a continuation lives 21 collections (about 1 s)
  (define rm (make-routed-manager (create-LRU-manager #f 0.05 0.05 (λ () #f) #:initial-count 20 #:inform-p void) 7))
  (define ks (for/list ([i 3]) (store rm (routed-manager-new-instance! rm) i)))
  (routed-manager-new-instance! rm)     ; a request that never suspends
  (check-equal? (routed-manager-sweep! rm) 3)
  (check-equal? (routed-manager-live-sessions rm) 3)
  (check-equal? (routed-manager-sweep! rm) 3 "a sweep expires nothing itself")
  (sleep 2)
  (check-equal? (routed-manager-sweep! rm) 0)
  (check-equal? (routed-manager-live-sessions rm) 0 "expired instances forgotten")
  (check-raises exn:fail:servlet-manager:no-instance? (lookup rm (car ks)) "an expired session")
  ;; new sessions are counted again
  (store rm (routed-manager-new-instance! rm) 'new)
  (check-equal? (routed-manager-sweep! rm) 1))

(test-case "make-default-manager: continuations live about `timeout` seconds after their last use"
  (define rm (make-routed-manager (make-default-manager #:limit (expt 2 40) #:timeout 1.2) 8))
  (define k (store rm (routed-manager-new-instance! rm) 'x))
  (sleep 0.3)
  (check-equal? (lookup rm k) 'x "alive before the timeout")
  (check-equal? (routed-manager-sweep! rm) 1)
  (sleep 2.5)
  (check-raises exn:fail:servlet-manager:no-instance? (lookup rm k) "gone after it (26 steps of 0.05 s)")
  (check-equal? (routed-manager-sweep! rm) 0))

(test-case "make-default-manager: memory pressure takes life points, it does not purge at once"
  ;; under pressure a continuation loses one of its 24 points every 5 s: seeing it expire
  ;; takes two minutes (too long here); the collector is the one checked above.
  (define rm (make-routed-manager (make-default-manager #:limit 1 #:timeout 3600) 9))
  (define k (store rm (routed-manager-new-instance! rm) 'x))
  (sleep 0.2)
  (check-equal? (lookup rm k) 'x))

(test-case "the hard memory bound: past it, a store ends the least recently used half, once a second"
  ;; a bound a tenth under what the process holds after a major collection: past it, and
  ;; (what the test allocates is far less than the margin) never by a quarter
  (collect-garbage)
  (define rm (make-routed-manager (lru) 10 #:memory (quotient (* 9 (current-memory-use)) 10)))
  (define ks (for/list ([i (in-range 10)]) (store rm (routed-manager-new-instance! rm) i)))
  (check-equal? (routed-manager-live-sessions rm) 10 "the first store ended the none there were; the rest came within the second")
  (lookup rm (car ks))                       ; the oldest, used now: the most recent use
  (sleep 1.1)
  (store rm (routed-manager-new-instance! rm) 'late)
  (check-equal? (routed-manager-live-sessions rm) 6 "5 of 10 ended, then the new one")
  (check-equal? (lookup rm (car ks)) 0 "the session used last lives")
  (for ([k (in-list (list (cadr ks) (caddr ks) (list-ref ks 5)))])
    (check-raises exn:fail:servlet-manager:no-instance? (lookup rm k) "a least recently used session ended"))
  (check-equal? (lookup rm (list-ref ks 6)) 6 "a more recent one lives")
  ;; past the bound by a quarter (a bound of 1 byte), at each store, however soon: however
  ;; fast sessions come, what they hold stays near the bound
  (define tight (make-routed-manager (lru) 12 #:memory 1))
  (define tks (for/list ([i (in-range 10)]) (store tight (routed-manager-new-instance! tight) i)))
  (check-true (< (routed-manager-live-sessions tight) 4)
              (format "stores within a second each ended half: ~a live of 10" (routed-manager-live-sessions tight)))
  (check-equal? (lookup tight (last tks)) 9 "the session stored last lives")
  ;; without a bound nothing is ended
  (define free (make-routed-manager (lru) 11))
  (for ([i (in-range 10)]) (store free (routed-manager-new-instance! free) i))
  (sleep 1.1)
  (store free (routed-manager-new-instance! free) 'late)
  (check-equal? (routed-manager-live-sessions free) 11))

(test-case "memory-limit: the process's use now plus the budget"
  (define limit (memory-limit (* 64 1024 1024)))
  (check-true (< (abs (- limit (+ (current-memory-use) (* 64 1024 1024)))) (* 16 1024 1024))))

;; ---------------------------------------------------------------------------------------
;; continuation-of: the path parameters web-server would `read`.

;; url-with : (listof (listof string)) -> url ; segments, each with its parameters
(define (url-with . segment-params)
  (url #f #f #f #f #t
       (for/list ([ps (in-list segment-params)] [i (in-naturals)])
         (path/param (format "s~a" i) ps))
       '() #f))

;; web-server's own reading, for the shapes both accept (it `read`s the parameter)
(define (web-server-k u)
  (with-handlers ([(λ (e) #t) (λ (e) 'raised)]) (continuation-url? u)))

(define deep (string-append (make-string 10000 #\() (make-string 10000 #\))))
(define big-digits (make-string 200000 #\7))

;; (list name url expected agrees-with-web-server?)
(define table
  `(("no parameter" ,(url-with '()) #f #t)
    ("a good k" ,(url-with '("((\"k\" . \"(1 2 3)\"))")) (1 2 3) #t)
    ("k with big numbers" ,(url-with '("((\"k\" . \"(18446744073709551617 2 123456789012345678901234567890)\"))"))
     (18446744073709551617 2 123456789012345678901234567890) #t)
    ("k among other pairs" ,(url-with '("((\"c\" . \"x\") (\"k\" . \"(4 5 6)\"))")) (4 5 6) #t)
    ("k in an earlier segment" ,(url-with '("((\"k\" . \"(7 8 9)\"))") '()) (7 8 9) #t)
    ("a plain token, then k" ,(url-with '("jsessionid=abc" "((\"k\" . \"(1 1 1)\"))")) (1 1 1) #t)
    ("a plain token only" ,(url-with '("jsessionid=abc")) #f #t)
    ("a number token" ,(url-with '("42")) #f #t)
    ("an alist without k" ,(url-with '("((\"c\" . \"abc\"))")) #f #t)
    ("escaped strings in a c value" ,(url-with '("((\"c\" . \"a\\\"b\\\\c\") (\"k\" . \"(1 2 3)\"))")) (1 2 3) #t)
    ("a 200 KB c value" ,(url-with (list (string-append "((\"c\" . \"" big-digits "\"))"))) #f #t)
    ;; refused: web-server would read these, and some of them hurt
    ("k missing its salt" ,(url-with '("((\"k\" . \"(1 2)\"))")) bad #f)
    ("k with four numbers" ,(url-with '("((\"k\" . \"(1 2 3 4)\"))")) bad #f)
    ("k with symbols" ,(url-with '("((\"k\" . \"(a b c)\"))")) bad #f)
    ("k negative" ,(url-with '("((\"k\" . \"(-1 2 3)\"))")) bad #f)
    ("k fractional" ,(url-with '("((\"k\" . \"(1.5 2 3)\"))")) bad #f)
    ("k not a list" ,(url-with '("((\"k\" . \"123\"))")) bad #f)
    ("k with a 200 KB salt" ,(url-with (list (string-append "((\"k\" . \"(1 2 " big-digits ")\"))"))) bad #f)
    ("truncated" ,(url-with '("((\"k\" . \"(1 2 3)\")")) bad #f)
    ("truncated in the string" ,(url-with '("((\"k\" . \"(1 2")) bad #f)
    ("a cycle #0=(#0#)" ,(url-with '("#0=(#0#)")) bad #f)
    ("a cyclic alist" ,(url-with '("#0=((\"k\" . \"(1 2 3)\") . #0#)")) bad #f)
    ("an unquoted key ((k . \"x\"))" ,(url-with '("((k . \"x\"))")) bad #f)
    ("an unquoted k with a good value" ,(url-with '("((k . \"(1 2 3)\"))")) bad #f)
    ("10000 deep" ,(url-with (list deep)) bad #f)
    ("a quoted datum" ,(url-with '("'x")) bad #f)
    ("a vector" ,(url-with '("#(1 2 3)")) bad #f)
    ("a reader extension" ,(url-with '("#reader racket/base 1")) bad #f)
    ("a symbol with bars" ,(url-with '("|a b|")) bad #f)
    ("a hash" ,(url-with '("#hash((\"k\" . \"(1 2 3)\"))")) bad #f)
    ("a bad param after a good k" ,(url-with '("((\"k\" . \"(1 2 3)\"))" "#0=(#0#)")) bad #f)
    ("a key past 16 letters" ,(url-with (list (string-append "((\"" (make-string 17 #\a) "\" . \"x\"))"))) bad #f)))

(test-case "continuation-of: a table of path parameters"
  (for ([row (in-list table)])
    (define-values (name u expected agrees?) (apply values row))
    (define t0 (current-inexact-milliseconds))
    (define got (continuation-of u))
    (define ms (- (current-inexact-milliseconds) t0))
    (check-equal? got expected name)
    (check-true (< ms 500.) (format "~a: ~a ms" name ms))
    (when agrees?
      (check-equal? (web-server-k u) (and (pair? expected) expected) (format "~a: as web-server reads it" name)))))

(test-case "continuation-of: what web-server's embed/url writes is read back as web-server reads it"
  (define insert-param (dynamic-require 'web-server/private/url-param 'insert-param))
  (for ([i 200])
    (define k (list (random 1 4294967087) (random 1 4294967087)
                    (+ (random 100000000) (* 100000000 (random 1 4294967087)))))
    (define base (string->url (list-ref '("/" "/a/b" "/a;jsessionid=1/b?x=1&y=%22" "/x;((\"c\" . \"q\\\"r\"))") (modulo i 4))))
    (define u (insert-param base "k" (format "~s" k)))
    ;; through text and back, as a browser sends it
    (define u2 (string->url (url->string u)))
    (check-equal? (continuation-of u2) k (url->string u))
    (check-equal? (continuation-url? u2) k)))
