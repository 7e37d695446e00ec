#lang racket/base
;; The app's process under `raco fastcgi dev` (the `child` submodule), and the command
;; line that starts it. The supervisor is dev-reload.rkt.
;;
;; The app's process: racket -l racket/base -e '(require (submod (file DEV-CHILD.rkt) child))' CONFIG DEV
;; CONFIG is run-single's configuration (single.rkt), a serve-config as config.rkt's
;; write-serve-config writes it; DEV is a `write`n hash of what the process does for dev:
;;   dev-files: the file this process appends a line to for every module file it loads:
;;     `(app PATH STAMP)` for the app's own files, before it loads them, `(lib PATH)` for
;;     the others, and `(uses SHIFT PATH)` for each library an app module requires;
;;   dev-error: the file that receives the error when the app does not load;
;;   warm-from: a copy of the dev-files of an earlier process of the same app (it may be
;;     missing);
;;   system-dirs: the folders whose modules are not the app's;
;;   parent-pid: dev's pid; this process gets SIGTERM when dev dies;
;;   dev-dir: dev's temporary folder, which this process removes when dev died first.
;; What the process does: dev-child-main.rkt.
(require racket/runtime-path
         "../worker/config.rkt")
(provide child-arguments)

(define-runtime-path this-file "dev-child.rkt")

;; child-arguments : serve-config hash -> (listof string)
;; The arguments of racket that start the app's process with configuration cfg and dev's
;; settings dev (the hash above).
(define (child-arguments cfg dev)
  (define config-text (let ([o (open-output-string)]) (write-serve-config cfg o) (get-output-string o)))
  (list "-N" "fastcgi-dev-app" "-l" "racket/base"
        "-e" (format "(require (submod (file ~s) child))" (path->string this-file))
        config-text
        (format "~s" dev)))

;; The app's process (the command line above), which runs dev-child-main.rkt.
(module child racket/base
  (require "dev-child-main.rkt")
  (run-dev-child (current-command-line-arguments)))
