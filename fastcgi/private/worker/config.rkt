#lang racket/base
;; The configuration of `raco fastcgi serve`: one struct, serve-config, whose fields and
;; defaults are stated once, in the table below. The command line builds it (serve-cli.rkt);
;; the manager (manager.rkt and its pieces), its workers and the single process
;; (worker.rkt, single.rkt), `serve --check` (check.rkt) and `dev`'s app process read it with its
;; accessors. A worker gets it on its command line (worker-main.rkt), as does `dev`'s app
;; process (dev-child.rkt): write-serve-config and read-serve-config are the one place where
;; it is written out and read back. It never holds a secret: the manager reads --secret-file
;; and hands the secret to its workers over the control socket (control.rkt).
(require (for-syntax racket/base
                     racket/syntax)
         racket/future
         "app.rkt"
         "../util/limits.rkt"
         "../transport/transport.rkt")
(provide
 (except-out (struct-out serve-config) serve-config)
 make-serve-config
 default-serve-config
 config-memory-ceiling
 serve-config-worker-limits
 serve-config-listener-options
 serve-config-for-worker
 serve-config->hash
 hash->serve-config
 write-serve-config
 read-serve-config)

;; define-config : defines the struct (transparent), its keyword constructor (a keyword per
;; field, its default the field's; a default may name the fields above it), and its
;; conversions to and from an immutable hasheq keyed by field name.
(define-syntax (define-config stx)
  (syntax-case stx ()
    [(_ name make ->hash hash-> [field default] ...)
     (let* ([fields (syntax->list #'(field ...))]
            [kws (for/list ([f (in-list fields)])
                   (string->keyword (symbol->string (syntax-e f))))])
       (with-syntax ([(get ...) (for/list ([f (in-list fields)]) (format-id #'name "~a-~a" #'name f))]
                     [(formal ...) (apply append (for/list ([k (in-list kws)] [fd (in-list (syntax->list #'([field default] ...)))])
                                                   (list k fd)))])
         #'(begin
             (struct name (field ...) #:transparent)
             (define (make formal ...) (name field ...))
             (define (->hash c) (make-immutable-hasheq (list (cons 'field (get c)) ...)))
             (define known '(field ...))
             (define (hash-> h)
               (define ks (sort (for/list ([k (in-hash-keys h)] #:when (memq k known)) k) symbol<?))
               (keyword-apply make
                              (for/list ([k (in-list ks)]) (string->keyword (symbol->string k)))
                              (for/list ([k (in-list ks)]) (hash-ref h k))
                              '())))))]))

;; serve-config : the options of `raco fastcgi serve` (the manual's option list says what
;; each does), then what the manager sets for each worker it starts.
(define-config serve-config make-serve-config serve-config->hash hash->serve-config
  [app #f]                              ; the application file, a complete path (a string)
  ;; the listening socket: its settings' defaults are the transport layer's
  ;; (serve-config-listener-options)
  [listen #f]                           ; #f: inherited (fd 0, or systemd socket activation)
  [backlog (listener-options-backlog default-listener-options)]
  [socket-mode (listener-options-socket-mode default-listener-options)]
  [socket-owner (listener-options-socket-owner default-listener-options)] ; a name or a uid
  [socket-group (listener-options-socket-group default-listener-options)] ; a name or a gid
  [allowed-clients #f]                  ; the unparsed list; #f: everyone
  ;; the pool
  [pm 'static]                          ; static, dynamic or ondemand
  [workers (processor-count)]
  [min-spare 1]
  [max-spare (max min-spare workers)]
  [max-workers (if (eq? pm 'static) workers (* 2 workers))]
  [idle-timeout 10]                     ; seconds (ondemand)
  [max-requests #f]                     ; #f: never recycled for it
  [max-requests-jitter 0]               ; each worker's limit drawn in [max-requests, + this]
  [max-memory #f]                       ; bytes; #f: never recycled for it
  [max-memory-hard #f]                  ; bytes; #f: 2 x max-memory (config-memory-ceiling)
  [graceful-timeout 30]                 ; seconds
  [start-timeout 60]                    ; seconds
  [preload 'auto]                       ; load once and fork the workers: 'auto (when safe), #t, #f
  [pid-file #f]                         ; a complete path; the status goes to PID-FILE.status.json
  ;; status and logs
  [status-path #f]
  [ping-path #f]
  [access-log #f]                       ; a complete path, or "-" for stdout
  [slow-log #f]                         ; likewise
  [slow-threshold 5]                    ; seconds
  [log-level 'info]
  ;; servlets
  [continuation-timeout (servlet-settings-timeout default-servlet-settings)]
  [servlet-memory (servlet-settings-memory default-servlet-settings)]
  [session-drain 600]                   ; seconds
  ;; canary reloads (manager-canary.rkt): seconds of trial (#f: none), answers wanted, and
  ;; the share of 5xx answers, in percentage points, the canary may have over the old
  ;; generation's
  [canary #f]
  [canary-requests 20]
  [canary-max-errors 1]
  [secret-file #f]                      ; a complete path
  [limits default-limits]               ; limits.rkt
  ;; set by the manager for each worker (serve-config-for-worker)
  [pool-prefix #f]                      ; names its control and relay sockets (control.rkt)
  [master-pid #f]
  [worker-id (servlet-settings-worker-id default-servlet-settings)])

;; The defaults, for the texts that state them (--help).
(define default-serve-config (make-serve-config))

;; config-memory-ceiling : serve-config -> (or/c natural #f)
;; Past it a worker is stopped at once: --max-memory-hard, else 2 x --max-memory.
(define (config-memory-ceiling c)
  (or (serve-config-max-memory-hard c)
      (let ([soft (serve-config-max-memory c)]) (and soft (* 2 soft)))))

;; serve-config-worker-limits : serve-config -> limits
;; The limits a worker serves with: with --max-memory and no --request-memory, one
;; request's handler may hold up to --max-memory (its share of the worker): a runaway
;; handler is ended alone (500) rather than taking its worker past the hard ceiling,
;; where the manager stops the worker and every request on it.
(define (serve-config-worker-limits c)
  (define lim (serve-config-limits c))
  (define soft (serve-config-max-memory c))
  (if (and soft (not (limits-request-memory lim)))
      (struct-copy limits lim [request-memory soft])
      lim))

;; serve-config-listener-options : serve-config -> listener-options ; for listener-for
(define (serve-config-listener-options c)
  (make-listener-options #:backlog (serve-config-backlog c)
                         #:socket-mode (serve-config-socket-mode c)
                         #:socket-owner (serve-config-socket-owner c)
                         #:socket-group (serve-config-socket-group c)))

;; serve-config-for-worker : serve-config #:pool-prefix #:master-pid #:worker-id -> serve-config
(define (serve-config-for-worker c #:pool-prefix prefix #:master-pid pid #:worker-id id)
  (struct-copy serve-config c [pool-prefix prefix] [master-pid pid] [worker-id id]))

;; write-serve-config : serve-config [output-port] -> void
;; One line that read-serve-config reads back: the hash of serve-config->hash, its limits
;; as the list of their fields.
(define (write-serve-config c [out (current-output-port)])
  (define h (serve-config->hash c))
  (write (hash-set h 'limits (cdr (vector->list (struct->vector (hash-ref h 'limits))))) out)
  (void))

;; read-serve-config : [input-port] -> serve-config
(define (read-serve-config [in (current-input-port)])
  (define h (read in))
  (unless (and (hash? h) (list? (hash-ref h 'limits #f)))
    (raise-arguments-error 'read-serve-config "not a written serve-config" "read" h))
  (hash->serve-config (hash-set h 'limits (apply limits (hash-ref h 'limits)))))
