#lang racket/base
;; dev-page.rkt: the pages `raco fastcgi dev` makes itself, web-server responses whose
;; reason phrases are cgi.rkt's. In this process.
(require racket/port
         racket/string
         rackunit
         web-server/http
         web-server/http/response
         web-server/private/connection-manager
         "../fastcgi/private/dev/dev-page.rkt")

;; written : response -> string ; the response as web-server writes it
(define (written r)
  (define out (open-output-bytes))
  (define conn (new-connection (start-connection-manager) 60 (open-input-bytes #"") out
                               (make-custodian) #f))
  (output-response conn r)
  (bytes->string/utf-8 (get-output-bytes out)))

(test-case "status-message: the reason phrase of each code, as bytes"
  (define table
    '((200 #"OK") (404 #"Not Found") (500 #"Internal Server Error") (502 #"Bad Gateway")
      (503 #"Service Unavailable")))
  (for ([row (in-list table)])
    (check-equal? (status-message (car row)) (cadr row) (format "~a" (car row)))))

(test-case "error-page: the code and its reason, a title, the text as preformatted, a hint; escaped"
  (define r (error-page 502 "Load error" "app.rkt:3:0: <bad> & worse" "Fix it and reload."))
  (check-equal? (response-code r) 502)
  (check-equal? (response-message r) #"Bad Gateway")
  (define text (written r))
  (check-regexp-match #rx"^HTTP/1.1 502 Bad Gateway\r\n" text)
  (check-regexp-match #rx"Content-Type: text/html" text)
  (check-true (string-contains? text "<title>Load error</title>"))
  (check-true (string-contains? text "<h1>Load error</h1>"))
  (check-true (string-contains? text "<pre>app.rkt:3:0: &lt;bad&gt; &amp; worse</pre>"))
  (check-true (string-contains? text "<p>Fix it and reload.</p>")))
