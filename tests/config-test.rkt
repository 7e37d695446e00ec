#lang racket/base
;; fastcgi/private/worker/config.rkt, by tables and without processes: the defaults (and those
;; derived from other fields), the configuration written for a worker and read back
;; (every field, whatever its value), and the hash form `dev` hands to its app process.
(require racket/port
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/util/limits.rkt"
         "../fastcgi/private/transport/transport.rkt")

;; round-trip : serve-config -> serve-config ; written as for a worker, read back
(define (round-trip c)
  (define text (with-output-to-string (λ () (write-serve-config c))))
  (read-serve-config (open-input-string text)))

;; every field set, none to its default
(define full
  (make-serve-config
   #:app "/srv/app/main.rkt" #:listen "unix:/run/app.sock" #:backlog 77 #:socket-mode #o600
   #:socket-owner "www-data" #:socket-group 33 #:allowed-clients "127.0.0.1,::1"
   #:pm 'dynamic #:workers 3 #:min-spare 2 #:max-spare 3 #:max-workers 9 #:idle-timeout 2.5
   #:max-requests 500 #:max-requests-jitter 50 #:max-memory (* 256 1048576) #:max-memory-hard (* 512 1048576)
   #:graceful-timeout 0.5 #:start-timeout 90 #:pid-file "/run/app.pid"
   #:status-path "/status" #:ping-path "/ping" #:access-log "-" #:slow-log "/var/log/slow \"q\".log"
   #:slow-threshold 1/4 #:log-level 'debug
   #:continuation-timeout 60 #:servlet-memory 1024 #:session-drain 0 #:secret-file "/etc/secret"
   #:limits (make-limits #:max-body 10 #:request-timeout 3 #:request-memory 4096 #:max-queue-delay 0.25
                         #:idle-timeout 7)
   #:pool-prefix "fastcgi-1-00ff" #:master-pid 4242 #:worker-id 7))

;; hash-remove* : hash (listof any) -> hash
(define (hash-remove* h ks) (for/fold ([h h]) ([k (in-list ks)]) (hash-remove h k)))

(test-case "write-serve-config then read-serve-config: the same configuration"
  (for ([c (list (make-serve-config)
                 (make-serve-config #:app "/a.rkt")
                 full
                 (serve-config-for-worker (make-serve-config #:app "/a.rkt" #:pm 'ondemand)
                                          #:pool-prefix "fastcgi-9-ab" #:master-pid 9 #:worker-id 12))])
    (check-equal? (round-trip c) c)
    (check-equal? (serve-config->hash (round-trip c)) (serve-config->hash c))))

(test-case "the written configuration is one datum on one line, no secret in it"
  (define text (with-output-to-string (λ () (write-serve-config full))))
  (check-false (regexp-match? #rx"\n" text))
  (define datum (read (open-input-string text)))
  (check-true (hash? datum))
  (check-equal? (hash-ref datum 'app) "/srv/app/main.rkt")
  (check-false (hash-has-key? datum 'secret))
  (check-false (hash-has-key? datum 'relay-key)))

(test-case "read-serve-config refuses what write-serve-config did not write"
  (for ([text (list "42" "#hasheq((app . \"/a.rkt\"))" "(app \"/a.rkt\")")])
    (check-exn #rx"not a written serve-config" (λ () (read-serve-config (open-input-string text))) text)))

(test-case "the defaults, each stated once (the listener's are the transport layer's)"
  (define d default-serve-config)
  (for ([row (list (list serve-config-listen #f)
                   (list serve-config-backlog (listener-options-backlog default-listener-options))
                   (list serve-config-socket-mode (listener-options-socket-mode default-listener-options))
                   (list serve-config-socket-owner #f)
                   (list serve-config-socket-group #f)
                   (list serve-config-allowed-clients #f)
                   (list serve-config-pm 'static)
                   (list serve-config-min-spare 1)
                   (list serve-config-idle-timeout 10)
                   (list serve-config-max-requests #f)
                   (list serve-config-max-requests-jitter 0)
                   (list serve-config-max-memory #f)
                   (list serve-config-max-memory-hard #f)
                   (list serve-config-graceful-timeout 30)
                   (list serve-config-start-timeout 60)
                   (list serve-config-slow-threshold 5)
                   (list serve-config-log-level 'info)
                   (list serve-config-continuation-timeout 14400)
                   (list serve-config-servlet-memory (* 128 1048576))
                   (list serve-config-session-drain 600)
                   (list serve-config-limits default-limits)
                   (list serve-config-pool-prefix #f)
                   (list serve-config-master-pid #f)
                   (list serve-config-worker-id 0))])
    (check-equal? ((car row) d) (cadr row) (format "~a" (object-name (car row)))))
  (check-equal? (serve-config-listener-options d) default-listener-options))

(test-case "defaults derived from other fields"
  ;; (keyword arguments: pm workers min-spare max-memory max-memory-hard) ->
  ;; (max-spare max-workers memory-ceiling)
  (for ([row (list (list (list 'static 4 1 #f #f) (list 4 4 #f))
                   (list (list 'dynamic 4 1 #f #f) (list 4 8 #f))
                   (list (list 'ondemand 3 1 #f #f) (list 3 6 #f))
                   (list (list 'dynamic 2 5 #f #f) (list 5 4 #f))
                   (list (list 'static 1 1 100 #f) (list 1 1 200))
                   (list (list 'static 1 1 100 150) (list 1 1 150))
                   (list (list 'static 1 1 #f 150) (list 1 1 150)))])
    (define-values (pm workers min-spare soft hard) (apply values (car row)))
    (define c (make-serve-config #:pm pm #:workers workers #:min-spare min-spare
                                 #:max-memory soft #:max-memory-hard hard))
    (check-equal? (list (serve-config-max-spare c) (serve-config-max-workers c) (config-memory-ceiling c))
                  (cadr row)
                  (format "~s" (car row)))))

(test-case "hash->serve-config: dev's hash (its own keys left out), the rest defaults"
  (define c (hash->serve-config
             (hasheq 'app "/a.rkt" 'listen "unix:/tmp/dev/app.sock" 'socket-mode #o600
                     'graceful-timeout 2 'log-level 'warning
                     'dev-files "/tmp/dev/files-1" 'parent-pid 99)))
  (check-equal? (serve-config-app c) "/a.rkt")
  (check-equal? (serve-config-listen c) "unix:/tmp/dev/app.sock")
  (check-equal? (serve-config-socket-mode c) #o600)
  (check-equal? (serve-config-graceful-timeout c) 2)
  (check-equal? (serve-config-log-level c) 'warning)
  (check-equal? (serve-config-backlog c) (serve-config-backlog default-serve-config))
  (check-equal? (serve-config-limits c) default-limits)
  (check-equal? (hash->serve-config (serve-config->hash full)) full))

(test-case "serve-config-for-worker sets the worker's fields and nothing else"
  (define c (make-serve-config #:app "/a.rkt" #:workers 2))
  (define w (serve-config-for-worker c #:pool-prefix "p" #:master-pid 5 #:worker-id 3))
  (check-equal? (list (serve-config-pool-prefix w) (serve-config-master-pid w) (serve-config-worker-id w))
                '("p" 5 3))
  (check-equal? (hash-remove* (serve-config->hash w) '(pool-prefix master-pid worker-id))
                (hash-remove* (serve-config->hash c) '(pool-prefix master-pid worker-id))))
