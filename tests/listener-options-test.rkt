#lang racket/base
;; A listener's settings (fastcgi/private/transport/listener-options.rkt): the defaults, each keyword
;; of make-listener-options, and the values it refuses. A table, no sockets.
(require rackunit
         "../fastcgi/private/transport/listener-options.rkt")

;; fields : listener-options -> (list backlog socket-mode socket-owner socket-group)
(define (fields o)
  (list (listener-options-backlog o) (listener-options-socket-mode o)
        (listener-options-socket-owner o) (listener-options-socket-group o)))

(test-case "the defaults: backlog 1024, mode 0660, owner and group left as created"
  (check-equal? (fields default-listener-options) (list 1024 #o660 #f #f))
  (check-equal? (make-listener-options) default-listener-options))

(test-case "each keyword sets its field, the others keep their defaults"
  (for ([row (in-list `((#:backlog 16 (16 ,#o660 #f #f))
                        (#:socket-mode ,#o600 (1024 ,#o600 #f #f))
                        (#:socket-owner "www-data" (1024 ,#o660 "www-data" #f))
                        (#:socket-owner 33 (1024 ,#o660 33 #f))
                        (#:socket-group "nginx" (1024 ,#o660 #f "nginx"))
                        (#:socket-group 0 (1024 ,#o660 #f 0))))])
    (define-values (kw v expected) (apply values row))
    (check-equal? (fields (keyword-apply make-listener-options (list kw) (list v) '()))
                  expected
                  (format "~a ~s" kw v))))

(test-case "bad values are refused, naming the keyword"
  (for ([row (in-list `((#:backlog 0) (#:backlog 1.5) (#:socket-mode ,#o10000)
                        (#:socket-mode -1) (#:socket-owner -1) (#:socket-group owner)))])
    (check-exn (λ (e) (and (exn:fail:contract? e)
                           (regexp-match? (regexp (keyword->string (car row))) (exn-message e))))
               (λ () (keyword-apply make-listener-options (list (car row)) (cdr row) '()))
               (format "~s" row))))
