#lang racket/base
;; The pages `raco fastcgi dev` makes itself: its errors and the 404 of --static.
(require web-server/http
         web-server/http/status-code)
(provide error-page status-message)

;; error-page : natural string string string -> response
(define (error-page code title text hint)
  (response/xexpr
   #:code code
   #:message (status-message code)
   `(html (head (title ,title))
          (body (h1 ,title) (pre ,text) (p ,hint)))))

;; status-message : natural -> bytes
(define (status-message code)
  (string->bytes/utf-8 (or (message-for-status-code code) "Status")))
