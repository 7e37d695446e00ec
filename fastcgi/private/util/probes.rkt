#lang racket/base
;; Where the server relies on something Racket or web-server does not document (an
;; unchecked constructor from a `private` submodule, a Chez Scheme primitive, the runtime's
;; own descriptors), the module that relies on it checks it once, at load, with a probe,
;; and takes a slower documented way when the probe fails, saying so in one line that
;; names the Racket version: a newer Racket then runs the server a little slower rather
;; than wrongly. What cannot be done another way is refused at load, naming the version
;; too, rather than failing under load.
;;
;; A probe answers #t, or the reason it failed as a phrase ("takes 9 arguments, expected
;; 8"); a probe that raises failed, its message the reason.
(require "log.rkt")
(provide assumption-holds?
         assumption-required!
         probe-line
         arity-probe
         reads-back-probe
         take-pending-probe-lines!)

;; probe-line : string string string -> string
;; "Racket 8.7: WHAT: REASON: FALLBACK", on one line of plain ASCII.
(define (probe-line what reason fallback)
  (log-escape (format "Racket ~a: ~a: ~a: ~a" (version) what reason fallback)))

;; run-probe : (-> (or/c #t string)) -> (or/c #t string)
(define (run-probe probe)
  ;; (the first line of its message: what follows is the detail of a contract's)
  (with-handlers ([exn:fail? (λ (e) (format "its probe raised: ~a" (car (regexp-split #rx"\n" (exn-message e)))))])
    (define r (probe))
    (if (or (eq? r #t) (string? r)) r (format "its probe answered ~.s" r))))

;; assumption-holds? : string (-> (or/c #t string)) string -> boolean
;; Whether what the probe checks holds; when not, the line (probe-line) at warning, and #f:
;; the caller takes the way fallback describes.
(define (assumption-holds? what probe fallback)
  (define r (run-probe probe))
  (or (eq? r #t)
      (begin (warn! (probe-line what r fallback)) #f)))

;; assumption-required! : string (-> (or/c #t string)) string -> void
;; The same where there is no other way: an exception whose message is the line.
(define (assumption-required! what probe consequence)
  (define r (run-probe probe))
  (unless (eq? r #t)
    (raise (exn:fail:unsupported (string-append "fastcgi: " (probe-line what r consequence))
                                 (current-continuation-marks)))))

;; The lines of probes that failed while no receiver took the fastcgi topic's warnings:
;; the probes run when their modules load, before a process starts its logging
;; (os/logging.rkt), which then logs these.
(define pending '())

;; warn! : string -> void
(define (warn! line)
  (if (log-level? fastcgi-logger 'warning 'fastcgi)
      (log-fastcgi-warning "~a" line)
      (set! pending (cons line pending))))

;; take-pending-probe-lines! : -> (listof string) ; oldest first, and forgotten
(define (take-pending-probe-lines!)
  (begin0 (reverse pending) (set! pending '())))

;; arity-probe : procedure procedure-arity -> (or/c #t string)
;; #t when proc takes exactly n arguments (or an arity's counts).
(define (arity-probe proc n)
  (cond
    [(not (procedure? proc)) (format "is ~.s, not a procedure" proc)]
    [(equal? (procedure-arity proc) n) #t]
    [else (format "takes ~a arguments, expected ~a" (arity->phrase (procedure-arity proc)) (arity->phrase n))]))

;; arity->phrase : procedure-arity -> string ; "9", "2 or 3", "at least 1"
(define (arity->phrase a)
  (cond
    [(exact-integer? a) (number->string a)]
    [(arity-at-least? a) (format "at least ~a" (arity-at-least-value a))]
    [else (let loop ([as a])
            (cond [(null? (cdr as)) (arity->phrase (car as))]
                  [else (string-append (arity->phrase (car as)) " or " (loop (cdr as)))]))]))

;; reads-back-probe : procedure (listof any) (listof (any -> any)) [(listof any)] -> (or/c #t string)
;; A value made by make from args whose fields, read by readers (the documented
;; accessors, in the order of args), are expected (equal?; args unless given): the
;; constructor puts each field where the accessors look.
(define (reads-back-probe make args readers [expected args])
  (define v (apply make args))
  (or (for/or ([a (in-list expected)] [read (in-list readers)] [i (in-naturals 1)])
        (define got (read v))
        (and (not (equal? got a))
             (format "its field ~a reads back as ~.s, expected ~.s" i got a)))
      #t))
