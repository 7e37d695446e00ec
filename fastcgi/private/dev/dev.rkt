#lang racket/base
;; `raco fastcgi dev APP.rkt`: the embedded front for trying an app with no nginx.
;; The app runs in a child process, the server of `raco fastcgi serve --single-process`
;; on a unix socket in a temporary folder; Racket's own web-server answers HTTP on --port,
;; serves --static folders, and forwards every other request over real FastCGI with the
;; params a front like nginx sends. For development, not production: each request is
;; buffered whole in both directions.
;;
;; This module is the command and the HTTP front. The app's processes and their reloading
;; when a source file changes: dev-reload.rkt (the process itself: dev-child.rkt); --static:
;; dev-static.rkt.
(require net/url
         racket/async-channel
         racket/cmdline
         racket/file
         racket/path
         (prefix-in lift: web-server/dispatchers/dispatch-lift)
         (prefix-in sequencer: web-server/dispatchers/dispatch-sequencer)
         web-server/http
         web-server/web-server
         "../transport/client.rkt"
         (only-in (submod "../transport/client.rkt" private) cgi-params)
         "dev-page.rkt"
         "dev-reload.rkt"
         "dev-static.rkt"
         "../util/log.rkt"
         "../os/inherit.rkt"
         "../os/logging.rkt"
         (only-in "../os/signals.rkt" SIGHUP SIGINT SIGTERM))
(provide handle-dev)

