#lang racket/base
;; lines.rkt: every line between the manager and its processes, exactly as it goes on the
;; wire, made from its fields by name and read back to them; what is not a message of its
;; channel, or not of its fields' types, is read as none.
(require rackunit
         racket/list
         "../fastcgi/private/worker/lines.rkt")

;; channel verb fields (keyword -> value, as given to message-line) line
(define table
  `((greeting hello ((pid . 4711)) "hello 4711")
    (greeting loader ((pid . 12)) "loader 12")
    (greeting base ((pid . 13)) "base 13")
    (greeting board () "board")
    (greeting stacks () "stacks")
    (greeting reload ((canary-ms . 2500)) "reload 2500")
    (worker ready () "ready")
    (worker stat ((requests . 120) (active . 2) (connections . 7) (slow . 1) (shed . 0)
                  (queue-delay . 35) (sessions . 4) (log-dropped . 0) (oldest-age-ms . 1500))
            "stat requests=120 active=2 connections=7 slow=1 shed=0 queue-delay=35 sessions=4 log-dropped=0 oldest-age-ms=1500")
    (worker metrics ((counts . (0 3 5 0))) "metrics 0 3 5 0")
    (worker limit ((max-requests . 1000)) "limit 1000")
    (worker recycle ((why . "after 1000 requests (--max-requests)")) "recycle after 1000 requests (--max-requests)")
    (worker failed ((why . "cannot load app.rkt: no such file")) "failed cannot load app.rkt: no such file")
    (worker failed ((why . "")) "failed ")
    (worker beat () "beat")
    (worker stacks ((query . 4) (json . "[{\"id\":1}]")) "stacks 4 [{\"id\":1}]")
    (loader refused ((why . "the runtime's epoll set is not found")) "refused the runtime's epoll set is not found")
    (loader unsafe ((what . "descriptor 10 (/dev/null)")) "unsafe descriptor 10 (/dev/null)")
    (loader forced ((what . "a thread")) "forced a thread")
    (loader failed ((why . "x  y")) "failed x  y")
    (loader loaded ((kind . servlet) (image . 73400320)) "loaded servlet 73400320")
    (loader loaded ((kind . raw) (image . 0)) "loaded raw 0")
    (loader ready ((image . 52428800)) "ready 52428800")
    (loader forked ((id . 9) (pid . 30001)) "forked 9 30001")
    (loader forked ((id . 9) (pid . -1)) "forked 9 -1")
    (loader forked-loader ((gen . 3) (pid . 30002)) "forked-loader 3 30002")
    (manager keys ((secret . #"\1\2\377") (relay-key . #"")) "keys 0102ff ")
    (manager retire ((successors . (3 4))) "retire 3 4")
    (manager retire ((successors . ())) "retire")
    (manager fork ((id . 17)) "fork 17")
    (manager loader ((gen . 2)) "loader 2")
    (manager stacks ((query . 4)) "stacks 4")))

(define (make channel verb fields)
  (define sorted (sort fields keyword<? #:key (λ (f) (string->keyword (symbol->string (car f))))))
  (keyword-apply message-line
                 (map (λ (f) (string->keyword (symbol->string (car f)))) sorted)
                 (map cdr sorted)
                 (list channel verb)))

(test-case "each message is printed as its exact line and read back to its fields"
  (for ([row (in-list table)])
    (define-values (channel verb fields line) (apply values row))
    (check-equal? (make channel verb fields) line (format "~a ~a printed" channel verb))
    (define parsed (parse-line channel line))
    (check-equal? parsed (cons verb (for/hasheq ([f (in-list fields)]) (values (car f) (cdr f))))
                  (format "~s read" line))))

(test-case "the table covers every message of every channel"
  (for ([channel '(greeting worker loader manager)])
    (check-equal? (sort (remove-duplicates (for/list ([row table] #:when (eq? (car row) channel)) (cadr row))) symbol<?)
                  (sort (channel-specs channel) symbol<?)
                  (format "channel ~a" channel))))

(test-case "a named message: fields in any order, unknown ones passed over, missing ones absent"
  (check-equal? (parse-line 'worker "stat active=1 requests=5 newer-field=9")
                (cons 'stat (hasheq 'active 1 'requests 5)))
  (check-false (parse-line 'worker "stat requests=x"))
  (check-false (parse-line 'worker "stat requests"))
  (check-false (parse-line 'worker "stat 1 2 3 4 5 6")))

(test-case "what is not a message of its channel, or not of its fields' types, is none"
  (for ([bad '((greeting "hello") (greeting "hello x") (greeting "hello 1 2") (greeting "hello -1")
               (greeting "helo 1") (greeting "") (greeting "board ") (worker "ready 1")
               (worker "hello 5") (worker "limit") (worker "limit -3") (worker "beat ")
               (worker "metrics 1 x") (loader "loaded servlets 10") (loader "loaded raw")
               (loader "forked 9") (loader "forked x 1") (loader "forked 9 1 2")
               (manager "keys 0g 00") (manager "keys 012 00") (manager "retire 1 x")
               (manager "fork") (manager "stat requests=1") (worker "Ready")
               (worker "ready\r"))])
    (check-false (parse-line (car bad) (cadr bad)) (format "~s on ~a" (cadr bad) (car bad)))))

(test-case "a line is made only from its message's fields, each of its type"
  (check-exn exn:fail:contract? (λ () (message-line 'worker 'limit)))
  (check-exn exn:fail:contract? (λ () (message-line 'worker 'limit #:max-requests 1 #:extra 2)))
  (check-exn exn:fail:contract? (λ () (message-line 'worker 'limit #:max-requests -1)))
  (check-exn exn:fail:contract? (λ () (message-line 'worker 'failed #:why "two\nlines")))
  (check-exn exn:fail:contract? (λ () (message-line 'loader 'loaded #:kind 'other #:image 1)))
  (check-exn exn:fail:contract? (λ () (message-line 'worker 'nonesuch)))
  (check-exn exn:fail:contract? (λ () (message-line 'nochannel 'ready))))
