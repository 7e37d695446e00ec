#lang racket/base
;; Reloads (SIGHUP) in the manager (manager.rkt): a new generation of workers starts; when
;; all of it is ready it replaces the old one (manager-reports.rkt), and when one of it dies
;; first the reload fails and the old one goes on serving (manager-exits.rkt). One at a
;; time: a reload asked while another is under way runs after it.
(require "../worker/config.rkt"
         "../worker/control.rkt"
         "../util/log.rkt"
         "manager-notify.rkt"
         "manager-state.rkt"
         (submod "manager-state.rkt" reload)
         "manager-workers.rkt"
         "pm.rkt"
         "../worker/preflight.rkt")
(provide reload!
         trial-over!
         reload-settled!
         finish-reload!
         read-secret*)

;; reload! : manager [#:canary (or/c real #f)] -> void
;; SIGHUP (or `ctl reload`): the new generation gets --secret-file's secret as the file
;; holds it now; canary: this reload's trial in seconds (`ctl reload --canary`), else
;; --canary's (manager-canary.rkt). One asked while another is under way runs after it,
;; with --canary's.
(define (reload! m #:canary [canary-seconds #f])
  (reread-secret! m)
  (unless (manager-stopping? m)
    (set-manager-reload-asks! m (add1 (manager-reload-asks m)))
    (cond
      [(manager-reload-gen m)
       (unless (manager-reload-pending? m)
         (log-fastcgi-info "reload asked while one is under way: it runs after it"))
       (set-manager-reload-pending?! m #t)]
      [else (start-reload! m canary-seconds)])))

;; start-reload! : manager [(or/c real #f)] -> void
(define (start-reload! m [canary-seconds #f])
  (set-manager-reload-pending?! m #f)
  (set-manager-reload-covers! m (manager-reload-asks m))
  (define gen (manager-gen m))
  (define n (pm-reload-count (manager-plan m) (length (serving m gen))))
  (log-fastcgi-info "reload: starting generation ~a (~a workers)" (add1 gen) n)
  (notify-reloading! m)
  ;; n >= 1 (an idle ondemand pool too): the new code must have loaded somewhere before
  ;; the reload is said done
  (set-manager-reload-gen! m (add1 gen))
  (start-failures-over! m #:spawn-now? #t)
  (define trial (or canary-seconds (manager-cfg m serve-config-canary)))
  (cond
    [trial
     (set-manager-canary! m (make-canary #:generation (add1 gen) #:seconds trial #:total n))
     (log-fastcgi-info "reload: generation ~a starts with a canary (a trial of ~a s, ~a answers)"
                       (add1 gen) trial (manager-cfg m serve-config-canary-requests))
     (spawn! m (add1 gen))]
    [else (for ([_ (in-range n)]) (spawn! m (add1 gen)))]))

;; finish-reload! : manager -> void
;; The new generation is ready: the old one retires (its kept connections go to the new
;; workers), and the new one serves.
(define (finish-reload! m)
  (define g (manager-reload-gen m))
  (for ([old (in-list (live-workers m))] #:when (< (worker-gen old) g))
    (retire! m old "reload: replaced by the new generation"))
  (stop-idle-loaders! m)
  (set-manager-gen! m g)
  (log-fastcgi-info "reload done: generation ~a serves" g)
  (reload-settled! m #f))

;; trial-over! : manager -> void ; the canary's trial is decided (manager-canary.rkt)
(define (trial-over! m)
  (set-manager-canary! m #f))

;; reload-settled! : manager (or/c string #f) -> void
;; The reload under way is done (#f) or failed (why); one asked meanwhile starts now.
(define (reload-settled! m failure)
  (trial-over! m)
  (set-manager-reload-gen! m #f)
  (set-manager-reload-settled! m (manager-reload-covers m))
  (set-manager-last-reload-error! m failure)
  (total-add! m (if failure 'reload_failures 'reloads) 1)
  (notify-reload-settled! m)
  (when (and (manager-reload-pending? m) (not (manager-stopping? m))) (start-reload! m)))

;; reread-secret! : manager -> void ; a file that cannot be read keeps the secret read before
(define (reread-secret! m)
  (define secret-file (manager-cfg m serve-config-secret-file))
  (when secret-file
    (with-handlers ([exn:fail? (λ (e) (log-fastcgi-error "~a; the workers keep the secret read before"
                                                         (log-escape (exn-message e))))])
      (set-manager-secret! m (read-secret* secret-file)))))

;; read-secret* : path-string -> bytes ; read-secret, any failure as a user error
(define (read-secret* file)
  (with-handlers ([exn:fail:filesystem?
                   (λ (e) (raise-user-error 'raco-fastcgi "--secret-file ~a: cannot read it: ~a"
                                            file (filesystem-reason e)))])
    (read-secret file)))
