#lang racket/base
;; The public API's serve procedures (fastcgi/main.rkt): the keyword options each takes,
;; what it refuses (as contracts would), and how #:port, #:listen-ip and the listener's settings
;; become the listener.
(require racket/file
         racket/tcp
         rackunit
         (only-in web-server/http response/xexpr)
         (only-in "../fastcgi/client.rkt" [fastcgi-request client-request])
         "../fastcgi/main.rkt")

(define shared '(#:allowed-clients #:backlog #:limits #:listen #:listen-ip #:on-ready #:port
                 #:roles #:socket-group #:socket-mode #:socket-owner))

;; keywords : procedure -> (list required accepted)
(define (keywords f)
  (define-values (required accepted) (procedure-keywords f))
  (list required accepted))

(define (handler r) (write-bytes #"Content-Type: text/plain\r\n\r\nok" (fastcgi-request-stdout r)))

;; serve : keyword-options ... -> (values address stop)
;; serve/fastcgi-raw with these options, and the address its #:on-ready was told.
(define serve
  (make-keyword-procedure
   (λ (kws vals)
     (define address #f)
     (define options (sort (cons (cons '#:on-ready (λ (a) (set! address a))) (map cons kws vals))
                           keyword<? #:key car))
     (define stop (keyword-apply serve/fastcgi-raw (map car options) (map cdr options)
                                 (list handler)))
     (values address stop))))

(test-case "serve/fastcgi and serve/fastcgi-raw: the keywords each takes, none required"
  (check-equal? (keywords serve/fastcgi-raw) (list '() shared))
  (check-equal? (keywords serve/fastcgi)
                (list '() (sort (append '(#:continuation-timeout #:manager #:servlet-memory) shared)
                                keyword<?))))

(test-case "bad options are contract errors naming the option"
  (for ([row (in-list `((#:backlog 0) (#:socket-mode ,#o10000) (#:port 65536)
                        (#:roles (filter)) (#:socket-owner -1)))])
    (check-exn (λ (e) (and (exn:fail:contract? e)
                           (regexp-match? (regexp (keyword->string (car row))) (exn-message e))))
               (λ () (keyword-apply serve/fastcgi (list (car row)) (cdr row) (list (λ (r) r))))
               (format "~s" row))))

(test-case "#:port and #:listen-ip: an IPv4 address, an IPv6 one in brackets"
  (for ([ip '("127.0.0.1" "::1")]
        [rx (list #rx"^127[.]0[.]0[.]1:([0-9]+)$" #rx"^\\[::1\\]:([0-9]+)$")])
    (define-values (address stop) (serve #:port 0 #:listen-ip ip))
    (define m (regexp-match rx address))
    (check-true (and m #t) address)
    (when m
      (define-values (in out) (tcp-connect ip (string->number (cadr m))))
      (close-output-port out)
      (close-input-port in))
    (stop)))

(test-case "a unix socket's mode: the default 0660, or #:socket-mode"
  (define dir (make-temporary-file "fcgi-main-~a" 'directory))
  (define path (path->string (build-path dir "app.sock")))
  (define (check-mode mode kws vals)
    (define-values (address stop)
      (keyword-apply serve (cons '#:listen kws) (cons (string-append "unix:" path) vals) '()))
    (check-equal? address (string-append "unix:" path))
    (check-equal? (file-or-directory-permissions path 'bits) mode)
    (stop))
  (check-mode #o660 '() '())
  (check-mode #o600 '(#:socket-mode) (list #o600))
  (delete-directory/files dir))

(test-case "make-limits: its keywords, and a bad value is a contract error naming its keyword"
  (check-equal? (keywords make-limits)
                (list '() '(#:connection-buffer #:drain-timeout #:first-byte-timeout #:idle-timeout
                            #:max-body #:max-concurrent #:max-connections #:max-params-bytes
                            #:max-params-pairs #:max-queue-delay #:max-requests-per-connection
                            #:read-timeout #:request-memory #:request-timeout #:stdin-buffer
                            #:write-timeout)))
  (check-true (limits? (make-limits #:max-body 0 #:request-timeout #f #:idle-timeout 0.5)))
  (for ([row (in-list '((#:max-body -1) (#:max-params-bytes 0) (#:max-requests-per-connection 65536)
                        (#:idle-timeout 0) (#:request-timeout 0) (#:request-memory 1.5)
                        (#:max-queue-delay "1") (#:drain-timeout -1)))])
    (check-exn (λ (e) (and (exn:fail:contract? e)
                           (regexp-match? (regexp (keyword->string (car row))) (exn-message e))))
               (λ () (keyword-apply make-limits (list (car row)) (cdr row) '()))
               (format "~s" row))))

(test-case "other arguments the public procedures check"
  (check-exn exn:fail:contract? (λ () (fastcgi-param 'not-a-request #"X")))
  (check-exn #rx"#:variables" (λ () (response/authorized #:variables '((a . 1)))))
  (check-exn exn:fail:contract? (λ () (serve/fastcgi-raw (λ () 'no-argument))))
  (check-exn #rx"#:on-ready" (λ () (serve/fastcgi-raw handler #:on-ready 5)))
  (check-exn #rx"#:continuation-timeout" (λ () (serve/fastcgi (λ (r) r) #:continuation-timeout 0)))
  (define-values (address stop) (serve #:port 0))
  (check-exn #rx"#:timeout" (λ () (stop #:timeout -1)))
  (stop #:timeout 1))

(test-case "a servlet that answers something other than a response: 500, and the server goes on"
  (define calls 0)
  (define address #f)
  (define stop (serve/fastcgi (λ (req) (set! calls (add1 calls)) (if (= calls 1) 'not-a-response (response/xexpr "fine")))
                              #:port 0 #:on-ready (λ (a) (set! address a))))
  (define-values (status1 headers1 body1) (client-request address))
  (check-equal? status1 500)
  (define-values (status2 headers2 body2) (client-request address))
  (check-equal? status2 200)
  (stop))
