#lang racket/base
;; The app that inherit-test and container-test serve, and what they read of processes.
(require racket/file)
(provide app-source
         zombie-children)

;; app-source : string -> string
;; A raw app. "/" answers VERSION; "/fds" starts `sleep` (with a file of its own open
;; without close-on-exec, as a C library holds one) and answers the descriptors the sleep holds; "/daemon" runs a
;; program that leaves a background process behind when it exits (an orphan).
(define (app-source version)
  (string-append
   "#lang racket/base\n"
   "(require ffi/unsafe racket/port racket/string racket/system fastcgi)\n"
   "(define c-open (get-ffi-obj \"open\" #f (_fun _path _int -> _int)))\n"
   "(define c-close (get-ffi-obj \"close\" #f (_fun _int -> _int)))\n"
   "(provide fastcgi-handler)\n"
   "(define (answer r s) (write-string (string-append \"Content-Type: text/plain\\r\\n\\r\\n\" s) (fastcgi-request-stdout r)))\n"
   "(define (sleep-fds)\n"
   ";; as a C library opens a file: without close-on-exec\n"
   "  (define held (c-open \"/etc/hostname\" 0))\n"
   "  (define-values (sp o i e) (subprocess #f #f #f \"/bin/sleep\" \"30\"))\n"
   ";; until it runs sleep: between its fork and its exec it still holds what its parent holds\n"
   "  (let wait () (unless (regexp-match? #rx\"sleep\" (call-with-input-file (format \"/proc/~a/comm\" (subprocess-pid sp)) port->string)) (sleep 0.01) (wait)))\n"
   "  (define fds (for/list ([f (directory-list (format \"/proc/~a/fd\" (subprocess-pid sp)))]) (path->string f)))\n"
   "  (subprocess-kill sp #t) (c-close held)\n"
   "  (for ([p (list o i e)]) (if (input-port? p) (close-input-port p) (close-output-port p)))\n"
   "  (string-join (sort fds < #:key string->number) \" \"))\n"
   "(define (fastcgi-handler r)\n"
   "  (define v (fastcgi-param r #\"REQUEST_URI\"))\n"
   "  (define uri (if (bytes? v) (bytes->string/utf-8 v) v))\n"
   "  (cond [(equal? uri \"/fds\") (answer r (sleep-fds))]\n"
   "        [(equal? uri \"/daemon\") (system \"sleep 0.3 &\") (answer r \"left one\")]\n"
   (format "        [else (answer r ~s)]))\n" version)))

;; zombie-children : natural -> (listof natural) ; exited children of pid not yet reaped
(define (zombie-children pid)
  (for*/list ([d (in-list (directory-list "/proc"))]
              [n (in-value (string->number (path->string d)))]
              #:when n
              [stat (in-value (with-handlers ([exn:fail? (λ (e) "")])
                                (file->string (format "/proc/~a/stat" n))))]
              [m (in-value (regexp-match #rx"\\) ([A-Za-z]) ([0-9]+)" stat))]
              #:when (and m (equal? (cadr m) "Z") (= pid (string->number (caddr m)))))
    n))
