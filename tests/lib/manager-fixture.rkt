#lang racket/base
;; What the tests of the manager's modules (manager-*-test.rkt) share: a manager state
;; (manager-state.rkt) built in this process, on a real unix listener and control socket
;; under a temporary folder, with no worker process of the server started. A worker in
;; it stands for a `sleep` process of its own, so that the signals the manager's
;; procedures send reach a process the test owns. No spawn can happen: the next spawn is
;; put off for good (a test that wants one sets manager-next-spawn-ms itself).
(require racket/file
         racket/os
         "../../fastcgi/private/worker/config.rkt"
         "../../fastcgi/private/worker/control.rkt"
         "../../fastcgi/private/util/log.rkt"
         "../../fastcgi/private/manager/manager-state.rkt"
         (submod "../../fastcgi/private/manager/manager-state.rkt" for-tests)
         (only-in "../../fastcgi/private/manager/lifecycle.rkt" worker-move!)
         "../../fastcgi/private/manager/pm.rkt"
         (only-in "../../fastcgi/private/os/signals.rkt" send-signal! SIGKILL)
         "../../fastcgi/private/transport/transport.rkt"
         "../integration/lib.rkt")
(provide call-with-manager
         add-worker!
         worker-signalled
         capture-log)

(define sleep-exe (find-executable-path "sleep"))

;; call-with-manager : (manager path -> any) #:config (path -> serve-config) #:preload? boolean -> any
;; make-config gets the temporary folder (for --pid-file and the socket's path); the
;; manager's pid is this process's, its pid file (when the config has one) is written.
(define (call-with-manager proc
                           #:config [make-config (λ (dir) (make-serve-config #:workers 2 #:app "/srv/app.rkt"))]
                           #:preload? [preload? #f])
  (call-with-temp-dir
   "fcgi-mstate"
   (λ (dir)
     (define cfg (let ([c (make-config dir)])
                   (if (serve-config-listen c)
                       c
                       (hash->serve-config
                        (hash-set (serve-config->hash c)
                                  'listen (format "unix:~a" (build-path dir "app.sock")))))))
     (define pid (getpid))
     (define prefix (make-pool-prefix pid))
     (define listener (listener-for (serve-config-listen cfg) (serve-config-listener-options cfg)))
     (define m (make-manager #:config cfg #:pid pid #:plan (make-pm-plan cfg) #:listener listener
                             #:control (open-private-listener (control-name prefix))
                             #:prefix prefix #:pid-file (serve-config-pid-file cfg)
                             #:secret #"0123456789abcdef" #:relay-key #"relay-key-16byte"
                             #:start-ms 0. #:preload? preload?))
     (when (serve-config-pid-file cfg)
       (call-with-output-file (serve-config-pid-file cfg) #:exists 'truncate
         (λ (o) (fprintf o "~a\n" pid))))
     (set-manager-next-spawn-ms! m +inf.0)
     (dynamic-wind
      void
      (λ () (proc m dir))
      (λ ()
        (for ([w (in-list (live-workers m))])
          (if (subprocess? (worker-sp w))
              (subprocess-kill (worker-sp w) #t)
              (send-signal! (worker-pid w) SIGKILL)))     ; adopted (forked), as the manager would
        (with-handlers ([exn:fail? void]) (listener-close! (manager-listener m)))
        (with-handlers ([exn:fail? void]) (listener-close! (manager-control m))))))))

;; add-worker! : manager keyword ... -> worker
;; A worker of the pool, its process a `sleep`, as make-worker makes it; the fields given
;; are then set as its reports or the manager would have set them.
(define (add-worker! m
                     #:generation [gen (manager-gen m)]
                     #:now [now 0.]
                     #:state [state #f]
                     #:ready-ms [ready-ms (and (eq? state 'ready) now)]
                     #:active [active #f]
                     #:heard-ms [heard-ms #f])
  (define-values (sp out in err) (subprocess #f #f #f sleep-exe "60"))
  (for ([p (list out in err)]) (if (input-port? p) (close-input-port p) (close-output-port p)))
  ;; a signal sent before the exec would be lost on the forked copy of this process
  (wait-until 5 "the worker's sleep runs"
              (λ () (equal? (with-handlers ([exn:fail? (λ (e) #f)])
                               (file->string (format "/proc/~a/comm" (subprocess-pid sp))))
                             "sleep\n")))
  (define w (make-worker #:id (add1 (manager-next-id m)) #:process sp #:generation gen #:now now))
  (set-manager-next-id! m (worker-id w))
  ;; as the manager's moves would make it (lifecycle.rkt)
  (case state
    [(ready) (worker-move! w 'ready)]
    [(draining) (worker-move! w 'drain #:deadline +inf.0)]
    [else (void)])
  (when ready-ms (set-worker-ready-ms! w ready-ms))
  (when active (set-worker-active! w active))
  (when heard-ms (set-worker-heard-ms! w heard-ms))
  (hash-set! (manager-workers m) (worker-pid w) w)
  w)

;; worker-signalled : worker -> (or/c natural #f)
;; The signal that ended its process (within a few seconds), or #f while it runs.
(define (worker-signalled w)
  (and (sync/timeout 5 (worker-sp w))
       (let ([st (subprocess-status (worker-sp w))])
         (and (> st 128) (- st 128)))))

;; capture-log : (-> any) -> (values any (listof string))
;; The thunk's result and the `fastcgi` log lines (debug and up) it produced.
(define (capture-log thunk)
  (define receiver (make-log-receiver fastcgi-logger 'debug 'fastcgi))
  (define result (thunk))
  (values result
          (let loop ([acc '()])
            (define v (sync/timeout 0 receiver))
            (if v (loop (cons (vector-ref v 1) acc)) (reverse acc)))))
