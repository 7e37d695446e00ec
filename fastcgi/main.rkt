#lang racket/base
;; The public face of `fastcgi`: serve a web-server servlet or a raw handler over FastCGI.
;; Contracts live here, at the boundary; nothing below checks them again per request.
(require racket/contract/base
         "private/lazy.rkt"
         racket/runtime-path
         (for-syntax racket/base)
         (only-in "private/app.rkt" default-servlet-settings servlet-settings-timeout
                  servlet-settings-memory)
         "private/current.rkt"
         "private/limits.rkt"
         "private/log.rkt"
         "private/protocol.rkt"
         "private/request.rkt"
         "private/server.rkt"
         "private/transport.rkt")

;; The servlet side (web-server's structs, the adapter) loads when first used: a raw
;; application, which never uses it, runs without web-server in memory (web-server and
;; what it pulls in are a large share of a process's resident memory: see
;; bench/OPTIMISATIONS.md, web-server loads only for a servlet).
(define-lazy "private/web.rkt" servlet->handler authorized)
(define-lazy "private/servlet.rkt" start->servlet loaded-servlet-run)

;; request? and response?, for serve/fastcgi's contract on the servlet, which checks both
;; on every request: loaded on the first check, then called directly (a define-lazy
;; wrapper costs many times the predicate itself on every call).
(define-runtime-module-path-index request-structs 'web-server/http/request-structs)
(define-runtime-module-path-index response-structs 'web-server/http/response-structs)
(define request-pred #f)
(define response-pred #f)
(define (request? v)
  (unless request-pred (set! request-pred (web-server-export request-structs 'request?)))
  (request-pred v))
(define (response? v)
  (unless response-pred (set! response-pred (web-server-export response-structs 'response?)))
  (response-pred v))

;; web-server-export : module-path-index symbol -> any ; loaded in this module's registry
(define (web-server-export mpi sym)
  (parameterize ([current-namespace (variable-reference->empty-namespace (#%variable-reference))])
    (dynamic-require mpi sym)))

(define stop/c (->* () (#:timeout (>=/c 0)) void?))
(define role/c (or/c 'responder 'authorizer 'filter))
(define timeout/c (or/c #f (>/c 0)))

;; (serve/c handler/c role/c own-option ...) : the contract of a serve procedure: its
;; handler, the keyword options serve/fastcgi and serve/fastcgi-raw share, and its own.
(define-syntax-rule (serve/c handler/c role/c own-option ...)
  (->* (handler/c)
       (#:roles (non-empty-listof role/c)
        #:listen (or/c string? #f)
        #:port (or/c #f (integer-in 0 65535))
        #:listen-ip string?
        #:limits limits?
        #:allowed-clients (or/c #f string?)
        #:socket-mode (integer-in 0 #o7777)
        #:socket-owner (or/c #f string? exact-nonnegative-integer?)
        #:socket-group (or/c #f string? exact-nonnegative-integer?)
        #:backlog exact-positive-integer?
        #:on-ready (-> string? any)
        own-option ...)
       stop/c))

(provide
 (contract-out
  [serve/fastcgi
   (serve/c (-> request? response?) (or/c 'responder 'authorizer)
            #:manager any/c
            #:continuation-timeout (>/c 0)
            #:servlet-memory exact-positive-integer?)]
  [serve/fastcgi-raw (serve/c (-> fastcgi-request? any) role/c)]
  [make-limits
   (->* ()
        (#:max-params-bytes exact-positive-integer?
         #:max-params-pairs exact-positive-integer?
         #:max-body exact-nonnegative-integer?
         #:max-requests-per-connection (integer-in 1 65535)
         #:max-concurrent exact-positive-integer?
         #:max-connections exact-positive-integer?
         #:stdin-buffer exact-positive-integer?
         #:connection-buffer exact-positive-integer?
         #:first-byte-timeout (>/c 0)
         #:idle-timeout (>/c 0)
         #:read-timeout (>/c 0)
         #:write-timeout (>/c 0)
         #:request-timeout timeout/c
         #:request-memory (or/c #f exact-positive-integer?)
         #:max-queue-delay timeout/c
         #:drain-timeout (>/c 0))
        limits?)]
  [fastcgi-param (->* (fastcgi-request? (or/c bytes? string?)) (any/c) any)]
  [response/authorized
   (->* () (#:variables (listof (cons/c (or/c symbol? string?) string?))) response?)])
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
(define (response/authorized #:variables [variables '()]) (authorized variables))

;; fastcgi-param : fastcgi-request (or/c bytes string) [any] -> any
(define (fastcgi-param r name [default #f]) (request-param r name default))

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
    (serve* (make-handler lim) roles lim (or listen (and port (ip+port->string ip port)))
            (make-listener-options #:backlog backlog #:socket-mode mode
                                   #:socket-owner owner #:socket-group group)
            allowed on-ready)))

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
  (λ (lim)
    (define s (start->servlet start #:manager manager #:timeout timeout #:memory memory))
    (servlet->handler (loaded-servlet-run s) lim)))

;; serve/fastcgi-raw : (fastcgi-request -> any) keyword-options -> stop procedure
(define-serve (serve/fastcgi-raw handler) (λ (lim) handler))

;; serve* : handler roles limits (or/c string #f) listener-options (or/c string #f)
;;          (string -> any) -> stop procedure
(define (serve* handler roles lim address options allowed on-ready)
  (define l (listener-for address options))
  (define rs (start-server handler l #:roles roles #:limits lim
                           #:allowed-clients (and allowed (parse-allowed-clients allowed))))
  (on-ready (running-server-address rs))
  (running-server-stop rs))
