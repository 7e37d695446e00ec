#lang racket/base
;; The public face of `fastcgi`: serve a web-server servlet or a raw handler over FastCGI.
;; Arguments are checked here, at the boundary, as contracts would check them
;; (arg-checks.rkt says why not with racket/contract); nothing below checks them again per
;; request.
(require "private/util/arg-checks.rkt"
         "private/util/lazy.rkt"
         (for-syntax racket/base)
         (only-in "private/worker/app.rkt" default-servlet-settings servlet-settings-timeout
                  servlet-settings-memory)
         "private/engine/current.rkt"
         (except-in "private/util/limits.rkt" make-limits)
         (only-in "private/util/limits.rkt" [make-limits limits:make])
         "private/util/log.rkt"
         "private/protocol/protocol.rkt"
         "private/engine/request.rkt"
         "private/engine/server.rkt"
         "private/transport/transport.rkt")

;; The servlet side (web-server's structs, the adapter) loads when first used: a raw
;; application, which never uses it, runs without web-server in memory (web-server and
;; what it pulls in are a large share of a process's resident memory: see
;; bench/OPTIMISATIONS.md, web-server loads only for a servlet).
(define-lazy "private/servlet/web.rkt" servlet->handler authorized)
(define-lazy "private/servlet/servlet.rkt" start->servlet loaded-servlet-run)

;; response?, for the check of a servlet's answer on every request: loaded on the first
;; check, then called directly (a define-lazy wrapper costs many times the predicate itself
;; on every call). Through define-lazy, not dynamic-require of its name: the export is
;; contracted, so syntax, and dynamic-require of it instantiates racket/contract's
;; compile-time side: 140 ms of CPU inside the first servlet request of every process
;; (past a 0.5 s request timeout on a busy machine).
(define-lazy web-server/http/response-structs #:values response?)
(define response-pred #f)
(define (servlet-response? v)
  (unless response-pred (set! response-pred (response?)))
  (response-pred v))

(provide
 serve/fastcgi
 serve/fastcgi-raw
 make-limits
 fastcgi-param
 response/authorized
 limits? default-limits
 fastcgi-request? fastcgi-request-id fastcgi-request-role fastcgi-request-keep-conn?
 fastcgi-request-params fastcgi-request-stdin fastcgi-request-data
 fastcgi-request-stdout fastcgi-request-stderr fastcgi-request-abort-evt
 fastcgi-request-peer
 current-fastcgi-request
 fastcgi-logger
 (struct-out exn:fail:fastcgi)
 (struct-out exn:fail:fastcgi:protocol)
 (struct-out exn:fail:fastcgi:aborted)
 (struct-out exn:fail:fastcgi:body)
 (struct-out exn:fail:fastcgi:transport))

;; response/authorized : #:variables (listof (cons (or/c symbol string) string)) -> response
;; (web.rkt's, loaded on first use)
(define (response/authorized #:variables [variables '()])
  (check-arg 'response/authorized "#:variables (listof (cons/c (or/c symbol? string?) string?))"
             (and (list? variables)
                  (for/and ([v (in-list variables)])
                    (and (pair? v) (or (symbol? (car v)) (string? (car v))) (string? (cdr v)))))
             variables)
  (authorized variables))

;; fastcgi-param : fastcgi-request (or/c bytes string) [any] -> any
(define (fastcgi-param r name [default #f])
  (check-arg 'fastcgi-param "fastcgi-request?" (fastcgi-request? r) r)
  (check-arg 'fastcgi-param "(or/c bytes? string?)" (or (bytes? name) (string? name)) name)
  (request-param r name default))

;; make-limits : keyword-options -> limits (limits.rkt's, its arguments checked)
(define limit-checks
  (hasheq '#:max-params-bytes (cons exact-positive-integer? "exact-positive-integer?")
          '#:max-params-pairs (cons exact-positive-integer? "exact-positive-integer?")
          '#:max-body (cons exact-nonnegative-integer? "exact-nonnegative-integer?")
          '#:max-requests-per-connection
          (cons (λ (v) (and (exact-integer? v) (<= 1 v 65535))) "(integer-in 1 65535)")
          '#:max-concurrent (cons exact-positive-integer? "exact-positive-integer?")
          '#:max-connections (cons exact-positive-integer? "exact-positive-integer?")
          '#:stdin-buffer (cons exact-positive-integer? "exact-positive-integer?")
          '#:connection-buffer (cons exact-positive-integer? "exact-positive-integer?")
          '#:first-byte-timeout (cons positive-real? "(>/c 0)")
          '#:idle-timeout (cons positive-real? "(>/c 0)")
          '#:read-timeout (cons positive-real? "(>/c 0)")
          '#:write-timeout (cons positive-real? "(>/c 0)")
          '#:request-timeout (cons timeout? "(or/c #f (>/c 0))")
          '#:request-memory (cons (λ (v) (or (not v) (exact-positive-integer? v)))
                                  "(or/c #f exact-positive-integer?)")
          '#:max-queue-delay (cons timeout? "(or/c #f (>/c 0))")
          '#:drain-timeout (cons positive-real? "(>/c 0)")))
(define make-limits
  (procedure-reduce-keyword-arity
   (make-keyword-procedure
    (λ (kws vals)
      (check-keywords 'make-limits kws vals limit-checks)
      (keyword-apply limits:make kws vals '())))
   0 '() (sort (hash-keys limit-checks) keyword<?) 'make-limits))

;; (define-serve (name handler own-formal ...) make-handler) : a serve procedure, with the
;; keyword options both share and their defaults (a listener's are listener-options.rkt's);
;; make-handler, given the limits, makes the raw handler it serves.
(define-syntax-rule (define-serve (name handler own-formal ...) make-handler)
  (define (name handler own-formal ...
                #:roles [roles '(responder)] #:limits [lim default-limits]
                #:listen [listen #f] #:port [port #f] #:listen-ip [ip "127.0.0.1"]
                #:allowed-clients [allowed (getenv "FCGI_WEB_SERVER_ADDRS")]
                #:socket-mode [mode (listener-options-socket-mode default-listener-options)]
                #:socket-owner [owner (listener-options-socket-owner default-listener-options)]
                #:socket-group [group (listener-options-socket-group default-listener-options)]
                #:backlog [backlog (listener-options-backlog default-listener-options)]
                #:on-ready [on-ready void])
    (check-serve-options 'name roles lim listen port ip allowed mode owner group backlog on-ready)
    (serve* (make-handler lim) roles lim (or listen (and port (ip+port->string ip port)))
            (make-listener-options #:backlog backlog #:socket-mode mode
                                   #:socket-owner owner #:socket-group group)
            allowed on-ready)))

;; check-serve-options : symbol any ... -> void ; the keyword options both serve procedures take
(define (check-serve-options who roles lim listen port ip allowed mode owner group backlog on-ready)
  (check-arg who (if (eq? who 'serve/fastcgi)
                     "#:roles (non-empty-listof (or/c 'responder 'authorizer))"
                     "#:roles (non-empty-listof (or/c 'responder 'authorizer 'filter))")
             ((roles-of? (if (eq? who 'serve/fastcgi) '(responder authorizer) '(responder authorizer filter)))
              roles)
             roles)
  (check-arg who "#:limits limits?" (limits? lim) lim)
  (check-arg who "#:listen (or/c string? #f)" (or (not listen) (string? listen)) listen)
  (check-arg who "#:port (or/c #f (integer-in 0 65535))" (port-number? port) port)
  (check-arg who "#:listen-ip string?" (string? ip) ip)
  (check-arg who "#:allowed-clients (or/c #f string?)" (or (not allowed) (string? allowed)) allowed)
  (check-arg who "#:socket-mode (integer-in 0 #o7777)" (and (exact-integer? mode) (<= 0 mode #o7777)) mode)
  (check-arg who "#:socket-owner (or/c #f string? exact-nonnegative-integer?)" (user-or-group? owner) owner)
  (check-arg who "#:socket-group (or/c #f string? exact-nonnegative-integer?)" (user-or-group? group) group)
  (check-arg who "#:backlog exact-positive-integer?" (exact-positive-integer? backlog) backlog)
  (check-arg who "#:on-ready (-> string? any)" (and (procedure? on-ready) (procedure-arity-includes? on-ready 1))
             on-ready))

;; serve/fastcgi : (request -> response) keyword-options -> stop procedure
;; Serves a web-server servlet; returns at once with the procedure that stops gracefully.
;; The servlet may capture continuations (send/suspend...): they live in `manager`, by
;; default serve/servlet's (a threshold LRU manager: continuation-timeout seconds after
;; last use, fewer while the process holds more than servlet-memory bytes).
;; With 'authorizer among the roles, the servlet also answers Authorizer requests (see
;; response/authorized); the raw request's role says which it is serving.
(define-serve (serve/fastcgi start
                             #:manager [manager #f]
                             #:continuation-timeout
                             [timeout (servlet-settings-timeout default-servlet-settings)]
                             #:servlet-memory
                             [memory (servlet-settings-memory default-servlet-settings)])
  (begin
    (check-arg 'serve/fastcgi "(-> request? response?)" (and (procedure? start) (procedure-arity-includes? start 1)) start)
    (check-arg 'serve/fastcgi "#:continuation-timeout (>/c 0)" (positive-real? timeout) timeout)
    (check-arg 'serve/fastcgi "#:servlet-memory exact-positive-integer?" (exact-positive-integer? memory) memory)
    (λ (lim)
      (define s (start->servlet (checked-servlet start) #:manager manager #:timeout timeout #:memory memory))
      (servlet->handler (loaded-servlet-run s) lim))))

;; checked-servlet : (request -> response) -> (request -> response)
;; The servlet's answer must be a response: else an exn:fail:contract that names it, which
;; the adapter answers 500 and logs, as for any exception.
(define (checked-servlet start)
  (procedure-rename
   (λ (req)
     (define r (start req))
     (unless (servlet-response? r)
       (raise (exn:fail:contract (format "serve/fastcgi: the servlet ~a answered ~e, not a response"
                                         (or (object-name start) "") r)
                                 (current-continuation-marks))))
     r)
   (or (object-name start) 'servlet)))

;; serve/fastcgi-raw : (fastcgi-request -> any) keyword-options -> stop procedure
(define-serve (serve/fastcgi-raw handler)
  (begin
    (check-arg 'serve/fastcgi-raw "(-> fastcgi-request? any)" (and (procedure? handler) (procedure-arity-includes? handler 1)) handler)
    (λ (lim) handler)))

;; serve* : handler roles limits (or/c string #f) listener-options (or/c string #f)
;;          (string -> any) -> stop procedure
(define (serve* handler roles lim address options allowed on-ready)
  (define l (listener-for address options))
  (define rs (start-server handler l #:roles roles #:limits lim
                           #:allowed-clients (and allowed (parse-allowed-clients allowed))))
  (on-ready (running-server-address rs))
  (public-stop (running-server-stop rs)))

;; public-stop : procedure -> (#:timeout (>=/c 0) -> void)
;; The stop procedure as callers see it: #:timeout only, checked.
(define (public-stop stop)
  (λ (#:timeout [timeout none])
    (cond
      [(eq? timeout none) (stop)]
      [else
       (check-arg 'stop "#:timeout (>=/c 0)" (and (real? timeout) (>= timeout 0)) timeout)
       (stop #:timeout timeout)])))
(define none (string->uninterned-symbol "none"))
