#lang racket/base
;; A pool process's end of its control connection to the manager (a worker's: worker.rkt;
;; a loader's or the base's: loader.rkt): connecting and reading the keys, saying who it
;; is, writing its reports and reading the manager's lines, all as lines.rkt writes them.
(require "../util/log.rkt"
         "../os/logging.rkt"
         "control.rkt"
         "lines.rkt"
         "../transport/transport.rkt")
(provide connect-manager
         make-reporter
         next-manager-line
         without-prefix)

;; connect-manager : string string -> (values input-port output-port bytes bytes)
;; The control connection of the pool named prefix and the keys the manager hands on it;
;; who: how the process names itself in the fatal line it logs before it exits 3 when the
;; manager cannot be reached.
(define (connect-manager prefix who)
  (with-handlers ([exn:fail? (λ (e)
                               (log-fastcgi-fatal "~acannot reach the manager: ~a" who (log-escape (exn-message e)))
                               (flush-logging)
                               (exit 3))])
    (define-values (in out) (private-connect (control-name prefix)))
    (define-values (secret relay-key) (read-keys in 30))
    (values in out secret relay-key)))

;; make-reporter : output-port symbol -> (symbol #:FIELD value ... -> boolean)
;; Writes a message of channel (lines.rkt's 'worker or 'loader; 'greeting's too) to the
;; manager, one whole line at a time (a worker's report loop and its session sweep both
;; report); #f when the manager is gone.
(define (make-reporter out channel)
  (define lock (make-semaphore 1))
  (make-keyword-procedure
   (λ (kws vals verb)
     (define line (keyword-apply message-line kws vals
                                 (list (if (memq verb '(hello loader base)) 'greeting channel) verb)))
     (call-with-semaphore
      lock
      (λ ()
        (with-handlers ([exn:fail? (λ (e) #f)])
          (write-string line out)
          (newline out)
          (flush-output out)
          #t))))))

;; next-manager-line : input-port -> (or/c (cons symbol hash) #f eof-object)
;; The manager's next line as lines.rkt reads it (#f: none it knows); eof when the manager
;; goes away, or a break comes while it waits (SIGTERM, in a loader: loader.rkt).
(define (next-manager-line in)
  (define line
    (with-handlers ([exn:break? (λ (e) eof)]
                    [exn:fail? (λ (e) eof)])
      (sync/enable-break (wrap-evt in (λ (_) (read-line in 'linefeed))))))
  (if (eof-object? line) line (parse-line 'manager line)))

;; without-prefix : string -> string ; load-app's own errors without their "raco-fastcgi: "
(define (without-prefix msg)
  (if (regexp-match? #rx"^raco-fastcgi: " msg) (substring msg 14) msg))
