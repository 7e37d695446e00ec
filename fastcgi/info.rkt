#lang info
(define collection "fastcgi")
(define pkg-desc "FastCGI application server: run web-server servlets behind nginx, HAProxy, lighttpd, Apache or CGI")
(define version "0.1")
(define deps '("base" "web-server-lib" "unix-socket-lib"))
(define build-deps '("rackunit-lib" "scribble-lib" "racket-doc" "web-server-doc"))
(define raco-commands '(("fastcgi" fastcgi/private/cli/raco "run and talk to FastCGI applications" #f)))
(define scribblings '(("scribblings/fastcgi.scrbl" () (net-library))))
(define license 'MIT)
