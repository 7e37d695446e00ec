#lang racket/base
;; The servlet of the bench's continuation scenario (bench/run.rkt, relay-rows): GET /
;; answers a continuation URL (send/suspend/dispatch with embed/url); each GET of that URL
;; resumes the continuation, which answers Hello, World!.
(require web-server/servlet)
(provide start)

(define (start req)
  (send/suspend/dispatch
   (λ (embed/url)
     ;; embed/url before the response: its output procedure runs after the servlet returns
     (define url (embed/url hello))
     (response/output (λ (out) (write-string url out)) #:mime-type #"text/plain"))))

(define (hello req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out)) #:mime-type #"text/plain"))
