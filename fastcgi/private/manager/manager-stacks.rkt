#lang racket/base
;; The running requests' stacks, on demand (`raco fastcgi ctl stacks`, the status path's
;; ?stacks): an asker connects to the control socket and says `stacks` (lines.rkt); the
;; manager asks every worker it can reach (`stacks N`), each answers with its running
;; requests (worker/stacks.rkt), and the manager writes the asker one line of JSON:
;;   {"workers": [{"pid", "id", "generation", "state", "answered", "requests": [...]}]}
;; once all have answered, or after stacks-timeout-ms: a worker that has not answered by
;; then is listed with answered false (it may be stuck in a foreign call, or stopped).
;; The manager never waits for it: the answers are messages, the deadline is the tick's.
(require racket/list
         "../util/clock.rkt"
         "../util/jsexpr.rkt"
         "../worker/lines.rkt"
         "manager-state.rkt")
(provide stacks-asked!
         stacks-answered!
         stacks-deadlines!
         stacks-timeout-ms)

(define stacks-timeout-ms 1000.)

;; An ask under way: the asker's port, the pids asked (-> #t), their answers (pid ->
;; list of requests), and when it is answered whatever came.
(struct query (out awaiting results deadline-ms))

;; stacks-asked! : manager output-port -> void
(define (stacks-asked! m out)
  (define seq (manager-query-seq m))
  (define n (add1 (unbox seq)))
  (set-box! seq n)
  (define line (message-line 'manager 'stacks #:query n))
  (define awaiting (make-hasheqv))
  (for ([w (in-list (live-workers m))] #:when (worker-control w))
    (when (with-handlers ([exn:fail? (λ (e) #f)])
            (write-string line (worker-control w))
            (newline (worker-control w))
            (flush-output (worker-control w))
            #t)
      (hash-set! awaiting (worker-pid w) #t)))
  (define q (query out awaiting (make-hasheqv) (+ (now-ms) stacks-timeout-ms)))
  (hash-set! (manager-queries m) n q)
  (when (zero? (hash-count awaiting)) (answer! m n q)))

;; stacks-answered! : manager worker natural string -> void ; a worker's answer to ask n
(define (stacks-answered! m w n json)
  (define q (hash-ref (manager-queries m) n #f))
  (when (and q (hash-ref (query-awaiting q) (worker-pid w) #f))
    (define requests (with-handlers ([exn:fail? (λ (e) #f)]) (string->jsexpr json)))
    (hash-remove! (query-awaiting q) (worker-pid w))
    (when (list? requests) (hash-set! (query-results q) (worker-pid w) requests))
    (when (zero? (hash-count (query-awaiting q))) (answer! m n q))))

;; stacks-deadlines! : manager flonum -> void ; asks past their time are answered as they are
(define (stacks-deadlines! m now)
  (for ([(n q) (in-hash (hash-copy (manager-queries m)))] #:when (> now (query-deadline-ms q)))
    (answer! m n q)))

;; answer! : manager natural query -> void
;; The asker gets every live worker, with what it answered; written from a thread of its
;; own (an asker that does not read holds up nothing), then the connection is closed.
(define (answer! m n q)
  (hash-remove! (manager-queries m) n)
  (define workers
    (for/list ([w (in-list (sort (live-workers m) < #:key worker-id))])
      (define requests (hash-ref (query-results q) (worker-pid w) #f))
      (hasheq 'pid (worker-pid w) 'id (worker-id w) 'generation (worker-gen w)
              'state (symbol->string (worker-state w))
              'answered (and requests #t)
              'requests (or requests '()))))
  (define out (query-out q))
  (define text (jsexpr->string (hasheq 'workers workers)))
  (thread (λ ()
            (with-handlers ([exn:fail? void])
              (write-string text out)
              (newline out)
              (flush-output out))
            (with-handlers ([exn:fail? void]) (close-output-port out)))))
