#lang racket/base
;; with-errors-to-browser: an error becomes web-server's "Servlet Error" page.
(require web-server/servlet)
(provide start)

(define (start req)
  (with-errors-to-browser
   send/back
   (λ ()
     (when (assq 'boom (request-bindings req))
       (error 'start "the servlet failed on purpose"))
     (response/xexpr `(html (head (title "Fine")) (body (p "no error")))))))
