#lang racket/base
;; serve-app.rkt: load-configured-app, the loader the workers, the single process and
;; `serve --check` share, in this process: a raw handler, a servlet, and an app that cannot
;; load, which is one line through the given fail (never a stack trace). The worker
;; serving for real: every test that starts `raco fastcgi serve` (manager-test,
;; watchdog-test, cli-test ...); its start from its command line: worker-main-test.
(require racket/file
         racket/string
         rackunit
         "../fastcgi/private/worker/config.rkt"
         "../fastcgi/private/worker/serve-app.rkt"
         "integration/lib.rkt"
         "lib/app-sources.rkt")

;; load : path string -> (or/c (list handler roles servlet) (list 'failed string))
(define (load dir source #:name [name "app.rkt"])
  (define app (build-path dir name))
  (when source (display-to-file source app #:exists 'truncate))
  (let/ec k
    (define-values (handler roles servlet)
      (load-configured-app (make-serve-config #:app (path->string app))
                           (λ (msg) (k (list 'failed msg)))))
    (list handler roles servlet)))

(test-case "a raw handler: its procedure, the responder role, no servlet"
  (call-with-temp-dir
   "fcgi-wload"
   (λ (dir)
     (define r (load dir good-source))
     (check-pred procedure? (car r))
     (check-regexp-match #rx"responder" (format "~a" (cadr r)))
     (check-false (caddr r)))))

(test-case "a servlet (start): loaded as a servlet"
  (call-with-temp-dir
   "fcgi-wload"
   (λ (dir)
     (define r (load dir (string-append "#lang racket/base\n(require web-server/http)\n(provide start)\n"
                                        "(define (start req) (response/output void))\n")))
     (check-pred procedure? (car r))
     (check-not-false (caddr r)))))

(test-case "an app that cannot load: one line through fail, naming the file"
  (call-with-temp-dir
   "fcgi-wload"
   (λ (dir)
     ;; source -> the message after "cannot load APP: "
     (define table
       (list (list broken-source #rx"^app: broken at load$")
             (list "#lang racket/base\n(provide x)\n(define x 1)\n" #rx"fastcgi-handler|start")
             (list "#lang racket/base\n(define (f)\n" #rx"read-syntax")))
     (for ([row (in-list table)] [i (in-naturals)])
       ;; a file of its own each (a module is loaded once per path)
       (define app (path->string (build-path dir (format "app~a.rkt" i))))
       (define r (load dir (car row) #:name (format "app~a.rkt" i)))
       (check-equal? (car r) 'failed (car row))
       (define prefix (string-append "cannot load " app ": "))
       (check-true (string-prefix? (cadr r) prefix) (cadr r))
       (check-regexp-match (cadr row) (substring (cadr r) (string-length prefix)))
       (check-false (regexp-match? #rx"\n" (cadr r)) "one line"))
     (define missing (load dir #f #:name "none.rkt"))
     (check-equal? (car missing) 'failed)
     (check-regexp-match #rx"^cannot load .*none.rkt: " (cadr missing)))))
