#lang racket/base
;; `raco fastcgi dev --static DIR`: the files under DIR, served before the app as
;; serve/servlet's #:extra-files-paths serves them, with no way out of DIR.
;; A file goes out through web-server's output-file with the Range header read by its
;; read-range-header, as its files dispatcher does; neither is documented, so both are
;; checked at load (checked-file-output): where either is not as expected, a file goes out
;; whole, without ranges, with one line.
(require net/url
         racket/path
         racket/port
         web-server/dispatchers/dispatch
         (only-in web-server/dispatchers/dispatch-files read-range-header)
         web-server/http
         web-server/http/response
         web-server/private/mime-types
         "dev-files.rkt"
         "dev-page.rkt"
         "../util/probes.rkt")
(provide static-dispatcher
         checked-file-output)

(define path->mime-type
  (make-path->mime-type (collection-file-path "mime.types" "web-server" "default-web-root")))

;; static-dispatcher : (listof path) -> dispatcher
;; GET and HEAD of a file under one of dirs (the first that has it); 404 for a path that
;; leads out of them; anything else goes to the next dispatcher (the app).
(define ((static-dispatcher dirs) conn req)
  (define method (request-method req))
  (unless (regexp-match? #rx#"^(?i:get|head)$" method)
    (next-dispatcher))
  (define f (static-file dirs (request-uri req)))
  (cond
    [(eq? f 'refused)
     (output-response/method conn (error-page 404 "Not Found" (url->string (request-uri req)) "") method)]
    [f (file-output conn f method (path->mime-type f) (request-headers/raw req))]
    [else (next-dispatcher)]))

;; static-file : (listof path) url -> (or/c path 'refused #f)
;; The regular file the URL's path names under one of dirs, its symbolic links resolved.
;; 'refused: a `..` segment (percent-encoded or not), or a link that leads out of its
;; folder. #f: no such file, or a segment that cannot be a file name.
(define (static-file dirs u)
  (define segments
    (for/list ([s (in-list (map path/param-path (url-path u)))]
               #:unless (member s '(same "" ".")))
      s))
  (cond
    [(for/or ([s (in-list segments)]) (member s '(up ".."))) 'refused]
    [(or (null? segments) (for/or ([s (in-list segments)]) (regexp-match? #rx"[/\0]" s))) #f]
    [else
     (for/or ([d (in-list dirs)])
       (define p (apply build-path d segments))
       (and (file-exists? p)
            (let ([real (normalize-path p)])
              (cond
                [(not (in-dirs? real (list d))) 'refused]
                [(eq? (file-or-directory-type real) 'file) real]
                [else #f]))))]))

;; checked-file-output : procedure procedure
;;                       -> (connection path bytes (or/c bytes #f) (listof header) -> void)
;; A file's answer through output (output-file) with ranges read by read-ranges
;; (read-range-header), where output takes a connection, a path, a method, a type and
;; ranges, and read-ranges reads "bytes=0-9" as ((0 . 9)); else the whole file, with a line.
(define (checked-file-output output read-ranges)
  (if (assumption-holds?
       "web-server's output-file and read-range-header"
       (λ ()
         (define a (arity-probe read-ranges 1))
         (cond
           [(not (eq? a #t)) (string-append "read-range-header " a)]
           [(not (procedure-arity-includes? output 5))
            (format "output-file takes ~a arguments, expected 5" (procedure-arity output))]
           [else
            (define r (read-ranges (list (header #"Range" #"bytes=0-9"))))
            (or (equal? r '((0 . 9))) (format "read-range-header reads bytes=0-9 as ~.s" r))]))
       "files are served whole, without ranges")
      (λ (conn f method mime headers) (output conn f method mime (read-ranges headers)))
      (λ (conn f method mime headers)
        (output-response/method
         conn
         (response/output (λ (out) (call-with-input-file f (λ (in) (copy-port in out))))
                          #:mime-type mime)
         method))))

(define file-output (checked-file-output output-file read-range-header))
