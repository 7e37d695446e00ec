#lang racket/base
;; The same answer by response/full (contracted, no procedure argument to wrap).
(require web-server/http)
(provide start)
(define (start req)
  (response/full 200 #"OK" (current-seconds) #"text/plain" '() '(#"Hello, World!\n")))
