#lang racket/base
;; `raco fastcgi dev APP.rkt`: the embedded front for trying an app with no nginx.
;; The app runs behind our FastCGI server on a unix socket in a temporary folder, and
;; Racket's own web-server answers HTTP on --port, forwarding every request over real
;; FastCGI with the params a front like nginx sends. For development, not production:
;; each request is buffered whole in both directions.
(require net/url
         racket/cmdline
         racket/file
         racket/list
         web-server/http
         web-server/servlet-env
         "../client.rkt"
         "app.rkt"
         "limits.rkt"
         "log.rkt"
         "logging.rkt"
         "server.rkt")
(provide handle-dev)

;; handle-dev : (vectorof string) -> void
(define (handle-dev argv)
  (define port 8080)
  (define host "127.0.0.1")
  (define app
    (command-line
     #:program "raco fastcgi dev"
     #:argv argv
     #:once-each
     [("--port" "-p") p "HTTP port of the local front (default 8080)"
      (set! port (or (let ([n (string->number p)]) (and (exact-integer? n) (<= 0 n 65535) n))
                     (raise-user-error 'raco-fastcgi "--port: expected a port number, got ~s" p)))]
     [("--host") h "Address the local front listens on (default 127.0.0.1)" (set! host h)]
     #:args (app-file) app-file))
  (start-stderr-logging! 'info)
  (define dir (make-temporary-file "fastcgi-dev-~a" 'directory))
  (define socket (path->string (build-path dir "app.sock")))
  (define-values (handler roles servlet) (load-app app default-limits #:warn (λ (m) (log-fastcgi-warning "~a" m))))
  (define rs (start-server handler (resolve-listener (string-append "unix:" socket))
                           #:roles roles))
  (define address (running-server-address rs))
  (printf "raco fastcgi dev: ~a behind FastCGI at ~a\n" app address)
  (printf "Open http://~a:~a/ (Ctrl-C stops)\n" host port)
  (flush-output)
  (dynamic-wind
   void
   (λ ()
     (serve/servlet (λ (req) (forward address req))
                    #:servlet-regexp #rx""
                    #:port port
                    #:listen-ip host
                    #:launch-browser? #f
                    #:command-line? #t
                    #:banner? #f))
   (λ ()
     ((running-server-stop rs) #:timeout 5)
     (delete-directory/files dir #:must-exist? #f))))

;; forward : string request -> response ; one HTTP request as one FastCGI request
(define (forward address req)
  (define headers
    (for/list ([h (in-list (request-headers/raw req))])
      (cons (bytes->string/latin-1 (header-field h)) (bytes->string/latin-1 (header-value h)))))
  (define body (or (request-post-data/raw req) #""))
  (define-values (status out-headers out-body)
    (fastcgi-request address
                     #:method (bytes->string/latin-1 (request-method req))
                     #:uri (url->string (request-uri req))
                     #:headers headers
                     #:body body
                     #:params-extra `(("REMOTE_ADDR" . ,(request-client-ip req))
                                      ("SERVER_ADDR" . ,(request-host-ip req))
                                      ("SERVER_PORT" . ,(number->string (request-host-port req))))))
  (response status (status-message status) (current-seconds) #f
            (for/list ([h (in-list out-headers)]
                       #:unless (member (string-downcase (car h)) '("status" "content-length")))
              (header (string->bytes/latin-1 (car h)) (string->bytes/latin-1 (cdr h))))
            (λ (out) (write-bytes out-body out))))

;; status-message : natural -> bytes
(define (status-message code)
  (case code
    [(200) #"OK"] [(201) #"Created"] [(204) #"No Content"] [(301) #"Moved Permanently"]
    [(302) #"Found"] [(303) #"See Other"] [(304) #"Not Modified"] [(400) #"Bad Request"]
    [(401) #"Unauthorized"] [(403) #"Forbidden"] [(404) #"Not Found"] [(413) #"Content Too Large"]
    [(500) #"Internal Server Error"] [(502) #"Bad Gateway"] [(503) #"Service Unavailable"]
    [else #"Status"]))
