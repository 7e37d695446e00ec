#lang racket/base
;; A guestbook: a servlet routed with dispatch-rules, pages built from xexpr templates,
;; and a form whose POST redirects back (303, so a reload does not post twice).
;;   raco fastcgi serve examples/servlet.rkt --listen unix:/tmp/servlet.sock
;;   raco fastcgi dev examples/servlet.rkt
(require racket/list
         racket/string
         web-server/dispatch
         web-server/http)
(provide start)

;; The last entries, newest first, shared by every request: a semaphore keeps the
;; read-modify-write of two concurrent POSTs from losing one.
(define max-entries 50)
(define entries '())
(define entries-lock (make-semaphore 1))

;; add-entry! : string string -> void
(define (add-entry! name message)
  (call-with-semaphore
   entries-lock
   (λ () (set! entries (take (cons (cons name message) entries)
                             (min max-entries (add1 (length entries))))))))

;; ---------------------------------------------------------------------------------------
;; Templates: procedures from data to xexprs. Strings in an xexpr are escaped when the
;; page is written, so what visitors type cannot add markup.

;; page : string xexpr ... -> xexpr
(define (page title . body)
  `(html (head (meta ([charset "utf-8"])) (title ,title))
         (body (h1 ,title) ,@body
               (footer (p (a ([href ,(url-for home)]) "Guestbook") " · "
                          (a ([href ,(url-for hello "world")]) "Hello"))))))

;; entry-item : (cons string string) -> xexpr
(define (entry-item e)
  `(li (strong ,(car e)) ": " ,(cdr e)))

;; sign-form : (or/c string #f) -> xexpr ; the form, with an error line when given one
(define (sign-form problem)
  `(form ([method "post"] [action ,(url-for sign)])
         ,@(if problem `((p ([class "error"]) ,problem)) '())
         (label "Name " (input ([name "name"] [maxlength "40"])))
         (label "Message " (input ([name "message"] [maxlength "200"])))
         (button ([type "submit"]) "Sign")))

;; ---------------------------------------------------------------------------------------
;; Handlers.

;; home : request [string] [natural] -> response
(define (home req [problem #f] [code 200])
  (define shown (call-with-semaphore entries-lock (λ () entries)))
  (response/xexpr
   #:code code
   (page "Guestbook"
         (if (null? shown)
             '(p "Nobody has signed yet.")
             `(ul ,@(map entry-item shown)))
         (sign-form problem))))

;; sign : request -> response ; 303 back home, or the page again with a 400
(define (sign req)
  (define (field name)
    (define b (bindings-assq name (request-bindings/raw req)))
    (if (binding:form? b)
        (string-trim (bytes->string/utf-8 (binding:form-value b) #\uFFFD))
        ""))
  (define name (field #"name"))
  (define message (field #"message"))
  (cond
    [(or (string=? name "") (string=? message "")
         (> (string-length name) 40) (> (string-length message) 200))
     (home req "Both a name (up to 40 characters) and a message (up to 200) are needed." 400)]
    [else
     (add-entry! name message)
     (redirect-to (url-for home) see-other)]))

;; hello : request string -> response
(define (hello req who)
  (response/xexpr (page (format "Hello, ~a!" who) `(p "Served over FastCGI."))))

;; not-found : request -> response
(define (not-found req)
  (response/xexpr #:code 404 (page "Not found" `(p "No page here."))))

(define-values (start url-for)
  (dispatch-rules
   [("") #:method (or "get" "head") home]
   [("sign") #:method "post" sign]
   [("hello" (string-arg)) hello]
   [else not-found]))
