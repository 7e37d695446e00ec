#lang racket/base
;; One server process: the accept loop, a green thread per connection, one deadline
;; manager for all connections, and the graceful stop.
(require "connection.rkt"
         "limits.rkt"
         "log.rkt"
         "transport.rkt"
         "wire.rkt")
(provide start-server
         resolve-listener
         (struct-out running-server))

;; The handle on a running server: stop ends it gracefully; server is the shared state.
(struct running-server (address stop server))

;; resolve-listener : (or/c string listener #f) #:backlog ... -> listener
;; A string is an address (unix:/path, HOST:PORT, [::1]:PORT, fd:N); #f means inherited:
;; fd 0 when it is a listening socket, else systemd socket activation, else an error.
(define (resolve-listener listen
                          #:backlog [backlog 1024]
                          #:socket-mode [mode #o660]
                          #:socket-owner [owner #f]
                          #:socket-group [group #f])
  (cond
    [(listener? listen) listen]
    [(string? listen)
     (open-listener (parse-listen-address listen) #:backlog backlog
                    #:socket-mode mode #:socket-owner owner #:socket-group group)]
    [(inherited-listener) => values]
    [else
     (raise (exn:fail:fastcgi:transport
             (string-append "fastcgi: no address to listen on: give --listen (unix:/path, "
                            "HOST:PORT or fd:0); fd 0 is not a listening socket and no "
                            "systemd socket (LISTEN_FDS) was passed")
             (current-continuation-marks)))]))

;; start-server : (fastcgi-request -> any) listener #:roles #:limits #:allowed-clients
;;                -> running-server
;; allowed-clients: #f (everyone) or the value of parse-allowed-clients.
(define (start-server handler listener
                      #:roles [roles '(responder)]
                      #:limits [lim default-limits]
                      #:allowed-clients [allowed #f])
  (define srv (server handler roles lim (make-hasheq)
                      (λ (c) (socket-shutdown-write! (conn-out c)))
                      (box 0) (make-hasheq) #f))
  (define conns (server-connections srv))
  (define slots (make-semaphore (limits-max-connections lim)))
  (define (serve in out peer)
    (define c (make-conn in out peer srv))
    (hash-set! conns c #t)
    (with-handlers ([(λ (e) #t)
                     (λ (e) (log-fastcgi-error "connection from ~a: ~a" (log-escape peer)
                                               (log-escape (if (exn? e) (exn-message e) e))))])
      (serve-connection c))
    (conn-broken! c)
    (hash-remove! conns c)
    (semaphore-post slots))
  (define acceptor
    (thread
     (λ ()
       (let loop ()
         (semaphore-wait slots)
         (define-values (in out peer)
           (with-handlers ([exn:fail:fastcgi:transport? (λ (e) (values #f #f #f))])
             (listener-accept listener)))
         (cond
           [(not in) (semaphore-post slots)]   ; the listener was closed: stop accepting
           [(and allowed (not (client-allowed? allowed peer)))
            (log-fastcgi-warning "refused connection from ~a: not in the allowed clients"
                                 (log-escape peer))
            (stat-add! srv 'refused)
            (close-input-port in)
            (with-handlers ([exn:fail? void]) (close-output-port out))
            (semaphore-post slots)
            (loop)]
           [else
            (stat-add! srv 'connections)
            (thread (λ () (serve in out peer)))
            (loop)])))))
  (define watchdog (thread (λ () (watch-deadlines conns lim))))
  (log-fastcgi-info "listening on ~a" (listener-address listener))
  (define (stop #:timeout [timeout 30])
    (unless (server-closing? srv)
      (set-server-closing?! srv #t)
      (listener-close! listener)
      (thread-wait acceptor)
      (for ([c (in-list (hash-keys conns))])
        (when (zero? (hash-count (conn-requests c))) (conn-close! c)))
      (define deadline (+ (now-ms) (* 1000 timeout)))
      (let wait ()
        (when (and (positive? (hash-count conns)) (< (now-ms) deadline))
          (sleep 0.05)
          (wait)))
      (for ([c (in-list (hash-keys conns))])
        (log-fastcgi-warning "stop: cutting the connection from ~a after ~a s"
                             (log-escape (conn-peer c)) timeout)
        (conn-broken! c))
      (kill-thread watchdog)
      (log-fastcgi-info "stopped listening on ~a" (listener-address listener))))
  (running-server (listener-address listener) stop srv))

;; watch-deadlines : (hasheq conn #t) limits -> none
;; Once every quarter second, cut the connections whose read or write deadline has passed
;; (closing the ports wakes the blocked reader or writer with an exception), and stop the
;; handlers past the request timeout.
(define (watch-deadlines conns lim)
  (let loop ()
    (sleep 0.25)
    (define now (now-ms))
    (for ([c (in-list (hash-keys conns))])
      (define rd (conn-deadline c))
      (define wd (conn-write-deadline c))
      (cond
        [(and wd (> now wd))
         (log-fastcgi-warning "write timeout: ~a stopped reading; closing" (log-escape (conn-peer c)))
         (conn-broken! c)]
        [(and rd (> now rd))
         (unless (conn-closing? c)
           (log-fastcgi-warning "read timeout: nothing from ~a in time; closing" (log-escape (conn-peer c))))
         (conn-broken! c)]
        [else (check-request-timeouts! c lim now)]))
    (loop)))
