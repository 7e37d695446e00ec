#lang racket/base
;; What a process loads: a raw application (the library, or `raco fastcgi serve` loading
;; the app file) runs without web-server, whose modules and the adapter's come to about
;; 30 MiB of resident memory per process; a servlet loads them on first use and works.
;; Each case runs in a fresh racket, since this test's own process may have loaded
;; anything.
(require racket/file
         racket/port
         racket/system
         rackunit)

(define racket-exe (find-system-path 'exec-file))
(define here (let-values ([(dir name _) (split-path (path->complete-path (syntax-source #'here)))]) dir))
(define main (path->string (simplify-path (build-path here ".." "fastcgi" "main.rkt"))))
(define client (path->string (simplify-path (build-path here ".." "fastcgi" "client.rkt"))))
(define app-module (path->string (simplify-path (build-path here ".." "fastcgi" "private" "worker" "app.rkt"))))
(define limits-module (path->string (simplify-path (build-path here ".." "fastcgi" "private" "util" "limits.rkt"))))

(define dir (make-temporary-file "fastcgi-footprint-~a" 'directory))

;; run-program : string -> string ; a racket/base program's standard output (error: fails)
(define (run-program source)
  (define file (build-path dir "prog.rkt"))
  (with-output-to-file file #:exists 'truncate (λ () (write-string source)))
  (define err (open-output-string))
  (define out
    (with-output-to-string
      (λ () (parameterize ([current-error-port err])
              (unless (system* racket-exe (path->string file))
                (error 'footprint "program failed: ~a" (get-output-string err)))))))
  out)

(define prelude
  (string-append
   "#lang racket/base\n"
   (format "(require (file ~s) (file ~s))\n" main client)
   "(define (web?) (module-declared? '(lib \"web-server/http/request-structs.rkt\") #f))\n"
   (format "(define sock ~s)\n" (string-append "unix:" (path->string (build-path dir "s.sock"))))
   "(define (get) (call-with-values (λ () (fastcgi-request sock)) (λ (status headers body) (list status body))))\n"))

(test-case "a raw handler served by the library: web-server never loads"
  (check-equal?
   (run-program
    (string-append
     prelude
     "(define stop (serve/fastcgi-raw (λ (r) (write-bytes #\"Status: 200 OK\\r\\n\\r\\nraw\" (fastcgi-request-stdout r))) #:listen sock))\n"
     "(write (list (web?) (get)))\n"
     "(stop)\n"))
   (format "~s" (list #f (list 200 #"raw")))))

(test-case "a raw app file loaded as raco fastcgi serve loads it: web-server never loads"
  (define app (build-path dir "raw-app.rkt"))
  (with-output-to-file app #:exists 'truncate
    (λ () (write-string (format "#lang racket/base\n(require (file ~s))\n(provide fastcgi-handler)\n(define (fastcgi-handler r) (write-bytes #\"Status: 200 OK\\r\\n\\r\\napp\" (fastcgi-request-stdout r)))\n" main))))
  (check-equal?
   (run-program
    (string-append
     prelude
     (format "(define-values (handler roles servlet) ((dynamic-require '(file ~s) 'load-app) ~s ((dynamic-require '(file ~s) 'make-limits))))\n"
             app-module (path->string app) limits-module)
     "(define stop (serve/fastcgi-raw handler #:listen sock))\n"
     "(write (list (web?) (get)))\n"
     "(stop)\n"))
   (format "~s" (list #f (list 200 #"app")))))

(test-case "a servlet loads web-server on first use, and is served"
  (check-equal?
   (run-program
    (string-append
     prelude
     "(define before (web?))\n"
     "(define stop (serve/fastcgi (λ (req) ((dynamic-require 'web-server/http 'response/output) (λ (o) (write-bytes #\"servlet\" o)))) #:listen sock))\n"
     "(write (list before (web?) (get)))\n"
     "(stop)\n"))
   (format "~s" (list #f #t (list 200 #"servlet")))))

(define cli-run (path->string (simplify-path (build-path here ".." "fastcgi" "private" "cli" "cli-run.rkt"))))
(define serve-cli (path->string (simplify-path (build-path here ".." "fastcgi" "private" "cli" "serve-cli.rkt"))))
(define (worker-module name) (path->string (simplify-path (build-path here ".." "fastcgi" "private" "worker" name))))
(define worker (worker-module "worker.rkt"))

;; declared : (listof string) -> string ; a program that prints which of the libraries that
;; cost a process most (racket/contract and what loads it) are declared after these, and
;; of those that start siblings by name (racket/runtime-path and compiler/find-exe: about
;; 0.4 MiB of heap on top of the FFI's setup/dirs; util/relative-path.rkt and
;; os/racket-program.rkt do it with racket/base) or read a file whole (racket/file, 0.5 MiB)
(define (declared-after . requires)
  (string-append
   "#lang racket/base\n"
   (apply string-append (for/list ([r (in-list requires)]) (format "(require (file ~s))\n" r)))
   "(write (for/list ([m '(racket/contract/base racket/contract json xml racket/lazy-require\n"
   "                      racket/date racket/port racket/os racket/random web-server/http\n"
   "                      racket/runtime-path compiler/find-exe racket/file)]\n"
   "                  #:when (module-declared? m #f)) m))\n"))

(test-case "the manager (raco fastcgi serve) loads none of racket/contract, json, xml, lazy-require, runtime-path, file"
  (check-equal? (run-program (declared-after cli-run serve-cli)) "()"))

(test-case "a raw worker and its loader, with the app, load none of them either"
  (define app (build-path dir "raw-app2.rkt"))
  (with-output-to-file app #:exists 'truncate
    (λ () (write-string (format "#lang racket/base\n(require (file ~s))\n(provide fastcgi-handler)\n(define (fastcgi-handler r) (void))\n" main))))
  (check-equal? (run-program (declared-after (worker-module "worker-main.rkt") (worker-module "loader-main.rkt")
                                             worker (worker-module "loader.rkt") (path->string app)))
                "()"))

(delete-directory/files dir)
