#lang racket/base
;; serve-cli.rkt: `raco fastcgi serve`'s command line parsed into a serve-config and its
;; modes (parse-serve-argv), and the pool sizes checked together (check-pool!), by tables
;; in this process. Each value's own parsing: cli-args-test; the options against the
;; manual: docs-test; serving for real: cli-test, manager-test.
(require racket/file
         racket/list
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/util/limits.rkt"
         "../fastcgi/private/cli/serve-cli.rkt"
         "integration/lib.rkt")

;; parse : path string ... -> (values serve-config hash) ; with FCGI_WEB_SERVER_ADDRS unset
;; unless env gives it
(define (parse app #:env [env #f] . args)
  (parameterize ([current-environment-variables (environment-variables-copy (current-environment-variables))])
    (environment-variables-set! (current-environment-variables) #"FCGI_WEB_SERVER_ADDRS"
                                (and env (string->bytes/utf-8 env)))
    (parse-serve-argv (list->vector (append args (list app))))))

(define (refusal thunk) (with-handlers ([exn:fail:user? exn-message]) (thunk) #f))

(define (with-app proc)
  (call-with-temp-dir "fcgi-scli"
                      (λ (dir)
                        (define app (build-path dir "app.rkt"))
                        (display-to-file "#lang racket/base\n" app)
                        (parameterize ([current-directory dir]) (proc dir (path->string app))))))

(test-case "no option: the defaults of config.rkt, the app as a complete path, no mode"
  (with-app
   (λ (dir app)
     (define-values (cfg modes) (parse "app.rkt"))
     (check-equal? (serve-config-app cfg) app)
     (check-equal? (hash->serve-config (hash-remove (serve-config->hash cfg) 'app))
                   default-serve-config)
     (check-equal? (hash-count modes) 0))))

(test-case "each option reaches its field"
  (with-app
   (λ (dir app)
     ;; args -> serve-config accessor -> value
     (define table
       (list (list '("--listen" "unix:/run/app.sock") serve-config-listen "unix:/run/app.sock")
             (list '("-l" "127.0.0.1:9000") serve-config-listen "127.0.0.1:9000")
             (list '("--socket-mode" "0660") serve-config-socket-mode #o660)
             (list '("--socket-owner" "1000") serve-config-socket-owner 1000)
             (list '("--socket-group" "www-data") serve-config-socket-group "www-data")
             (list '("--backlog" "64") serve-config-backlog 64)
             (list '("--allowed-clients" "127.0.0.1") serve-config-allowed-clients "127.0.0.1")
             (list '("--workers" "3") serve-config-workers 3)
             (list '("-w" "3") serve-config-max-spare 3)
             (list '("--workers" "3") serve-config-max-workers 3)
             (list '("--pm" "dynamic" "--workers" "3") serve-config-max-workers 6)
             (list '("--pm" "ondemand") serve-config-pm 'ondemand)
             (list '("--min-spare" "2") serve-config-min-spare 2)
             (list '("--max-spare" "5") serve-config-max-spare 5)
             (list '("--max-workers" "9") serve-config-max-workers 9)
             (list '("--idle-timeout" "4") serve-config-idle-timeout 4)
             (list '("--max-requests" "50") serve-config-max-requests 50)
             (list '("--max-memory" "64m") serve-config-max-memory (* 64 1024 1024))
             (list '("--max-memory-hard" "1g") serve-config-max-memory-hard (* 1024 1024 1024))
             (list '("--graceful-timeout" "3") serve-config-graceful-timeout 3)
             (list '("--start-timeout" "9") serve-config-start-timeout 9)
             (list '("--pid-file" "m.pid") serve-config-pid-file (path->string (build-path dir "m.pid")))
             (list '("--status-path" "/status") serve-config-status-path "/status")
             (list '("--ping-path" "/ping") serve-config-ping-path "/ping")
             (list '("--access-log" "-") serve-config-access-log "-")
             (list '("--slow-log" "s.log") serve-config-slow-log (path->string (build-path dir "s.log")))
             (list '("--slow-threshold" "2") serve-config-slow-threshold 2)
             (list '("--log-level" "debug") serve-config-log-level 'debug)
             (list '("--continuation-timeout" "60") serve-config-continuation-timeout 60)
             (list '("--servlet-memory" "1m") serve-config-servlet-memory 1048576)
             (list '("--session-drain" "0") serve-config-session-drain 0)))
     (for ([row (in-list table)])
       (define-values (cfg modes) (apply parse "app.rkt" (first row)))
       (check-equal? ((second row) cfg) (third row) (format "~s" (first row)))))))

(test-case "the limits options reach make-limits' fields; the others keep their defaults"
  (with-app
   (λ (dir app)
     (define table
       (list (list '("--max-body" "1m") limits-max-body 1048576)
             (list '("--max-params-bytes" "8k") limits-max-params-bytes 8192)
             (list '("--max-params-pairs" "20") limits-max-params-pairs 20)
             (list '("--max-concurrent" "7") limits-max-concurrent 7)
             (list '("--max-queue-delay" "off") limits-max-queue-delay #f)
             (list '("--max-queue-delay" "0.5") limits-max-queue-delay 0.5)
             (list '("--max-connections" "30") limits-max-connections 30)
             (list '("--max-requests-per-connection" "3") limits-max-requests-per-connection 3)
             (list '("--stdin-buffer" "4k") limits-stdin-buffer 4096)
             (list '("--connection-buffer" "16k") limits-connection-buffer 16384)
             (list '("--first-byte-timeout" "2") limits-first-byte-timeout 2)
             (list '("--keepalive-timeout" "7") limits-idle-timeout 7)
             (list '("--read-timeout" "8") limits-read-timeout 8)
             (list '("--write-timeout" "9") limits-write-timeout 9)
             (list '("--request-timeout" "1") limits-request-timeout 1)
             (list '("--request-memory" "32m") limits-request-memory (* 32 1024 1024))))
     (for ([row (in-list table)])
       (define-values (cfg modes) (apply parse "app.rkt" (first row)))
       (define l (serve-config-limits cfg))
       (check-equal? ((second row) l) (third row) (format "~s" (first row)))
       (check-equal? (limits-max-body l)
                     (if (eq? (second row) limits-max-body) 1048576 (limits-max-body default-limits)))))))

(test-case "modes, and FCGI_WEB_SERVER_ADDRS as the default of --allowed-clients"
  (with-app
   (λ (dir app)
     (define-values (c1 m1) (parse "app.rkt" "--single-process"))
     (check-equal? m1 (make-hasheq '((single? . #t))))
     (define-values (c2 m2) (parse "app.rkt" "--check"))
     (check-equal? m2 (make-hasheq '((check? . #t))))
     (define-values (c3 m3) (parse "app.rkt" #:env "10.0.0.1,10.0.0.2"))
     (check-equal? (serve-config-allowed-clients c3) "10.0.0.1,10.0.0.2")
     (define-values (c4 m4) (parse "app.rkt" #:env "10.0.0.1" "--allowed-clients" "::1"))
     (check-equal? (serve-config-allowed-clients c4) "::1")
     (define-values (c5 m5) (parse "app.rkt"))
     (check-false (serve-config-allowed-clients c5)))))

(test-case "refused: a missing app, a bad value, an unknown flag; each one line"
  (with-app
   (λ (dir app)
     (define table
       (list (list "nope.rkt" '() #rx"^raco-fastcgi: application file not found: nope.rkt$")
             (list "app.rkt" '("--pm" "fast") #rx"^raco-fastcgi: --pm: expected static, dynamic or ondemand")
             (list "app.rkt" '("--workers" "0") #rx"^raco-fastcgi: --workers: expected a positive integer")
             (list "app.rkt" '("--max-body" "lots") #rx"^raco-fastcgi: --max-body: expected a size")
             (list "app.rkt" '("--status-path" "status") #rx"^raco-fastcgi: --status-path: expected a path starting with /")
             (list "app.rkt" '("--no-such-flag") #rx"unknown switch: --no-such-flag")))
     (for ([row (in-list table)])
       (define msg (refusal (λ () (apply parse (first row) (second row)))))
       (check-regexp-match (third row) (or msg "") (format "~s" (second row)))))))

(test-case "check-pool!: spare and memory sizes that contradict each other"
  (define (cfg . kvs) (hash->serve-config (apply hash 'workers 4 kvs)))
  (define table
    (list (list (cfg 'min-spare 3 'max-spare 2) "raco-fastcgi: --min-spare (3) must not exceed --max-spare (2)")
          (list (cfg 'max-memory 100 'max-memory-hard 50)
                "raco-fastcgi: --max-memory-hard (50) must not be below --max-memory (100)")
          (list (cfg 'pm 'dynamic 'min-spare 5 'max-spare 9 'max-workers 4)
                "raco-fastcgi: --min-spare (5) must not exceed --max-workers (4)")
          (list (cfg 'pm 'static 'min-spare 5 'max-spare 9 'max-workers 4) #f)
          (list (cfg 'max-memory 100 'max-memory-hard 100) #f)
          (list (cfg) #f)))
  (for ([row (in-list table)] [i (in-naturals)])
    (check-equal? (refusal (λ () (check-pool! (first row)))) (second row) (format "row ~a" i))))
