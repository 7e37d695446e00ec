#lang racket/base
;; The stateful servlet behind tests/integration/cluster-servlet-test.rkt (and an example of
;; what deploy/cluster/haproxy-sticky.cfg is for): a counter whose state lives only in its
;; continuations, in the memory of the worker process, on the host, that captured them.
;;
;; GET /counter?tag=T starts a session; each page says, on one line,
;;   <p id="state">host=H tag=T count=N hosts=H0,H1,...</p>
;; (H: $APP_HOST, the host that answered; hosts: the hosts that answered the session's
;; pages so far, newest first, as the continuation remembers them) and links to the next
;; step (send/suspend/dispatch: "next" adds one, "back" goes to count 0 of the same
;; session). Every page also carries X-App-Host: H. Resuming a continuation on a host that
;; did not capture it gets the servlet's expiration page.
(require racket/string
         web-server/servlet)
(provide start)

(define host (or (getenv "APP_HOST") "-"))

(define (start req)
  (define tag (let ([b (assq 'tag (request-bindings req))])
                (if (and b (regexp-match? #px"^[A-Za-z0-9_-]{1,40}$" (cdr b))) (cdr b) "-")))
  (let loop ([count 0] [seen '()])
    (define hosts (cons host seen))
    (send/suspend/dispatch
     (λ (embed/url)
       (response/xexpr
        #:headers (list (header #"X-App-Host" (string->bytes/utf-8 host)))
        `(html (head (title "counter"))
               (body (p ([id "state"])
                        ,(format "host=~a tag=~a count=~a hosts=~a" host tag count (string-join hosts ",")))
                     (p (a ([id "next"] [href ,(embed/url (λ (r) (loop (add1 count) hosts)))]) "next")
                        " "
                        (a ([id "back"] [href ,(embed/url (λ (r) (loop 0 hosts)))]) "back")))))))))
