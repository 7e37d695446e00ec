#lang racket/base
;; dev-files.rkt: file stamps (a change of time, size or inode shows; a missing file is
;; #f) and the test of a path against folders, by tables in this process.
(require racket/file
         racket/path
         rackunit
         "../fastcgi/private/dev/dev-files.rkt"
         "integration/lib.rkt")

(test-case "file-stamp: time, size and inode; a rename over the file changes it; #f when missing"
  (call-with-temp-dir
   "fcgi-dfiles"
   (λ (dir)
     (define f (build-path dir "a.rkt"))
     (check-false (file-stamp f))
     (display-to-file "one" f)
     (define s1 (file-stamp f))
     (check-equal? (length s1) 3)
     (check-equal? (cadr s1) 3 "the size")
     (check-equal? (caddr s1) (hash-ref (file-or-directory-stat f) 'inode))
     (check-equal? (file-stamp f) s1 "unchanged: the same stamp")
     ;; the same size and (within a tick) maybe the same time: the inode differs
     (define tmp (build-path dir "a.rkt.new"))
     (display-to-file "two" tmp)
     (rename-file-or-directory tmp f #t)
     (check-not-equal? (file-stamp f) s1 "saved by renaming a new file over it")
     (display-to-file "three" f #:exists 'truncate)
     (check-equal? (cadr (file-stamp f)) 5)
     (delete-file f)
     (check-false (file-stamp f)))))

(test-case "in-dirs?: strictly inside one of the folders, after simplifying the path"
  (define dirs (map simple-form-path (list "/srv/app" "/usr/share/racket")))
  (define table
    '(("/srv/app/main.rkt" #t)
      ("/srv/app/lib/x.rkt" #t)
      ("/srv/app/../app/x.rkt" #t)
      ("/usr/share/racket/collects/racket/base.rkt" #t)
      ("/srv/app" #f)
      ("/srv/application/x.rkt" #f)
      ("/srv/app/../other/x.rkt" #f)
      ("/srv/x.rkt" #f)))
  (for ([row (in-list table)])
    (check-equal? (in-dirs? (string->path (car row)) dirs) (cadr row) (car row)))
  (check-false (in-dirs? (string->path "/srv/app/x.rkt") '())))
