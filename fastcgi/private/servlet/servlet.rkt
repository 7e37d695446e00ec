#lang racket/base
;; Servlets as web-server's servlet dispatcher runs them: the module convention
;; (interface-version 'v1, 'v2 or 'stateless, with timeout, manager and stuffer), servlets
;; that capture continuations (send/suspend and its family, embed/url, formlets, web
;; cells), and stateless servlets in #lang web-server. web-server's own machinery does the
;; work (its managers, stuffers, servlet struct, servlet-prompt); this module sets up what
;; its dispatcher sets up around a call: the current servlet and execution context, the
;; instance id, a continuation barrier and the servlet prompt.
;;
;; What differs from web-server, on purpose:
;;   - continuation ids are made by a routed manager (sessions.rkt): they name the worker
;;     that holds the continuation and cannot be guessed;
;;   - a path parameter that web-server would `read` is checked first: only the shape that
;;     web-server writes is read, anything else is a bad URL (400), never a datum read from
;;     the client with cycles or of any size;
;;   - a stateless servlet's URLs are signed (HMAC-SHA256 under the server's secret) around
;;     its own stuffer, so nothing from a URL is deserialised unless this server made it;
;;   - an expired or unknown continuation always gets an expiration page, never a 500;
;;   - `exit` in a servlet ends its request, not the worker (contain.rkt, as for any handler).
(require file/sha1
         net/url-string
         net/url-structs
         "../util/entropy.rkt"
         "../util/lazy.rkt"
         web-server/http/request-structs
         (only-in "web-private.rkt" request-uri/raw continuation-parameterization-key)
         web-server/http/bindings
         web-server/http/response-structs
         web-server/managers/manager
         web-server/managers/timeouts
         web-server/private/servlet
         (only-in web-server/servlet/servlet-structs any->response)
         "../engine/current.rkt"
         "../util/hmac.rkt"
         "sessions.rkt")
(provide load-servlet
         start->servlet
         (struct-out loaded-servlet)
         continuation-of)

