#lang racket/base
;; fastcgi/private/engine/request.rkt: one request as the raw interface sees it, on a connection
;; over pipes (tests/lib/pipe-conn.rkt): what make-fastcgi-request makes, params looked up
;; in place and as a list (sharing byte strings with the connection's last ones), and the
;; body streams: made on first use, ended, aborted, cut over a limit. (The record's states:
;; request-state-test; STDOUT, STDERR and the end: request-output-test.)
(require racket/port
         rackunit
         "../fastcgi/main.rkt"
         (only-in "../fastcgi/private/engine/request.rkt" make-fastcgi-request fastcgi-request-raw-params
                  request-param request-param/scan request-stdin-out close-request-stdin!
                  close-request-data! request-body-empty? request-abort! fastcgi-request-state
                  fastcgi-request-rejected request-body-rejected! fastcgi-request-data-out
                  raw-params?)
         "../fastcgi/private/engine/wire.rkt"
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

(test-case "make-fastcgi-request: a record in state params, its stdout port; data only for a filter"
  (define-values (c p) (make-pipe-conn))
  (define r (make-fastcgi-request c 5 'responder #f))
  (check-equal? (list (fastcgi-request-id r) (fastcgi-request-role r) (fastcgi-request-keep-conn? r)
                      (fastcgi-request-state r))
                '(5 responder #f params))
  (check-pred output-port? (fastcgi-request-stdout r))
  (check-false (fastcgi-request-data r))
  (define f (make-fastcgi-request c 6 'filter #t))
  (check-pred input-port? (fastcgi-request-data f))
  (check-pred output-port? (fastcgi-request-data-out f)))

(test-case "request-param: in place, then from the list; the first occurrence wins; string or bytes"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:params (params "A" "1" "B" "2" "A" "3" "E" "")))
  (define (look)
    (list (request-param r "A") (request-param r #"B") (request-param r "E") (request-param r "NONE")
          (request-param r "NONE" 'dflt) (request-param/scan r #"A") (request-param/scan r #"NONE")
          (fastcgi-param r "B")))
  (define before (look))
  (check-equal? before '(#"1" #"2" #"" #f dflt #"1" #f #"2"))
  (check-true (raw-params? (fastcgi-request-raw-params r)) "no list made yet")
  (check-equal? (fastcgi-request-params r) '((#"A" . #"1") (#"B" . #"2") (#"A" . #"3") (#"E" . #"")))
  (check-false (fastcgi-request-raw-params r) "the list is made")
  (check-equal? (look) before "the same answers from the list"))

(test-case "fastcgi-request-params: a kept connection's next list shares equal byte strings"
  (define-values (c p) (make-pipe-conn))
  (define r1 (make-live-request c 1 #:params (params "SERVER_NAME" "example.org" "X" "1")))
  (define l1 (fastcgi-request-params r1))
  (define r2 (make-live-request c 2 #:params (params "SERVER_NAME" "example.org" "X" "2")))
  (define l2 (fastcgi-request-params r2))
  (check-eq? (car (car l2)) (car (car l1)) "the name")
  (check-eq? (cdr (car l2)) (cdr (car l1)) "an equal value")
  (check-equal? (cdr (cadr l2)) #"2")
  (check-eq? (fastcgi-request-params r2) l2 "made once"))

(test-case "stdin: made on first use; the bytes fed, then eof once closed"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:state 'stdin))
  (define out (request-stdin-out r))
  (check-eq? (request-stdin-out r) out "one pipe")
  (write-bytes #"body" out)
  (close-request-stdin! r)
  (check-equal? (port->bytes (fastcgi-request-stdin r)) #"body")
  (check-false (request-body-empty? r) "it had bytes"))

(test-case "stdin ended before anyone asked: empty, and the pipe made later reads eof at once"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:state 'stdin))
  (close-request-stdin! r)
  (check-true (request-body-empty? r))
  (check-equal? (port->bytes (fastcgi-request-stdin r)) #""))

(test-case "an aborted request's body reads fail, also for a reader already waiting"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:state 'stdin))
  (define in (fastcgi-request-stdin r))
  (define waiting (thread (λ () (with-handlers ([values values]) (read-byte in)))))
  (sync/timeout 0.05 waiting)
  (request-abort! r)
  (check-pred exn:fail:fastcgi:aborted? (begin (thread-wait waiting) (with-handlers ([values values]) (read-byte in))))
  (check-exn #rx"read: request aborted" (λ () (read-byte in))))

(test-case "a body cut over its limit: its end is an exn:fail:fastcgi:body, not eof"
  (define-values (c p) (make-pipe-conn))
  (define r (make-live-request c 1 #:state 'stdin))
  (write-bytes #"abc" (request-stdin-out r))
  (request-body-rejected! r 3)
  (close-request-stdin! r)
  (define in (fastcgi-request-stdin r))
  (check-equal? (read-bytes 3 in) #"abc")
  (check-exn (λ (e) (and (exn:fail:fastcgi:body? e)
                         (regexp-match? #rx"request body over the limit of 3 bytes" (exn-message e))))
             (λ () (read-byte in))))

(test-case "a filter's DATA stream: fed and closed as stdin is"
  (define-values (c p) (make-pipe-conn #:roles '(filter)))
  (define r (make-live-request c 1 #:role 'filter #:state 'data))
  (write-bytes #"file data" (fastcgi-request-data-out r))
  (close-request-data! r)
  (check-equal? (port->bytes (fastcgi-request-data r)) #"file data"))
