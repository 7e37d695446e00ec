#lang racket/base
;; fastcgi/private/protocol/cgi.rkt, by tables: reason phrases, heads and status pages, refusal
;; reasons, CONTENT_LENGTH, and the status of a CGI head (against two regexps). No process.
(require rackunit
         (only-in web-server/http/status-code message-for-status-code)
         "../fastcgi/private/protocol/cgi.rkt")

(test-case "status-reason: web-server's phrases, RFC 9110's 413, RFC 6585's 431"
  (for ([row (in-list '((200 "OK") (302 "Found") (400 "Bad Request") (404 "Not Found")
                        (413 "Content Too Large") (431 "Request Header Fields Too Large")
                        (500 "Internal Server Error") (502 "Bad Gateway")
                        (503 "Service Unavailable") (504 "Gateway Timeout") (299 "Status")))])
    (check-equal? (status-reason (car row)) (cadr row) (format "~a" (car row)))))

(test-case "status-reason: web-server's own table, code by code (cgi.rkt holds a copy)"
  (for ([code (in-range 100 600)] #:unless (memv code '(413 431)))
    (check-equal? (status-reason code) (or (message-for-status-code code) "Status") (format "~a" code))))

(test-case "cgi-head: Status, Content-Type, extra lines in order, Content-Length, empty line"
  (for ([row (in-list
              (list (list (list 503 #"text/plain") '()
                          #"Status: 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\n")
                    (list (list #f #"application/json" '((#"Cache-Control" . #"no-store"))) '()
                          #"Content-Type: application/json\r\nCache-Control: no-store\r\n\r\n")
                    (list (list #f #"text/plain" '((#"A" . #"1") (#"B" . #"2"))) '(#:length 5)
                          #"Content-Type: text/plain\r\nA: 1\r\nB: 2\r\nContent-Length: 5\r\n\r\n")
                    (list (list 200 #"text/html") '(#:length 0)
                          #"Status: 200 OK\r\nContent-Type: text/html\r\nContent-Length: 0\r\n\r\n")))])
    (define args (car row))
    (define got (if (null? (cadr row))
                    (apply cgi-head args)
                    (apply cgi-head #:length (cadr (cadr row)) args)))
    (check-equal? got (caddr row) (format "~s" args))))

(test-case "status-page: the plain-text answer, the same bytes again"
  (for ([row (in-list
              (list (list 400 #f #"Status: 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 16\r\n\r\n400 Bad Request\n")
                    (list 413 #f #"Status: 413 Content Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 22\r\n\r\n413 Content Too Large\n")
                    (list 431 #f #"Status: 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 36\r\n\r\n431 Request Header Fields Too Large\n")
                    (list 503 #f #"Status: 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 24\r\n\r\n503 Service Unavailable\n")
                    (list 503 #"no status yet\n" #"Status: 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 14\r\n\r\nno status yet\n")))])
    (define page (if (cadr row) (status-page (car row) (cadr row)) (status-page (car row))))
    (check-equal? page (caddr row) (format "~a ~s" (car row) (cadr row))))
  (check-eq? (status-page 503) (status-page 503) "made once")
  (check-true (immutable? (status-page 503))))

(test-case "refusal-status and refusal-page: each reason's status"
  (for ([row (in-list '((params-over-bytes 431) (params-over-pairs 431) (params-malformed 400)
                        (content-length-malformed 400) (content-length-over 413) (stopping 503)
                        (shed 503) (connections-over 503) (handler-timeout 503) (body-over 413)
                        (handler-raised 500)))])
    (check-true (refusal-reason? (car row)))
    (check-equal? (refusal-status (car row)) (cadr row) (format "~a" (car row)))
    (check-equal? (refusal-page (car row)) (status-page (cadr row)) (format "~a" (car row))))
  (check-false (refusal-reason? 'nonsense))
  (check-false (refusal-reason? 503))
  (check-exn exn:fail:contract? (λ () (refusal-status 'nonsense))))

(test-case "parse-content-length: absent, digits (at most 18), anything else bad"
  (for ([row (in-list `((#f #f) (#"" #f) (#"0" 0) (#"12" 12) (#"007" 7)
                        (#"999999999999999999" 999999999999999999)
                        (#"1000000000000000000" bad) (#" 12" bad) (#"12 " bad) (#"12\n" bad)
                        (#"-1" bad) (#"+1" bad) (#"1e3" bad) (#"0x10" bad) (#"1.0" bad)
                        (#"\357\274\221" bad)))])
    (check-equal? (parse-content-length (car row)) (cadr row) (format "~s" (car row)))))

;; The status the access log records is read from the CGI head the handler wrote
;; (head-status), against two regexps. (The regexp it replaced,
;; #rx#"(?i:^|\n)status:...", was case-insensitive only inside its group: it never
;; matched "Status:", and every answer was logged as 200.)
(define (regexp-status bs start end)
  (define head-end (regexp-match-positions #rx#"\r?\n\r?\n" bs start end))
  (and head-end
       (let ([m (regexp-match #rx#"(?i:(?:^|\n)status:[ \t]*([1-5][0-9][0-9]))" bs start (caar head-end))])
         (if m (string->number (bytes->string/latin-1 (cadr m))) 200))))

(test-case "head-status: as the regexps, on chosen and random heads"
  (for ([head (in-list (list #"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nbody"
                             #"Content-Type: text/plain\r\nstatus:\t302\r\n\r\n"
                             #"Content-Type: text/plain\n\nStatus: 500\n\n"
                             #"STATUS:201\n\n" #"Status: 600\n\n" #"Status: 20\n\n" #"Status: 2000\n\n"
                             #"X-Status: 404\n\n" #"\n\nStatus: 404\n\n" #"\r\n\r\n" #"Status: 404"
                             #"Status: 404\r\n" #"Status:\n404\n\n" #"Status: 301\n\rStatus: 302\n\n" #""))])
    (define bs (bytes-append #"12345678" head))
    (check-equal? (head-status bs 8 (bytes-length bs)) (regexp-status bs 8 (bytes-length bs))
                  (format "~s" head)))
  (define (status-of head) (head-status (bytes-append #"12345678" head) 8 (+ 8 (bytes-length head))))
  (check-equal? (status-of #"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nbody") 404)
  (check-equal? (status-of #"Content-Type: text/plain\r\nstatus:\t302\r\n\r\n") 302)
  (check-equal? (status-of #"Content-Type: text/plain\r\n\r\nStatus: 500\r\n") 200 "in the body")
  (check-equal? (status-of #"Status: 404") #f "the head has not ended")
  (define pieces (list #"Status:" #"status: " #"STATUS:\t" #"Status:  " #"X-Status: " #"200" #"404"
                       #"1" #"9" #"600" #"\r" #"\n" #"\r\n" #"X: y" #" " #"\t" #"a"))
  (for ([k (in-range 20000)])
    (define head (apply bytes-append (for/list ([i (in-range (random 12))])
                                       (list-ref pieces (random (length pieces))))))
    (define bs (bytes-append #"12345678" head))
    (define end (if (zero? (random 4)) (+ 8 (random (add1 (bytes-length head)))) (bytes-length bs)))
    (check-equal? (head-status bs 8 end) (regexp-status bs 8 end) (format "~s to ~a" head end))))