;; Seconds the app may take to answer (fastcgi-request's default).
(define forward-timeout 30)

;; handle-dev : (vectorof string) -> void
(define (handle-dev argv)
  (define port 8080)
  (define host "127.0.0.1")
  (define reload? #t)
  (define statics '())
  (define app
    (command-line
     #:program "raco fastcgi dev"
     #:argv argv
     #:once-each
     [("--port" "-p") p "HTTP port of the local front (default 8080)"
      (set! port (or (let ([n (string->number p)]) (and (exact-integer? n) (<= 0 n 65535) n))
                     (raise-user-error 'raco-fastcgi "--port: expected a port number, got ~s" p)))]
     [("--host") h "Address the local front listens on (default 127.0.0.1)" (set! host h)]
     [("--no-reload") "Keep the code loaded at start (default: load it again when a source file of the app changes)"
      (set! reload? #f)]
     #:multi
     [("--static") dir "Serve the files under DIR before the app; may be repeated"
      (unless (directory-exists? dir)
        (raise-user-error 'raco-fastcgi "--static: no such directory: ~a" dir))
      (set! statics (append statics (list (normalize-path (simple-form-path dir)))))]
     #:args (app-file) app-file))
  ;; Ctrl-C, SIGTERM or SIGHUP (its terminal closed) stop it, whatever it inherited: under
  ;; nohup, or a blocked mask (inherit.rkt); taken before any subprocess starts
  (define-values (signal-evt inherited) (own-process! (list SIGHUP SIGINT SIGTERM)))
  (define app-path (simple-form-path app))
  (unless (file-exists? app-path)
    (raise-user-error 'raco-fastcgi "application file not found: ~a" app))
  (start-stderr-logging! 'info)
  (when inherited (log-fastcgi-info "started with ~a: handled all the same" inherited))
  (define dir (make-temporary-file "fastcgi-dev-~a" 'directory))
  (define sup (make-supervisor app app-path dir reload?))
  (define stop-http #f)
  (dynamic-wind
   void
   (λ ()
     ;; a request that comes before the first process starts waits for it
     (define confirm (make-async-channel))
     (set! stop-http
           (serve #:dispatch (apply sequencer:make
                                    (append (if (null? statics) '() (list (static-dispatcher statics)))
                                            (list (lift:make (λ (req) (answer sup req))))))
                  #:port port
                  #:listen-ip host
                  #:confirmation-channel confirm))
     (define bound (async-channel-get confirm))
     (when (exn? bound)
       (raise-user-error 'raco-fastcgi "cannot listen on ~a port ~a: ~a" host port (exn-message bound)))
     (supervisor-start! sup)
     (printf "raco fastcgi dev: ~a behind FastCGI at unix:~a\n" app (supervisor-socket sup))
     (flush-output)
     (define g (supervisor-gen sup))
     (sync (gen-ready-evt g))
     (when (and (not reload?) (not (eq? (gen-outcome g) 'ready)))
       (raise-user-error 'raco-fastcgi "~a did not load" app))
     (unless (eq? (gen-outcome g) 'ready)
       (printf "raco fastcgi dev: ~a did not load; requests get the error until a source file changes\n" app))
     (printf "Open http://~a:~a/ (Ctrl-C stops~a)\n" host bound
             (if reload? "; the app reloads when one of its source files changes" ""))
     (flush-output)
     (sync signal-evt))
   (λ ()
     (when stop-http (with-handlers ([exn:fail? void]) (stop-http)))
     (supervisor-stop! sup)
     (with-handlers ([exn:fail:filesystem? void])
       (delete-directory/files dir #:must-exist? #f)))))

;; ---------------------------------------------------------------------------------------
;; Answering HTTP

;; answer : supervisor request -> response
;; Forwards to the current process once it is ready; the load error as a 500 page when it
;; did not load; a 502 page when it does not answer.
(define (answer s req)
  (with-handlers ([exn:fail? (λ (e)
                               (log-fastcgi-error "dev: ~a" (log-escape (exn-message e)))
                               (error-page 500 "raco fastcgi dev failed" (exn-message e) ""))])
    (answer/current s req)))

;; answer/current : supervisor request -> response
(define (answer/current s req)
  (define g (supervisor-current s))
  (sync (gen-ready-evt g))
  (define outcome (gen-outcome g))
  (cond
    [(eq? outcome 'ready)
     (with-handlers ([exn:fail?
                      (λ (e)
                        (sync/timeout 0.5 (gen-process g))
                        (if (gen-exited? g)
                            (error-page 502 (format "~a stopped" (supervisor-app s)) (exit-text g)
                                        (if (supervisor-reload? s)
                                            "raco fastcgi dev starts it again at the next request."
                                            "With --no-reload, restart raco fastcgi dev."))
                            (error-page 502 (format "No answer from ~a" (supervisor-app s)) (exn-message e) "")))])
       (forward (string-append "unix:" (supervisor-socket s)) req))]
    [else
     (error-page 500 (format "~a did not load" (supervisor-app s)) (cdr outcome)
                 (if (supervisor-reload? s)
                     "raco fastcgi dev loads it again when one of its source files changes."
                     "With --no-reload, restart raco fastcgi dev."))]))

;; forward : string request -> response ; one HTTP request as one FastCGI request
(define (forward address req)
  (define headers
    (for/list ([h (in-list (request-headers/raw req))])
      (cons (bytes->string/latin-1 (header-field h)) (bytes->string/latin-1 (header-value h)))))
  (define body (or (request-post-data/raw req) #""))
  (define params
    (cgi-params (bytes->string/latin-1 (request-method req))
                (url->string (request-uri req))
                headers
                (and (positive? (bytes-length body)) (bytes-length body))
                `(("REMOTE_ADDR" . ,(request-client-ip req))
                  ("SERVER_ADDR" . ,(request-host-ip req))
                  ("SERVER_PORT" . ,(number->string (request-host-port req))))))
  (define c (fastcgi-connect address #:timeout forward-timeout))
  (define r (dynamic-wind
             void
             (λ () (fastcgi-call c #:params params #:stdin body #:keep-conn? #f #:timeout forward-timeout))
             (λ () (fcgi-client-close c))))
  ;; what the app wrote to its current-error-port in the handler: nginx logs it, dev shows it
  (define err (fcgi-reply-stderr r))
  (unless (zero? (bytes-length err))
    (write-bytes err (current-error-port))
    (unless (regexp-match? #rx#"\n$" err) (newline (current-error-port)))
    (flush-output (current-error-port)))
  (unless (eq? (fcgi-reply-protocol-status r) 'request-complete)
    (error 'raco-fastcgi "the app answered ~a" (fcgi-reply-protocol-status r)))
  (define-values (status out-headers out-body) (parse-cgi-response (fcgi-reply-stdout r)))
  (response status (status-message status) (current-seconds) #f
            (for/list ([h (in-list out-headers)]
                       #:unless (member (string-downcase (car h)) '("status" "content-length")))
              (header (string->bytes/latin-1 (car h)) (string->bytes/latin-1 (cdr h))))
            (λ (out) (write-bytes out-body out))))

