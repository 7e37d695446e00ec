#lang racket/base
;; fastcgi/private/engine/log-limit.rkt: the notes of a new server, and the lines warn-limited!
;; and warn-once-a-second! write or only count. The second's window is set by hand (its
;; start moved to +inf.0 holds the window, to -inf.0 opens a new one), so no test waits.
(require racket/list
         rackunit
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/engine/log-limit.rkt"
         (only-in "../fastcgi/private/engine/server.rkt" make-server)
         (only-in "../fastcgi/private/engine/wire.rkt" server-notes))

;; written : log-receiver -> (listof string) ; the warnings logged so far, prefix dropped
(define (written receiver)
  (let loop ([acc '()])
    (define v (sync/timeout 0 receiver))
    (if v
        (loop (cons (regexp-replace #rx"^fastcgi: " (vector-ref v 1) "") acc))
        (reverse acc))))

;; window! : server symbol real -> void ; sets the start of the kind's current second
(define (window! srv kind start)
  (vector-set! (hash-ref (server-notes srv) kind) 0 start))

(test-case "make-notes: every kind, no line written or held back yet"
  (define notes (make-notes))
  (check-equal? (sort (hash-keys notes) symbol<?)
                (sort '(shed overloaded unknown-role rejected body-over connection-buffer
                        handler-behind protocol bad-uri bad-body bad-continuation denied handover)
                      symbol<?))
  (for ([(k v) (in-hash notes)])
    (check-equal? v (vector -inf.0 0 0) (format "~a" k))))

(test-case "warn-limited!: ten lines of a kind a second, the rest counted, then said"
  (define srv (make-server void))
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (warn-limited! srv 'protocol (λ () "line 1"))
  (window! srv 'protocol +inf.0)
  (for ([i (in-range 2 13)])
    (warn-limited! srv 'protocol (λ () (format "line ~a" i))))
  (check-equal? (written receiver) (for/list ([i (in-range 1 11)]) (format "line ~a" i)))
  ;; another kind has its own ten
  (warn-limited! srv 'denied (λ () "denied 1"))
  (check-equal? (written receiver) '("denied 1"))
  ;; the next second: the next line says how many were held back, and then none are
  (window! srv 'protocol -inf.0)
  (warn-limited! srv 'protocol (λ () "line 13"))
  (warn-limited! srv 'protocol (λ () "line 14"))
  (check-equal? (written receiver) '("line 13 (2 more like it not written)" "line 14")))

(test-case "warn-once-a-second!: one line a second, with the count of those not written"
  (define srv (make-server void))
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (warn-once-a-second! srv 'overloaded "OVERLOADED answers" (λ () "overloaded"))
  (window! srv 'overloaded +inf.0)
  (for ([i (in-range 3)])
    (warn-once-a-second! srv 'overloaded "OVERLOADED answers" (λ () "overloaded")))
  (check-equal? (written receiver) '("overloaded; 0 more OVERLOADED answers since the last such line"))
  (window! srv 'overloaded -inf.0)
  (warn-once-a-second! srv 'overloaded "OVERLOADED answers" (λ () "overloaded again"))
  (check-equal? (written receiver) '("overloaded again; 3 more OVERLOADED answers since the last such line")))

;; kinds-used : -> (listof symbol)
;; Every kind a module of the server passes to warn-limited! or warn-once-a-second!, read
;; as data from the sources (a kind missing from the notes fails only when its line is due).
(define (kinds-used)
  (define dir (collection-file-path "private" "fastcgi"))
  (define found '())
  (define (walk d)
    (when (pair? d)
      (when (and (memq (car d) '(warn-limited! warn-once-a-second!)) (list? d) (>= (length d) 3)
                 (pair? (caddr d)) (eq? (car (caddr d)) 'quote))
        (set! found (cons (cadr (caddr d)) found)))
      (walk (car d))
      (walk (cdr d))))
  (for ([f (in-directory dir)] #:when (regexp-match? #rx"[.]rkt$" (path->string f))
                               #:unless (regexp-match? #rx"compiled" (path->string f)))
    (parameterize ([read-accept-reader #t] [read-accept-lang #t])
      (call-with-input-file f (λ (in) (read-line in) (let loop () (define d (read in)) (unless (eof-object? d) (walk d) (loop)))))))
  (remove-duplicates found))

(test-case "every kind the server's modules log under has its notes"
  (define used (kinds-used))
  (check-true (> (length used) 10) (format "the scan finds the calls: ~s" used))
  (define notes (server-notes (make-server void)))
  (for ([k (in-list used)])
    (check-true (hash-has-key? notes k) (format "~a has no notes: its first line raises" k))))
