#lang racket/base
;; `raco fastcgi`: one handle-<command> per subcommand (serve's is serve-cli.rkt).
(require racket/list
         "../util/relative-path.rkt")
(provide main app-last)

(define commands
  '(("serve" "run an application as a FastCGI server")
    ("dev" "run an application behind a local HTTP front (no nginx needed)")
    ("request" "send a FastCGI request to any FastCGI server, like cgi-fcgi")
    ("ctl" "status, reload, stop or stacks of a running manager (by its pid file)")))

;; usage : output-port -> void
(define (usage out)
  (fprintf out "usage: raco fastcgi <command> [option ...] [arg ...]\n\ncommands:\n")
  (for ([c (in-list commands)]) (fprintf out "  ~a~a~a\n" (first c) (make-string (- 10 (string-length (first c))) #\space) (second c)))
  (fprintf out "\n`raco fastcgi <command> --help` describes a command's options.\n"))

;; main : (vectorof string) -> void
(define (main argv)
  (cond
    [(zero? (vector-length argv)) (usage (current-error-port)) (exit 2)]
    [else
     (define cmd (vector-ref argv 0))
     (define rest (vector-copy-rest argv))
     (case cmd
       [("serve") ((dynamic-require serve-module 'handle-serve) (app-last rest))]
       [("dev") ((dynamic-require dev-module 'handle-dev) (app-last rest))]
       [("request") ((dynamic-require request-module 'request-command) (positionals-last rest))]
       [("ctl") ((dynamic-require ctl-module 'ctl-command) (app-last rest))]
       [("help" "--help" "-h") (usage (current-output-port))]
       [else (eprintf "raco fastcgi: unknown command ~s\n" cmd) (usage (current-error-port)) (exit 2)])]))

;; Each command's modules load only when it runs: a process holds what it loads, and the
;; manager (serve) runs as long as the pool; the dev front pulls in web-server's HTTP server.
(define-relative-path serve-module "serve-cli.rkt")
(define-relative-path dev-module "../dev/dev.rkt")
(define-relative-path request-module "request-cli.rkt")
(define-relative-path ctl-module "ctl.rkt")

;; app-last : (vectorof string) -> (vectorof string)
;; `serve APP.rkt --listen X` reads as `serve --listen X APP.rkt`: racket/cmdline wants the
;; flags first, people write the app first.
(define (app-last argv)
  (if (and (> (vector-length argv) 1) (not (regexp-match? #rx"^-" (vector-ref argv 0))))
      (for/vector ([i (in-range (vector-length argv))])
        (vector-ref argv (modulo (add1 i) (vector-length argv))))
      argv))

;; positionals-last : (vectorof string) -> (vectorof string)
;; `request ADDR URI --repeat 5` reads as `request --repeat 5 ADDR URI`: the arguments
;; before the first flag move to the end.
(define (positionals-last argv)
  (define args (vector->list argv))
  (define-values (lead rest) (splitf-at args (λ (a) (not (regexp-match? #rx"^-" a)))))
  (if (or (null? lead) (null? rest)) argv (list->vector (append rest lead))))

;; vector-copy-rest : vector -> vector
(define (vector-copy-rest v) (for/vector ([x (in-vector v 1)]) x))
