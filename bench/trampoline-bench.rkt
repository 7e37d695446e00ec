#lang racket/base
;; The trampoline measurement (`make bench-trampoline`): per-request latency of hello world
;; under Apache's mod_cgi, one request at a time on a fresh connection, for
;;   (a) trampoline/fcgi-trampoline -> `raco fastcgi serve examples/hello.rkt` (unix socket)
;;   (b) libfcgi's `cgi-fcgi -bind -connect` doing the same job (from a #!/bin/sh wrapper,
;;       since a CGI program gets no arguments); (a) through the same wrapper is shown too
;;   (c) the app as a plain CGI program: a Racket script (compiled) started per request
;; and, for scale, mod_proxy_fcgi to the same socket (no CGI process at all). Every variant
;; runs in the same Apache, in the same minute, alternating in rounds. Writes
;; bench/trampoline-results.md. The whole run takes about a minute.
(require ffi/unsafe
         (only-in racket/future processor-count)
         net/http-client
         racket/file
         racket/format
         racket/math
         racket/runtime-path
         racket/string
         "../tests/integration/lib.rkt")

(define-runtime-path repo "..")
(define-runtime-path results-file "trampoline-results.md")

;; Requests per variant (after the warm-up), in rounds so that a noisy second hits all.
(define rounds 5)
(define per-round '((a . 80) (a-sh . 80) (b . 80) (proxy . 80) (c . 8)))
(define warm-up 5)

(define apache2 (require-program! "/usr/sbin/apache2" "apache2"))
(define cgi-fcgi (require-program! "/usr/bin/cgi-fcgi" "libfcgi-bin"))
(define racket-exe (require-program! "/usr/bin/racket" "racket"))
(define raco (or (find-executable-path "raco") (error 'bench "raco is not on PATH")))
(define modules-dir "/usr/lib/apache2/modules")
(define geteuid (get-ffi-obj "geteuid" #f (_fun -> _int)))
(define web-user (and (zero? (geteuid)) "www-data"))

;; write-file! : path string #:mode natural -> void
(define (write-file! path text #:mode [mode #o644])
  (call-with-output-file path #:exists 'truncate (λ (out) (write-string text out)))
  (file-or-directory-permissions path mode))

;; apache-conf : path port string string -> string ; one Apache, every variant a path
(define (apache-conf dir port trampoline sock)
  (define (in-dir name) (path->string (build-path dir name)))
  (string-append
   (format "ServerRoot \"~a\"\nServerName 127.0.0.1\nListen 127.0.0.1:~a\n" dir port)
   (format "PidFile \"~a\"\nDefaultRuntimeDir \"~a\"\n" (in-dir "apache.pid") (in-dir "run"))
   (format "ErrorLog \"~a\"\nLogLevel warn\n" (in-dir "apache-error.log"))
   (string-append*
    (for/list ([m (in-list '("mpm_prefork" "authz_core" "cgi" "alias" "env" "proxy" "proxy_fcgi"))])
      (format "LoadModule ~a_module ~a/mod_~a.so\n" m modules-dir m)))
   "StartServers 4\nMinSpareServers 2\nMaxSpareServers 4\nMaxRequestWorkers 8\nKeepAlive Off\n"
   (if web-user (format "User ~a\nGroup ~a\n" web-user web-user) "")
   (format "DocumentRoot \"~a\"\n" (in-dir "htdocs"))
   "<Directory />\n    Require all denied\n</Directory>\n"
   (format "ScriptAlias /a \"~a\"\n" trampoline)
   (format "ScriptAlias /a-sh \"~a\"\n" (in-dir "trampoline.sh"))
   (format "ScriptAlias /b \"~a\"\n" (in-dir "cgi-fcgi.sh"))
   (format "ScriptAlias /c \"~a\"\n" (in-dir "hello-cgi.rkt"))
   (format "<Location \"/\">\n    SetEnv FASTCGI_CONNECT unix:~a\n    Require all granted\n</Location>\n" sock)
   "ProxyFCGIBackendType GENERIC\n"
   (format "<Location \"/proxy\">\n    SetHandler \"proxy:unix:~a|fcgi://localhost/\"\n</Location>\n" sock)))

;; time-request : port string -> real ; milliseconds for one GET on a new connection
(define (time-request port path)
  (define t0 (current-inexact-monotonic-milliseconds))
  (define-values (status _headers body)
    (http-sendrecv "127.0.0.1" path #:port port))
  (define got (read-bytes 100 body))
  (close-input-port body)
  (define ms (- (current-inexact-monotonic-milliseconds) t0))
  (unless (and (regexp-match? #rx#" 200 " status) (equal? got #"Hello, World!\n"))
    (error 'bench "~a answered ~s ~s" path status got))
  ms)

;; percentile : (listof real) real -> real ; nearest rank
(define (percentile xs p)
  (define sorted (sort xs <))
  (list-ref sorted (max 0 (min (sub1 (length sorted)) (sub1 (exact-ceiling (* p (length sorted))))))))

;; mean : (listof real) -> real
(define (mean xs) (/ (apply + xs) (length xs)))

(define labels
  '((a . "(a) fcgi-trampoline -> raco fastcgi serve")
    (a-sh . "(a') the same from a #!/bin/sh wrapper")
    (b . "(b) cgi-fcgi -bind -connect (#!/bin/sh wrapper)")
    (c . "(c) Racket as a plain CGI program")
    (proxy . "mod_proxy_fcgi, no CGI process (for scale)")))

(define paths '((a . "/a/") (a-sh . "/a-sh/") (b . "/b/") (c . "/c/") (proxy . "/proxy/")))

;; run-bench : path -> void
(define (run-bench dir)
  (when web-user (file-or-directory-permissions dir #o755))
  (make-directory* (build-path dir "htdocs"))
  (make-directory* (build-path dir "run"))
  (define trampoline (path->string (build-trampoline!)))
  (define sock (path->string (build-path dir "app.sock")))
  (define hello (path->string (simplify-path (build-path repo "examples" "hello.rkt"))))
  (write-file! (build-path dir "trampoline.sh") (format "#!/bin/sh\nexec ~a\n" trampoline) #:mode #o755)
  (write-file! (build-path dir "cgi-fcgi.sh")
               (format "#!/bin/sh\nexec ~a -bind -connect ~a\n" cgi-fcgi sock) #:mode #o755)
  (write-file! (build-path dir "hello-cgi.rkt")
               (string-append "#!" (path->string racket-exe) "\n#lang racket/base\n"
                              "(void (write-bytes #\"Content-Type: text/plain\\r\\n\\r\\nHello, World!\\n\"))\n")
               #:mode #o755)
  (define-values (mk _o mk-err) (run-program raco (list "make" (path->string (build-path dir "hello-cgi.rkt")))))
  (unless (zero? mk) (error 'bench "raco make hello-cgi.rkt: ~a" mk-err))
  (for ([p (in-directory dir)])
    (file-or-directory-permissions p (bitwise-ior (file-or-directory-permissions p 'bits) #o055)))
  (define port (car (free-ports 1)))
  (define conf (build-path dir "apache.conf"))
  (write-file! conf (apache-conf dir port trampoline sock))
  (define serve-args (append (list "fastcgi" "serve" hello "--listen" (string-append "unix:" sock))
                             (if web-user (list "--socket-group" web-user) '())))
  (call-with-process
   "app" raco serve-args #:dir dir
   (λ (app)
     (wait-for-unix-socket sock 90)
     (call-with-process
      "apache" apache2 (list "-d" (path->string dir) "-f" (path->string conf) "-DFOREGROUND") #:dir dir
      (λ (ap)
        (wait-for-tcp port 20)
        (for ([v (in-list per-round)])
          (for ([_ (in-range (if (eq? (car v) 'c) 2 warm-up))])
            (time-request port (cdr (assq (car v) paths)))))
        (define samples (make-hasheq))
        (for* ([_ (in-range rounds)] [v (in-list per-round)])
          (define path (cdr (assq (car v) paths)))
          (hash-update! samples (car v)
                        (λ (l) (append (for/list ([_ (in-range (cdr v))]) (time-request port path)) l))
                        '()))
        (write-results samples (for/list ([a (in-list (cons "raco" serve-args))])
                                 (string-replace a (path->string dir) "$DIR"))))))))

;; write-results : hash (listof string) -> void ; the table, printed and written
;; command is the app's command line, for the record.
(define (write-results samples command)
  (define a-mean (mean (hash-ref samples 'a)))
  (define (ms x) (~r x #:precision '(= 2)))
  (define rows
    (for/list ([k (in-list '(a a-sh b c proxy))])
      (define xs (hash-ref samples k))
      (format "| ~a | ~a | ~a | ~a | ~a | ~a |"
              (cdr (assq k labels)) (length xs) (ms (mean xs)) (ms (percentile xs 0.5))
              (ms (percentile xs 0.99)) (~r (/ (mean xs) a-mean) #:precision '(= 2)))))
  (define uname (let-values ([(c o e) (run-program (string->path "/bin/uname") '("-srm"))]) (string-trim (bytes->string/utf-8 o))))
  (define text
    (string-append
     "## Trampoline: per-request latency under Apache mod_cgi\n\n"
     (format "Run of ~a UTC on ~a, ~a cores; `make bench-trampoline` (bench/trampoline-bench.rkt).\n"
             (date->utc-string) uname (processor-count))
     "One Apache 2.4 (prefork, KeepAlive Off) serves every variant; a Racket client sends one\n"
     "GET at a time on a new connection and times it to the last byte of `Hello, World!`.\n"
     (format "Variants alternate in ~a rounds after a warm-up; times in milliseconds.\n" rounds)
     "The app: `" (string-join command " ") "`\n"
     "($DIR: a temporary directory). (c) is a compiled `#lang racket/base` script that prints the same\n"
     "answer: the least a Racket CGI program can cost, Racket's start-up. With 40 samples, its\n"
     "p99 is its slowest request. The machine is shared: compare the rows, not the figures.\n\n"
     "| variant | requests | mean | p50 | p99 | mean / (a) |\n"
     "|---|---|---|---|---|---|\n"
     (string-join rows "\n") "\n"))
  (display text)
  (call-with-output-file results-file #:exists 'truncate (λ (out) (write-string text out)))
  (printf "\nwritten to ~a\n" (simplify-path results-file)))

;; date->utc-string : -> string ; YYYY-MM-DD HH:MM
(define (date->utc-string)
  (define d (seconds->date (current-seconds) #f))
  (format "~a-~a-~a ~a:~a" (date-year d) (~r (date-month d) #:min-width 2 #:pad-string "0")
          (~r (date-day d) #:min-width 2 #:pad-string "0") (~r (date-hour d) #:min-width 2 #:pad-string "0")
          (~r (date-minute d) #:min-width 2 #:pad-string "0")))

(module+ main
  (call-with-temp-dir "fcgi-tramp-bench" run-bench))
