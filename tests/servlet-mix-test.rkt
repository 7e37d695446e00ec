#lang racket/base
;; A servlet that declares itself stateless (#lang web-server/base, interface-version
;; 'stateless) yet captures stateful continuations through web-server/servlet's
;; send/suspend/dispatch, in the tutorial's style: a formlet with a file upload posted to
;; an embed/url continuation. Under serve/servlet (stateful) it works; web-server's
;; dispatcher gives a stateless servlet a manager that keeps nothing. Here it gets a
;; stateful manager alongside, and the first capture logs one warning naming the mix.
;; Served by `raco fastcgi serve` as a single process and as a pool of two forked workers
;; (a continuation URL reaches the worker that holds it); every wait is bounded.
(require racket/string
         rackunit
         "../fastcgi/client.rkt"
         "integration/lib.rkt"
         "lib/serve.rkt")

(define app-source #<<EOF
#lang web-server/base
(require web-server/servlet web-server/formlets)
(provide interface-version start)
(define interface-version 'stateless)
(define note-formlet
  (formlet (#%# ,{input-string . => . title} ,{(file-upload) . => . upload})
           (list title upload)))
(define (start req)
  (send/suspend/dispatch
   (λ (embed/url)
     (response/xexpr
      `(html (body (h1 "New note")
                   (form ([action ,(embed/url save)] [method "post"] [enctype "multipart/form-data"])
                         ,@(formlet-display note-formlet)
                         (input ([type "submit"])))))))))
(define (save req)
  (define v (formlet-process note-formlet req))
  (response/xexpr
   `(html (body (p ,(format "saved ~a: ~a (~a bytes)" (car v)
                            (binding:file-filename (cadr v))
                            (bytes-length (binding:file-content (cadr v)))))))))
EOF
  )

(define boundary "----fcgimix7MA4YWxkTrZu0gW")

;; multipart : (listof (list name (or/c string (cons filename bytes)))) -> bytes
(define (multipart fields)
  (apply bytes-append
         (append
          (for/list ([f (in-list fields)])
            (define v (cadr f))
            (bytes-append
             (string->bytes/utf-8
              (format "--~a\r\nContent-Disposition: form-data; name=\"~a\"~a\r\n~a\r\n"
                      boundary (car f)
                      (if (pair? v) (format "; filename=\"~a\"" (car v)) "")
                      (if (pair? v) "Content-Type: text/plain\r\n" "")))
             (if (pair? v) (cdr v) (string->bytes/utf-8 v))
             #"\r\n"))
          (list (string->bytes/utf-8 (format "--~a--\r\n" boundary))))))

;; new-note : string -> (values natural string) ; GET /, then the form posted with a file
(define (new-note address)
  (define-values (st0 hd0 page) (fastcgi-request address #:uri "/" #:timeout 20))
  (check-equal? st0 200 (bytes->string/utf-8 page #\?))
  (define action (regexp-match #rx#"action=\"([^\"]+)\"" page))
  (define names (map cadr (regexp-match* #rx#"name=\"([^\"]+)\"" page #:match-select values)))
  (check-equal? (length names) 2 (bytes->string/utf-8 page #\?))
  (cond
    [(and action (= 2 (length names)))
     (define body (multipart (list (list (car names) "groceries")
                                   (list (cadr names) (cons "list.txt" (make-bytes 1000 65))))))
     (define-values (st hd out)
       (fastcgi-request address #:method "POST" #:uri (bytes->string/utf-8 (cadr action))
                        #:headers (list (cons "Content-Type" (string-append "multipart/form-data; boundary=" boundary)))
                        #:body body #:timeout 20))
     (values st (bytes->string/utf-8 out #\?))]
    [else (values st0 "no form")]))

;; check-mix : served -> void
(define (check-mix s)
  (for ([_ (in-range 6)])
    (define-values (st text) (new-note (served-address s)))
    (check-equal? st 200 text)
    (check-regexp-match #rx"saved groceries: list.txt \\(1000 bytes\\)" text))
  (define log (file->string* (proc-stderr-file (served-proc s))))
  (define warnings (regexp-match* #rx"[^\n]*declares interface-version 'stateless[^\n]*captured a stateful continuation[^\n]*" log))
  (check-true (<= 1 (length warnings) 2) log)   ; once per process that captured one
  (check-regexp-match #rx"app[.]rkt declares interface-version 'stateless .*web-server/lang/web's send/suspend" (if (pair? warnings) (car warnings) ""))
  (check-false (regexp-match? #rx"No instance" log) log))

(define (file->string* p) (call-with-input-file p (λ (in) (let ([s (read-string 10000000 in)]) (if (eof-object? s) "" s)))))

(test-case "'stateless with web-server/servlet's send/suspend/dispatch and a file upload: pages, one warning (single process)"
  (call-with-served-app app-source '("--single-process") #:ready 0 #:name "fcgi-mix" check-mix))

(test-case "the same in a pool of two forked workers: each continuation reaches the worker that holds it"
  (call-with-served-app app-source '("--workers" "2") #:ready 2 #:name "fcgi-mix" check-mix))
