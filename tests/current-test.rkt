#lang racket/base
;; fastcgi/private/engine/current.rkt: current-fastcgi-request, the raw request behind a servlet's
;; request. Its own default and value; the servlet adapter sets it for each request
;; (served here over a connection of pipes); a raw handler never needs it. (Behind nginx:
;; tests/integration/nginx-test.rkt.)
(require rackunit
         web-server/http
         "../fastcgi/main.rkt"
         (prefix-in private: "../fastcgi/private/engine/current.rkt")
         (only-in "../fastcgi/private/servlet/web.rkt" servlet->handler)
         "lib/pipe-conn.rkt"
         "lib/raw-peer.rkt")

(test-case "a parameter, #f by default; the public one is this one"
  (check-eq? current-fastcgi-request private:current-fastcgi-request)
  (check-false (current-fastcgi-request))
  (check-equal? (parameterize ([current-fastcgi-request 'r]) (current-fastcgi-request)) 'r))

;; what-servlet-saw : request -> response ; the raw request's id, role and X param
(define (what-servlet-saw req)
  (define r (current-fastcgi-request))
  (response/output
   (λ (out)
     (write (list (fastcgi-request? r) (and r (fastcgi-request-id r)) (and r (fastcgi-request-role r))
                  (and r (fastcgi-param r "X")))
            out))))

(test-case "inside a servlet: the raw FastCGI request being served, a new one each request"
  (call-with-pipe-conn
   (servlet->handler what-servlet-saw default-limits)
   (λ (p c)
     (for ([id '(1 2)] [x '("one" "two")])
       (peer-send! p (request-bytes id #:params (params "REQUEST_METHOD" "GET" "REQUEST_URI" "/"
                                                       "SERVER_NAME" "t" "SERVER_PORT" "80" "X" x)))
       (define a (peer-answer p id))
       (check-status a 200)
       (check-equal? (read (open-input-bytes (cgi-body (answer-stdout a))))
                     (list #t id 'responder (string->bytes/utf-8 x)))))))

(test-case "a raw handler: no servlet request, the parameter stays #f"
  (call-with-pipe-conn
   (λ (r)
     (write-bytes ok-head (fastcgi-request-stdout r))
     (write (current-fastcgi-request) (fastcgi-request-stdout r)))
   (λ (p c)
     (peer-send! p (request-bytes 1))
     (check-equal? (cgi-body (answer-stdout (peer-answer p 1))) #"#f"))))
