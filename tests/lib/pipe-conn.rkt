#lang racket/base
;; A connection over pipes, in this process: the lightest fixture for the engine's modules
;; (dispatch, handlers, request, request-output, wire, contain, status-paths ...). No
;; socket, no listener, no event loop: a server state (make-server), a connection over two
;; pipes (make-conn), and the front's end of them as a raw peer (tests/lib/raw-peer.rkt),
;; so the peer's readers (peer-answer, peer-read-record ...) work on it unchanged.
(require "../../fastcgi/private/util/limits.rkt"
         (only-in "../../fastcgi/private/protocol/protocol.rkt" pairs->bytes)
         (only-in "../../fastcgi/private/engine/request.rkt" make-fastcgi-request
                  request-params-accepted! request-admit! request-stream-ended! mark-done!
                  fastcgi-request-state)
         (only-in "../../fastcgi/private/util/table.rkt" table-set!)
         (only-in "../../fastcgi/private/engine/server.rkt" make-server)
         (only-in "../../fastcgi/private/engine/connection.rkt" serve-connection)
         (only-in "../../fastcgi/private/engine/wire.rkt" make-conn conn-requests)
         "raw-peer.rkt")
(provide advance!
         make-pipe-conn
         make-pipe-conn/ports
         make-live-request
         call-with-pipe-conn)

;; make-pipe-conn/ports : [#:limit natural] #:handler ... -> (values conn input-port output-port)
;; As make-pipe-conn, with the peer's ends as plain ports; limit: the most bytes the pipe
;; the connection writes to holds (#f: no limit), to make a connection that fills up.
(define (make-pipe-conn/ports #:limit [limit #f]
                              #:handler [handler void]
                              #:roles [roles '(responder)]
                              #:limits [lim default-limits]
                              #:observer [observer #f]
                              #:peer-name [name "pipe"])
  (define srv (make-server handler #:roles roles #:limits lim #:observer observer))
  (define-values (in peer-out) (make-pipe))
  (define-values (peer-in out) (make-pipe limit))
  (values (make-conn in out name srv) peer-in peer-out))

;; make-pipe-conn : #:handler #:roles #:limits #:observer #:peer-name -> (values conn peer)
;; The connection, not served: a test drives its modules' procedures on it by hand.
(define (make-pipe-conn #:handler [handler void]
                        #:roles [roles '(responder)]
                        #:limits [lim default-limits]
                        #:observer [observer #f]
                        #:peer-name [name "pipe"])
  (define-values (c peer-in peer-out)
    (make-pipe-conn/ports #:handler handler #:roles roles #:limits lim #:observer observer
                          #:peer-name name))
  (values c (ports->peer peer-in peer-out)))

;; call-with-pipe-conn : handler (peer conn -> any) #:roles #:limits #:observer -> any
;; The connection served by serve-connection in a thread of its own while proc runs; after
;; it, the peer half-closes, and the reader is given a few seconds to end.
(define (call-with-pipe-conn handler proc
                             #:roles [roles '(responder)]
                             #:limits [lim default-limits]
                             #:observer [observer #f])
  (define-values (c p) (make-pipe-conn #:handler handler #:roles roles #:limits lim
                                       #:observer observer))
  (define reader (thread (λ () (serve-connection c))))
  (dynamic-wind
   void
   (λ () (proc p c))
   (λ ()
     (peer-shutdown-write! p)
     (unless (sync/timeout 5 reader) (kill-thread reader)))))

;; make-live-request : conn natural #:role #:keep? #:params #:state -> fastcgi-request
;; A request live on c as the reader leaves it once its params have ended (their bytes
;; checked, kept raw), in the given state, in c's table; not counted as running and with no
;; handler: a test calls the procedure it tests on it.
(define (make-live-request c id
                           #:role [role 'responder]
                           #:keep? [keep? #t]
                           #:params [ps '()]
                           #:state [state 'running])
  (define r (make-fastcgi-request c id role keep?))
  (request-params-accepted! r (pairs->bytes ps))
  (advance! r state)
  (table-set! (conn-requests c) id r)
  r)

;; advance! : request symbol -> void
;; Takes a request in state params to state, by the transitions the reader makes: admitted,
;; then its streams ended in turn (a Filter's DATA after its STDIN); done: ended, as by
;; an answer.
(define (advance! r state)
  (case state
    [(params) (void)]
    [(done) (mark-done! r)]
    [else
     (request-admit! r)
     (let loop ()
       (define now (fastcgi-request-state r))
       (unless (eq? now state)
         (case now
           [(stdin) (request-stream-ended! r #f)]
           [(data) (request-stream-ended! r #t)]
           [else (error 'advance! "request in state ~a cannot reach ~a" now state)])
         (loop)))]))
