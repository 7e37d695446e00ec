#lang racket/base
;; The public API's serve procedures (fastcgi/main.rkt): the keyword options each takes,
;; what its contract refuses, and how #:port, #:listen-ip and the listener's settings
;; become the listener.
(require racket/file
         racket/tcp
         rackunit
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
