#lang web-server
;; The stateless servlet behind tests/integration/cluster-servlet-test.rkt: the same counter
;; as cluster-servlet-app.rkt, written in #lang web-server, so that its continuations are
;; serialized into its URLs (signed by the server under --secret-file) and any host that
;; has the same secret and the same file at the same path resumes them.
;;
;; GET /counter?tag=T starts a session; each page says, on one line,
;;   <p id="state">host=H tag=T count=N hosts=H0,H1,...</p>
;; H is $APP_HOST, read by the host that answers; tag, count and hosts (the hosts that
;; answered the session's pages so far, newest first) travel in the URL. Each page links
;; to the next step (send/suspend/dispatch) and carries X-App-Host: H.
(require racket/string)
(provide start)

(define host (or (getenv "APP_HOST") "-"))

(define (start req)
  (define tag (let ([b (assq 'tag (request-bindings req))])
                (if (and b (regexp-match? #px"^[A-Za-z0-9_-]{1,40}$" (cdr b))) (cdr b) "-")))
  (step tag 0 '()))

;; step : string natural (listof string) -> response ; one page, and the session after it
(define (step tag count seen)
  (define hosts (cons host seen))
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      #:headers (list (header #"X-App-Host" (string->bytes/utf-8 host)))
      `(html (head (title "counter"))
             (body (p ([id "state"])
                      ,(format "host=~a tag=~a count=~a hosts=~a" host tag count (string-join hosts ",")))
                   (p (a ([id "next"] [href ,(embed/url (λ (r) (step tag (add1 count) hosts)))]) "next"))))))))
