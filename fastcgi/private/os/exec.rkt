#lang racket/base
;; Replacing this process's program (execv), for `raco fastcgi serve`: raco's process has
;; loaded the raco commands of every installed collection, and the manager runs as long as
;; the pool does, so it starts over in a fresh racket that loads only what it needs. The
;; process stays the same (its pid, its descriptors without close-on-exec such as an
;; inherited listening socket, its environment), so a pid file, systemd's LISTEN_PID and the
;; parent's wait see no difference.
(require ffi/unsafe
         "ffi.rkt")
(provide exec-racket!
         exec-program!)

(define-libc c-execv "execv" _bytes _pointer -> _int)

;; exec-racket! : path-string path-string (listof string) -> void
;; Runs `racket MODULE ARG ...` in this process: returns only when that could not be done
;; (the caller goes on in this process).
(define (exec-racket! racket module args)
  (exec-program! racket (cons (if (path? module) (path->string module) module) args)))

;; exec-program! : path-string (listof string) -> void
;; Runs the program (a path: no search) with the arguments in this process; returns only
;; when that could not be done.
(define (exec-program! program args)
  (define prog (if (path? program) (path->bytes program) (string->bytes/utf-8 program)))
  (define strings (cons prog (map string->bytes/utf-8 args)))
  ;; argv in memory that the collector never moves: a NULL-terminated array of C strings
  (define argv (malloc (* (add1 (length strings)) (ctype-sizeof _pointer)) 'raw))
  (for ([s (in-list strings)] [i (in-naturals)])
    (define c (malloc (add1 (bytes-length s)) 'raw))
    (memcpy c s (bytes-length s))
    (ptr-set! c _byte (bytes-length s) 0)
    (ptr-set! argv _pointer i c))
  (ptr-set! argv _pointer (length strings) #f)
  (flush-output (current-output-port))
  (flush-output (current-error-port))
  (void (c-execv (bytes-append prog #"\0") argv)))
