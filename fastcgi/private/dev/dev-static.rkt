#lang racket/base
;; `raco fastcgi dev --static DIR`: the files under DIR, served before the app as
;; serve/servlet's #:extra-files-paths serves them, with no way out of DIR.
(require net/url
         racket/path
         web-server/dispatchers/dispatch
         (only-in web-server/dispatchers/dispatch-files read-range-header)
         web-server/http
         web-server/http/response
         web-server/private/mime-types
         "dev-files.rkt"
         "dev-page.rkt")
(provide static-dispatcher)

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
    [f (output-file conn f method (path->mime-type f) (read-range-header (request-headers/raw req)))]
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