;; The stateless machinery (serializable continuations, stuffers) loads only for a
;; stateless servlet.
(define-lazy web-server/servlet/web adjust-timeout!)
(define-lazy web-server/lang/web make-stateless-servlet initialize-servlet)
(define-lazy web-server/stuffers/stuffer make-stuffer stuffer-in stuffer-out)
(define-lazy web-server/servlet/web-cells restore-web-cell-set! capture-web-cell-set)
(define-lazy web-server/lang/stuff-url #:values default-stuffer)

;; A loaded servlet. kind: 'start (a module that provides only start), 'plain (the same,
;; in a process where no continuation can be captured), 'v1, 'v2 or 'stateless.
;; run : request -> (or/c response #f 'bad-url): #f when the servlet raised
;; exn:dispatcher (no rule matched: 404), 'bad-url for a malformed continuation parameter
;; (400). sessions: the routed manager, #f for a stateless or plain servlet.
(struct loaded-servlet (kind run sessions))

;; load-servlet : path #:worker-id natural #:memory natural #:timeout real
;;                #:secret (or/c bytes #f) #:secret-lasting? boolean #:warn (string -> void)
;;                -> (or/c loaded-servlet #f)
;; The module at path (instantiated by the caller) as a servlet; #f when it provides
;; neither start nor interface-version. memory and timeout: the default manager's
;; (make-default-manager). secret: signs stateless URLs (#f: one made now); lasting?:
;; it outlives this pool (else a stateless servlet gets a warning).
(define (load-servlet path #:worker-id worker-id #:memory memory #:timeout timeout
                      #:secret secret #:secret-lasting? [lasting? (and secret #t)] #:warn warn)
  (define (get name [default (λ () #f)]) (dynamic-require path name default))
  (define version (get 'interface-version))
  (define start (get 'start))
  (define dir (let-values ([(base name dir?) (split-path path)]) base))
  (define (need-start)
    (unless (procedure? start)
      (raise-user-error 'raco-fastcgi "~a: interface-version is ~s, but it provides no start procedure"
                        path version))
    start)
  (define (routed inner) (make-routed-manager inner worker-id))
  (case version
    [(#f)
     (cond
       [(not (procedure? start)) #f]
       [(web-server-language? path)
        (stateless-servlet path dir start (default-routed-manager worker-id memory timeout)
                           (default-stuffer) secret lasting? warn #f)]
       [(not (continuations-loaded?)) (plain-servlet start)]
       [else
        (stateful-servlet 'start start
                          (default-routed-manager worker-id memory timeout)
                          #f)])]
    [(v1)
     (define t (get 'timeout))
     (unless (and (real? t) (positive? t))
       (raise-user-error 'raco-fastcgi "~a: interface-version 'v1 needs a positive timeout, got ~e" path t))
     (define s (need-start))
     (stateful-servlet 'v1 (λ (req) (adjust-timeout! t) (s req)) (routed (create-timeout-manager #f t t)) dir)]
    [(v2)
     (define m (get 'manager))
     (unless (manager? m)
       (raise-user-error 'raco-fastcgi "~a: interface-version 'v2 needs a manager (web-server/managers), got ~e" path m))
     (stateful-servlet 'v2 (need-start) (routed m) dir)]
    [(stateless)
     (define m (get 'manager (λ () #f)))
     (unless (or (not m) (manager? m))
       (raise-user-error 'raco-fastcgi "~a: manager must be a web-server manager, got ~e" path m))
     (stateless-servlet path dir (need-start)
                        (if m (routed m) (default-routed-manager worker-id memory timeout))
                        (get 'stuffer (λ () (default-stuffer))) secret lasting? warn dir)]
    [else
     (raise-user-error 'raco-fastcgi "~a: interface-version must be 'v1, 'v2 or 'stateless, got ~e" path version)]))

;; start->servlet : (request -> any) #:manager (or/c manager #f) #:memory natural
;;                  #:timeout real [#:worker-id natural] -> loaded-servlet
;; serve/fastcgi's servlet: start, with continuations kept in manager (#f: the default).
(define (start->servlet start #:manager manager #:memory memory #:timeout timeout #:worker-id [worker-id 0])
  (when (and manager (not (manager? manager)))
    (raise-argument-error 'serve/fastcgi "(or/c #f manager?)" manager))
  (if (and (not manager) (not (continuations-loaded?)))
      (plain-servlet start)
      (stateful-servlet 'start start
                        (if manager
                            (make-routed-manager manager worker-id)
                            (default-routed-manager worker-id memory timeout))
                        #f)))

;; default-routed-manager : natural natural real -> routed-manager
;; serve/servlet's manager, whose sessions may add `memory` bytes to what the process
;; uses now (the app loaded), with the hard bound at the same place.
(define (default-routed-manager worker-id memory timeout)
  (define limit (memory-limit memory))
  (make-routed-manager (make-default-manager #:limit limit #:timeout timeout) worker-id #:memory limit))

;; continuations-loaded? : -> boolean
;; Whether web-server's continuation API is loaded in this process: web-server/servlet
;; (send/suspend and its family; web-server/servlet, web-server/dispatch, formlets and
;; web-server/page load it) or web-server/lang/web (the stateless language). A servlet in
;; a process without it cannot capture a continuation, and is called as a plain procedure,
;; sparing each request what the servlet dispatcher sets up (three contracted parameters,
;; the execution context, a prompt and a barrier: see bench/OPTIMISATIONS.md, A plain
;; servlet skips the dispatcher's set-up).
(define (continuations-loaded?)
  (or (module-declared? 'web-server/servlet/web #f)
      (module-declared? 'web-server/lang/web #f)))

;; plain-servlet : (request -> any) -> loaded-servlet
(define (plain-servlet start) (loaded-servlet 'plain start #f))

;; web-server-language? : path -> boolean ; written in #lang web-server or web-server/base
(define (web-server-language? path)
  (define lang-api (collection-file-path "lang-api.rkt" "web-server" "lang"))
  (for*/or ([phase+mods (in-list (module->imports path))]
            [mpi (in-list (cdr phase+mods))])
    (define name (resolved-module-path-name (module-path-index-resolve mpi)))
    (and (path? name)
         (or (equal? name lang-api)
             (equal? name (collection-file-path "lang.rkt" "web-server"))
             (equal? name (collection-file-path "base.rkt" "web-server"))))))

;; ---------------------------------------------------------------------------------------
;; Servlets that keep their continuations in this process.

;; stateful-servlet : symbol (request -> any) routed-manager (or/c path #f) -> loaded-servlet
;; dir: the current directory while the servlet runs (the module convention's servlets run
;; in their own folder, as under web-server's servlet dispatcher); #f leaves it alone.
(define (stateful-servlet kind start rm dir)
  (define srv (make-servlet (current-custodian) (current-namespace) (routed-manager-manager rm)
                            (or dir (current-directory)) start))
  (define lookup (manager-continuation-lookup (routed-manager-manager rm)))
  ;; Web cells live in a thread cell. web-server runs each connection in a fresh thread;
  ;; here a thread serves many requests, so a new session starts from the cells of a
  ;; thread that ran nothing (a resumed continuation restores its own).
  (define initial-cells (capture-web-cell-set))
  (define (handle req)
    (define u (request-uri/raw req))
    (define k (and (path-params? u) (continuation-of u)))
    (cond
      [(eq? k 'bad) 'bad-url]
      [k (resume srv req dir lookup k)]
      ;; a new instance: nothing to look up, so no expiration to catch (a continuation it
      ;; stores, resumed later, runs under the handlers of the request that resumes it)
      [else (in-servlet srv req dir (routed-manager-new-instance! rm)
                        (λ () (restore-web-cell-set! initial-cells) (start req)))]))
  (loaded-servlet kind handle rm))

;; path-params? : url -> boolean ; whether a path segment has parameters (few URLs do)
(define (path-params? u)
  (let loop ([ps (url-path u)])
    (and (pair? ps) (or (pair? (path/param-param (car ps))) (loop (cdr ps))))))

;; expired : (or/c #f (request -> any)) request -> any
(define (expired handler req) ((or handler expired-page) req))

;; in-servlet : servlet request (or/c path #f) number (-> any) -> (or/c response #f)
;; What web-server's servlet dispatcher does around a servlet's handler (one
;; parameterize for the three parameters: each costs a contract check and an extension).
(define (in-servlet srv req dir instance-id thunk)
  (define result
    (parameterize ([current-servlet srv]
                   [current-execution-context (make-execution-context req)]
                   [current-servlet-instance-id instance-id])
      (call-with-continuation-barrier
       (λ ()
         (call-with-continuation-prompt
          (if dir (λ () (parameterize ([current-directory dir]) (thunk))) thunk)
          servlet-prompt)))))
  (cond
    [(response? result) result]
    [(any->response result)]
    [else (raise-arguments-error 'servlet "the servlet's result is not a response" "result" result)]))

;; ---------------------------------------------------------------------------------------
;; Continuation URLs.

;; continuation-of : url -> (or/c #f 'bad (list natural natural natural))
;; web-server reads every path parameter with `read` (extract-param) and takes the k entry
;; of the first that is an association list. Here a parameter must be one web-server
;; writes, (("key" . "value") ...), or a plain token that `read` turns into a symbol or a
;; number; k's value must be three numbers. Anything else: 'bad.
(define (continuation-of u)
  (let loop ([segs (url-path u)] [found #f])
    (cond
      [(null? segs) found]
      [else
       (let check ([ps (path/param-param (car segs))] [found found])
         (cond
           [(null? ps) (loop (cdr segs) found)]
           [(eq? found 'bad) 'bad]
           [else
            (define p (car ps))
            (define pairs (written-alist p))
            (cond
              [pairs
               (define k (assoc "k" pairs))
               (define ids (and k (regexp-match k-value (cdr k))))
               (check (cdr ps) (cond [(not k) found]
                                     [(not ids) 'bad]
                                     [else (or found (map string->number (cdr ids)))]))]
              [(regexp-match? special-char p) 'bad]
              [else (check (cdr ps) found)])]))])))

;; written-alist : string -> (or/c #f (listof (cons string string)))
;; What web-server's write/string makes of a list of (key . value) pairs of strings,
;; (("k" . "v") ("c" . "w")), read back: keys of 1 to 16 lower-case letters, values with
;; their escapes left as written; #f for anything else. One pass, no backtracking.
(define (written-alist p)
  (define n (string-length p))
  (define (char-at i) (and (< i n) (string-ref p i)))
  ;; lit : natural string -> (or/c natural #f) ; the index after the literal at i
  (define (lit i s)
    (and (<= (+ i (string-length s)) n)
         (for/and ([c (in-string s)] [j (in-naturals i)]) (char=? c (string-ref p j)))
         (+ i (string-length s))))
  ;; key : natural -> (values (or/c natural #f) string) ; "abc"
  (define (key i)
    (let loop ([j (add1 i)])
      (define c (char-at j))
      (cond
        [(and c (char<=? #\a c #\z) (< (- j i) 17)) (loop (add1 j))]
        [(and (eqv? c #\") (< 1 (- j i) 18)) (values (add1 j) (substring p (add1 i) j))]
        [else (values #f #f)])))
  ;; value : natural -> (values (or/c natural #f) string) ; "..." with \ escapes
  (define (value i)
    (let loop ([j (add1 i)])
      (define c (char-at j))
      (cond
        [(not c) (values #f #f)]
        [(eqv? c #\\) (if (< (add1 j) n) (loop (+ j 2)) (values #f #f))]
        [(eqv? c #\") (values (add1 j) (substring p (add1 i) j))]
        [else (loop (add1 j))])))
  (let loop ([i (lit 0 "(")] [acc '()])
    (cond
      [(not i) #f]
      [(and (pair? acc) (= i (sub1 n)) (eqv? (char-at i) #\))) (reverse acc)]
      [else
       (define start (if (null? acc) i (lit i " ")))
       (define i1 (and start (lit start "(\"")))
       (define-values (i2 k) (if i1 (key (sub1 i1)) (values #f #f)))
       (define i3 (and i2 (lit i2 " . ")))
       (define-values (i4 v) (if (and i3 (eqv? (char-at i3) #\")) (value i3) (values #f #f)))
       (define i5 (and i4 (lit i4 ")")))
       (and i5 (loop i5 (cons (cons k v) acc)))])))

(define k-value #px"^\\(([0-9]{1,40}) ([0-9]{1,40}) ([0-9]{1,80})\\)$")
;; what makes `read` read more than one token: lists, strings, quotes, # forms
(define special-char #px"[][(){}\"'`,#|\\\\]")

;; ---------------------------------------------------------------------------------------
;; Stateless servlets.

;; stateless-servlet : path path (request -> any) routed-manager stuffer (or/c bytes #f) boolean
;;                     (string -> void) (or/c path #f) -> loaded-servlet
;; A stateless servlet's continuations travel in its URLs. One may still capture stateful
;; ones: a module in #lang web-server that also requires web-server/servlet and calls its
;; send/suspend family (easy to write, and it runs under serve/servlet, which is stateful).
;; web-server's dispatcher gives a stateless servlet a manager that keeps nothing, and such
;; a capture fails there ("No instance"); here the servlet gets rm alongside, a routed
;; manager (the module's own manager if it names one, else the default), which keeps them
;; as for a stateful servlet, and the first capture says so in one warning line.
(define (stateless-servlet path dir start rm stuffer secret lasting? warn run-dir)
  (unless lasting?
    (warn (format "~a is a stateless servlet and no --secret-file was given: its URLs are signed with a secret made at start, so they stop working after a restart and on other hosts"
                  path)))
  (define key (or secret (random-bytes 32)))
  (define ses
    (make-stateless-servlet (current-custodian) (current-namespace) (warning-manager rm path warn)
                            (or run-dir (current-directory))
                            (λ (req) (error 'servlet "not initialised"))
                            (signed-stuffer stuffer key)))
  (define lookup (manager-continuation-lookup (routed-manager-manager rm)))
  ;; web-server's make-stateless.servlet makes the handler once, and the handler runs each
  ;; request under the parameterization it was made in: under web-server's dispatcher, the
  ;; first request's, whose URL every later stuffed URL is then built on. Made here for
  ;; each request, in the request's own (initialize-servlet only captures it).
  (define (handle req)
    (define k (continuation-of (request-uri req)))
    (cond
      [(or (eq? k 'bad) (bad-kont? req)) 'bad-url]
      [k (resume ses req run-dir lookup k)]
      [else
       (with-handlers ([exn:fail:bad-url? (λ (e) 'bad-url)]
                       [exn:fail:stale-url? (λ (e) (expired-page req))])
         (in-servlet ses req run-dir (routed-manager-new-instance! rm)
                     (λ () ((initialize-servlet start) req))))]))
  (loaded-servlet 'stateless handle rm))

;; resume : servlet request (or/c path #f) (continuation-id -> box) (list natural natural natural)
;;          -> (or/c response #f)
;; The stored continuation k names, run for req; an expiration page when it has gone.
(define (resume srv req dir lookup k)
  (in-servlet
   srv req dir (car k)
   (λ ()
     (with-handlers ([exn:fail:servlet-manager:no-instance?
                      (λ (e) (expired (exn:fail:servlet-manager:no-instance-expiration-handler e) req))]
                     [exn:fail:servlet-manager:no-continuation?
                      (λ (e) (expired (exn:fail:servlet-manager:no-continuation-expiration-handler e) req))])
       (resume-as-now (custodian-box-value (lookup (car k) (cadr k) (caddr k))) req)))))

;; resume-as-now : (request -> any) request -> any
;; kont applied to req, where current-fastcgi-request is this call's raw request (web.rkt
;; binds it around the servlet's call). A parameterization captured in the continuation
;; (a parameterize of the servlet's own around send/suspend, in-servlet's
;; current-directory, a stateless servlet's initialize-servlet) binds it, as it binds
;; every parameter, to its value at the capture: the request that captured it. That
;; binding is a thread cell: for the call it holds this request in this thread, and then
;; its value before again.
(define (resume-as-now kont req)
  (define now (current-fastcgi-request))
  (define p (and now continuation-parameterization-key (continuation? kont)
                 (continuation-mark-set-first (continuation-marks kont) continuation-parameterization-key #f)))
  ;; #f when p does not bind it (then it reads as this thread's default, #f)
  (define before (and p (call-with-parameterization p current-fastcgi-request)))
  (cond
    [(and before (not (eq? before now)))
     (define (hold! v) (call-with-parameterization p (λ () (current-fastcgi-request v))))
     (dynamic-wind (λ () (hold! now)) (λ () (kont req)) (λ () (hold! before)))]
    [else (kont req)]))

;; warning-manager : routed-manager path (string -> void) -> manager
;; rm's manager, which says once, at the first continuation stored, that a stateless
;; servlet keeps a stateful continuation.
(define (warning-manager rm path warn)
  (define m (routed-manager-manager rm))
  (define store! (manager-continuation-store! m))
  (define warned? #f)
  (struct-copy manager m
               [continuation-store!
                (λ (id k expiration-handler)
                  (unless warned?
                    (set! warned? #t)
                    (warn (format "~a declares interface-version 'stateless (or is in #lang web-server) but captured a stateful continuation (send/suspend and its family from web-server/servlet): it is kept in this worker's memory, as for a stateful servlet; for URLs that carry it, use web-server/lang/web's send/suspend instead"
                                  path)))
                  (store! id k expiration-handler))]))

;; bad-kont? : request -> boolean
;; send/suspend/hidden's field goes to `read`: it must be one written byte string.
(define (bad-kont? req)
  (define b (bindings-assq #"kont" (request-bindings/raw req)))
  (and b (not (and (binding:form? b)
                   (regexp-match? #px#"^#\"(?:[^\"\\\\]|\\\\.)*\"$" (binding:form-value b))))))

;; bad-url: the signature does not hold (400). stale-url: it holds, but the servlet's
;; stuffer cannot give the continuation back: one kept in a file of another host or one
;; since removed (web-server's default-stuffer keeps a URL past 2048 bytes in ~/.urls),
;; or one of an older version of the app: the page has expired.
(struct exn:fail:bad-url exn:fail ())
(struct exn:fail:stale-url exn:fail ())

;; signed-stuffer : stuffer bytes -> stuffer
;; The servlet's stuffer, its output followed by "." and 128 bits of HMAC-SHA256 in hex;
;; what comes back is checked before the servlet's stuffer sees it.
(define (signed-stuffer inner key)
  (define (mac bs) (string->bytes/latin-1 (bytes->hex-string (subbytes (hmac-sha256 key bs) 0 16))))
  (define (bad) (raise (exn:fail:bad-url "stateless URL: bad signature" (current-continuation-marks))))
  (make-stuffer
   (λ (v) (let ([bs ((stuffer-in inner) v)]) (bytes-append bs #"." (mac bs))))
   (λ (signed)
     (define m (and (bytes? signed) (regexp-match #px#"^(.*)[.]([0-9a-f]{32})$" signed)))
     (unless (and m (bytes=?/constant-time (caddr m) (mac (cadr m)))) (bad))
     (with-handlers ([exn:fail? (λ (e) (raise (exn:fail:stale-url (exn-message e) (current-continuation-marks))))])
       ((stuffer-out inner) (cadr m))))))
