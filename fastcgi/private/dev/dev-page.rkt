#lang racket/base
;; The pages `raco fastcgi dev` makes itself: its errors and the 404 of --static. The dev
;; front answers HTTP with web-server's responses; their reason phrases are cgi.rkt's, as
;; for every answer of the server.
(require web-server/http
         (only-in "../protocol/cgi.rkt" status-reason))
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
  (string->bytes/latin-1 (status-reason code)))
