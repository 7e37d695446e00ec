#lang racket/base
;; A FastCGI Filter: the front sends the request on STDIN and a file on DATA; the filter
;; answers with the file transformed, here numbered line by line, streamed (one line in
;; memory at a time). No common front sends the Filter role; fastcgi/client does:
;;   raco fastcgi serve examples/filter.rkt --listen unix:/tmp/filter.sock
;;   (fastcgi-call c #:role 'filter #:params ... #:data #"one\ntwo\n")
(require fastcgi)
(provide fastcgi-handler fastcgi-roles)

(define fastcgi-roles '(filter))

;; fastcgi-handler : fastcgi-request -> void
(define (fastcgi-handler r)
  ;; the protocol sends all of STDIN before DATA: read it through first
  (define stdin (fastcgi-request-stdin r))
  (let drain () (unless (eof-object? (read-bytes 65536 stdin)) (drain)))
  (define in (fastcgi-request-data r))
  (define out (fastcgi-request-stdout r))
  (write-string "Status: 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" out)
  (let loop ([n 1])
    (define line (read-bytes-line in 'linefeed))
    (unless (eof-object? line)
      (write-string (format "~a  " (pad n)) out)
      (write-bytes line out)
      (newline out)
      (loop (add1 n)))))

;; pad : natural -> string ; right-aligned in six columns, like cat -n
(define (pad n)
  (define s (number->string n))
  (string-append (make-string (max 0 (- 6 (string-length s))) #\space) s))
