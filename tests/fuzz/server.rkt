#lang racket/base
;; The server under fuzzing, run as a child process so that its memory (/proc/PID/status)
;; and its log (stderr) are its own:
;;   racket server.rkt unix:/path [--hold-fds N] [--log-level LEVEL] [--LIMIT VALUE] ...
;; A raw handler for the three roles that reads the whole body and DATA stream (counting,
;; not holding them) and answers with what it saw. MODE=hang makes it wait until broken
;; (for the request timeout); MODE=raise makes it raise, naming REQUEST_URI; MODE=applog
;; logs REQUEST_URI at warning on the application's own logger (topic `app`). Log lines of
;; level warning (or --log-level) and above go to stderr.
;; Prints "ready PID" on stdout; a "gc" line on stdin gets two major collections and
;; "gc done"; "fds" prints how many sockets have a descriptor above 1024; "log" prints "log
;; done" once every log line queued before it is in the log file ("log timeout" if that
;; took over 2 s); EOF on stdin
;; stops the server. As in raco fastcgi (fastcgi/private/cli/raco.rkt), the server runs under a
;; logger with no parent, so that Racket's default stderr receiver does not print its
;; error lines a second time, without a timestamp.
(module serve racket/base
  (provide main)
  (require ffi/unsafe
           racket/list
           racket/os
           "../../fastcgi/main.rkt"
           "../../fastcgi/private/os/logging.rkt")

  ;; count-port : (or/c input-port #f) -> natural ; bytes until EOF, nothing kept
  (define (count-port in)
    (define buf (make-bytes 16384))
    (if in
        (let loop ([n 0])
          (define k (read-bytes-avail! buf in))
          (if (eof-object? k) n (loop (+ n k))))
        0))

  ;; handler : fastcgi-request -> void
  (define (handler r)
    (when (equal? (fastcgi-param r "MODE") #"hang") (sync never-evt))
    (when (equal? (fastcgi-param r "MODE") #"raise")
      (error 'handler "failed on ~a" (fastcgi-param r "REQUEST_URI")))
    (when (equal? (fastcgi-param r "MODE") #"applog")
      (log-message (current-logger) 'warning 'app
                   (format "app: saw ~a" (fastcgi-param r "REQUEST_URI")) #f))
    (define body (count-port (fastcgi-request-stdin r)))
    (define data (count-port (fastcgi-request-data r)))
    (define out (fastcgi-request-stdout r))
    (write-bytes #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n" out)
    (write-string (format "id=~a role=~a params=~a body=~a data=~a\n"
                          (fastcgi-request-id r) (fastcgi-request-role r)
                          (length (fastcgi-request-params r)) body data)
                  out))

  ;; parse-options : (listof string) -> (values natural symbol (listof keyword) (listof any))
  ;; --hold-fds N, --log-level LEVEL, and --NAME VALUE for each make-limits keyword (VALUE read as a number,
  ;; "#f" as #f); a later --NAME overrides an earlier one.
  (define (parse-options args)
    (let loop ([args args] [hold 0] [level 'warning] [kws (hash)])
      (cond
        [(null? args)
         (define sorted (sort (hash->list kws) keyword<? #:key car))
         (values hold level (map car sorted) (map cdr sorted))]
        [(equal? (car args) "--hold-fds") (loop (cddr args) (string->number (cadr args)) level kws)]
        [(equal? (car args) "--log-level") (loop (cddr args) hold (string->symbol (cadr args)) kws)]
        [else
         (define name (substring (car args) 2))
         (define v (if (equal? (cadr args) "#f") #f (string->number (cadr args))))
         (loop (cddr args) hold level (hash-set kws (string->keyword name) v))])))

  (define c-dup (get-ffi-obj "dup" #f (_fun _int -> _int)))

  ;; high-sockets : -> natural ; open sockets whose descriptor is above 1024
  (define (high-sockets)
    (for/sum ([p (in-list (directory-list "/proc/self/fd"))])
      (define fd (string->number (path->string p)))
      (define target
        (with-handlers ([exn:fail? (λ (e) "")])
          (path->string (resolve-path (build-path "/proc/self/fd" p)))))
      (if (and fd (> fd 1024) (regexp-match? #rx"^socket:" target)) 1 0)))

  (define (main)
    (define args (vector->list (current-command-line-arguments)))
    (define-values (hold level kws vals) (parse-options (cdr args)))
    ;; descriptors held open so that every connection's descriptor is above them (> 1024)
    (define held (for/list ([i (in-range hold)]) (c-dup 2)))
    (when (and (pair? held) (negative? (last held)))
      (error 'server "could not hold ~a descriptors; raise RLIMIT_NOFILE" hold))
    (start-stderr-logging! level)
    (define stop (serve/fastcgi-raw handler #:roles '(responder authorizer filter)
                                    #:listen (car args) #:allowed-clients #f
                                    #:limits (keyword-apply make-limits kws vals '())))
    (printf "ready ~a\n" (getpid))
    (flush-output)
    (let loop ()
      (define line (read-line))
      (unless (eof-object? line)
        (cond
          [(equal? line "gc")
           (collect-garbage)
           (collect-garbage)
           (printf "gc done\n")]
          [(equal? line "fds")
           (printf "~a\n" (high-sockets))]
          [(equal? line "log")
           (printf (if (flush-logging) "log done\n" "log timeout\n"))])
        (flush-output)
        (loop)))
    (stop #:timeout 1)
    (void (flush-logging))))

(module+ main
  (parameterize ([current-logger (make-logger #f #f)])
    ((dynamic-require (module-path-index-join '(submod ".." serve)
                                              (variable-reference->module-path-index
                                               (#%variable-reference)))
                      'main))))
