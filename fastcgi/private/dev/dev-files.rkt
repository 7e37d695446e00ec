#lang racket/base
;; What `raco fastcgi dev`, the app's process and --static share: file stamps and the
;; test of a path against folders.
(require racket/list
         racket/path)
(provide file-stamp in-dirs?)

;; file-stamp : path -> (or/c (list integer natural natural) #f)
;; Modification time in nanoseconds, size and inode; #f for a missing file. The inode
;; changes when an editor saves by renaming a new file over the old one, even within
;; one tick of the file system's clock.
(define (file-stamp p)
  (with-handlers ([exn:fail:filesystem? (λ (e) #f)])
    (define s (file-or-directory-stat p))
    (list (hash-ref s 'modify-time-nanoseconds) (hash-ref s 'size) (hash-ref s 'inode))))

;; in-dirs? : path (listof path) -> boolean ; is p inside one of the (simple-form) dirs
(define (in-dirs? p dirs)
  (define parts (explode-path (simple-form-path p)))
  (for/or ([d (in-list dirs)])
    (define d-parts (explode-path d))
    (and (< (length d-parts) (length parts))
         (equal? d-parts (take parts (length d-parts))))))
