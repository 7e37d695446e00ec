#lang racket/base
;; dev-static.rkt: which file a URL names under --static's folders, and what is refused
;; (a way out of them), by a table in this process against files in a temp folder; and the
;; dispatcher's answers over a real web-server connection object (HEAD and GET of a file,
;; 404 for a way out, the next dispatcher for the rest). `raco fastcgi dev --static` for
;; real: dev-test.
(require net/url
         racket/file
         racket/path
         racket/port
         racket/promise
         rackunit
         web-server/dispatchers/dispatch
         web-server/http
         web-server/private/connection-manager
         "integration/lib.rkt")
(require/expose "../fastcgi/private/dev/dev-static.rkt" (static-file static-dispatcher))

(define (with-dirs proc)
  (call-with-temp-dir
   "fcgi-static"
   (λ (dir)
     (define a (build-path dir "a"))
     (define b (build-path dir "b"))
     (for ([d (list a b (build-path a "sub") (build-path b "only-dir"))]) (make-directory d))
     (display-to-file "A" (build-path a "x.txt"))
     (display-to-file "A-sub" (build-path a "sub" "y.css"))
     (display-to-file "B" (build-path b "x.txt"))
     (display-to-file "B-only" (build-path b "z.txt"))
     (display-to-file "secret" (build-path dir "secret.txt"))
     (make-file-or-directory-link (build-path dir "secret.txt") (build-path a "out.txt"))
     (make-file-or-directory-link (build-path a "sub" "y.css") (build-path a "in.css"))
     (proc dir (list (simple-form-path a) (simple-form-path b))))))

(test-case "static-file: the first folder that has the file; refused ways out; #f for the rest"
  (with-dirs
   (λ (dir dirs)
     (define (rel p) (if (path? p) (path->string (find-relative-path (simple-form-path dir) p)) p))
     ;; URL -> the file (relative to the temp folder), 'refused or #f
     (define table
       '(("/x.txt" "a/x.txt")
         ("/z.txt" "b/z.txt")
         ("/sub/y.css" "a/sub/y.css")
         ("/./sub//y.css" "a/sub/y.css")
         ("/in.css" "a/sub/y.css")
         ("/x.txt?v=1" "a/x.txt")
         ("/../secret.txt" refused)
         ("/sub/../../secret.txt" refused)
         ("/%2e%2e/secret.txt" refused)
         ("/out.txt" refused)
         ("/missing.txt" #f)
         ("/sub" #f)
         ("/only-dir" #f)
         ("/" #f)
         ("/a%2Fx.txt" #f)
         ("/x%00.txt" #f)))
     (for ([row (in-list table)])
       (check-equal? (rel (static-file dirs (string->url (car row)))) (cadr row) (car row))))))

;; serve : dispatcher string bytes -> (or/c string 'next) ; what is written for a request
(define (serve dispatcher uri method)
  (define out (open-output-bytes))
  (define conn (new-connection (start-connection-manager) 60 (open-input-bytes #"") out
                               (make-custodian) #f))
  (with-handlers ([exn:dispatcher? (λ (e) 'next)])
    (dispatcher conn (request method (string->url uri) '() (delay '()) #f "127.0.0.1" 80 "127.0.0.1"))
    (bytes->string/latin-1 (get-output-bytes out))))

(test-case "static-dispatcher: GET and HEAD of a file, 404 for a way out, the app for the rest"
  (with-dirs
   (λ (dir dirs)
     (define d (static-dispatcher dirs))
     (define got (serve d "/x.txt" #"GET"))
     (check-regexp-match #rx"^HTTP/1.1 200 OK\r\n" got)
     (check-regexp-match #rx"Content-Type: text/plain" got)
     (check-regexp-match #rx"\r\n\r\nA$" got)
     (check-regexp-match #rx"Content-Type: text/css" (serve d "/sub/y.css" #"GET"))
     (define head (serve d "/z.txt" #"HEAD"))
     (check-regexp-match #rx"^HTTP/1.1 200 OK\r\n" head)
     (check-regexp-match #rx"\r\n\r\n$" head)
     (define refused (serve d "/../secret.txt" #"GET"))
     (check-regexp-match #rx"^HTTP/1.1 404 Not Found\r\n" refused)
     (check-false (regexp-match? #rx"secret\r?$" refused))
     (for ([case (list (list "/x.txt" #"POST") (list "/missing.txt" #"GET") (list "/" #"HEAD"))])
       (check-equal? (apply serve d case) 'next (format "~s" case))))))
