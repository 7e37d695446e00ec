#lang racket/base
;; HOSTILE.md 14, 15 and 17 through the servlet adapter (web.rkt): inconsistent CGI params,
;; the same header under two spellings, CR, LF and NUL in a header that a servlet echoes.
;; The shared engine and checks are in tests/lib/hostile.rkt.
(require net/url
         rackunit
         web-server/http
         "../fastcgi/main.rkt"
         (only-in "../fastcgi/private/servlet/web.rkt" servlet->handler)
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

;; check-good-request* : path -> void ; the servlet's version of check-good-request
(define (check-good-request* path)
  (with-peer path
    (λ (p)
      (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/alive")))
      (define a (peer-answer p 1))
      (check-status a 200)
      (check-has #rx#"uri=/alive" (answer-stdout a)))))

(define (servlet req)
  (define hs (request-headers/raw req))
  (response/output
   (λ (out)
     (fprintf out "uri=~a\n" (url->string (request-uri req)))
     (for ([h hs] #:when (regexp-match? #rx#"^X-Forwarded-For$" (header-field h)))
       (fprintf out "xff=~a\n" (header-value h)))
     (define first (headers-assq* #"X-Forwarded-For" hs))
     (fprintf out "first=~a\n" (and first (header-value first))))
   #:headers (list (header #"X-Echo" (let ([h (headers-assq* #"X-Evil" hs)]) (if h (header-value h) #""))))))

(call-with-engine
 #:handler (servlet->handler servlet (make-limits))
 (λ (path srv)
   (test-case "15: inconsistent params (empty PATH_INFO, long SCRIPT_FILENAME, odd lengths): 200 or 400"
     (define cases
       (list (params "SCRIPT_FILENAME" (make-string 60000 #\/) "PATH_INFO" "" "REQUEST_URI" "/index.php/%0a")
             (params "SCRIPT_NAME" (make-string 5000 #\a) "PATH_INFO" "")
             (params "PATH_INFO" "/x" "SCRIPT_NAME" "" "QUERY_STRING" "%%%")
             (params "REQUEST_URI" "http://[::1")
             (params "REQUEST_URI" "\377\376/x")
             (params "REQUEST_URI" "")
             (params "CONTENT_LENGTH" "-1")
             (params "CONTENT_LENGTH" "1e3")
             (params "CONTENT_LENGTH" "9999999999999999999")
             (params "CONTENT_LENGTH" " 5")
             (params "REQUEST_METHOD" "" "SERVER_PORT" "99999999999999999999" "REMOTE_ADDR" "\0")))
     (define log
       (call-with-log
        (λ ()
          (with-peer path
            (λ (p)
              (for ([ps cases] [i (in-naturals)])
                (peer-send! p (request-bytes 1 #:params ps))
                (define a (peer-answer p 1))
                (check-not-false (memv (cgi-status (answer-stdout a)) '(200 400 413))
                                 (format "case ~a: ~s" i (answer-stdout a))))
              (check-status (begin (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/ok")))
                                   (peer-answer p 1))
                            200))))))
     (check-false (memq 'error (levels log)) (format "~s" log))
     (check-log-clean log)
     (check-good-request* path))

   (test-case "17: the same header under two spellings: both kept in order, the first wins"
     ;; X-Forwarded-For and X_Forwarded-For both reach a FastCGI app as HTTP_X_FORWARDED_FOR
     ;; (a front that keeps the hyphen sends HTTP_X_FORWARDED-FOR, also X-Forwarded-For)
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/"
                                                         "HTTP_X_FORWARDED_FOR" "10.0.0.1"
                                                         "HTTP_X_FORWARDED-FOR" "10.0.0.2"
                                                         "HTTP_X_FORWARDED_FOR" "10.0.0.3")))
         (define a (peer-answer p 1))
         (check-status a 200)
         (check-equal? (cgi-body (answer-stdout a))
                       #"uri=/\nxff=10.0.0.1\nxff=10.0.0.2\nxff=10.0.0.3\nfirst=10.0.0.1\n")))
     (call-with-engine
      (λ (raw-path srv)
        (with-peer raw-path
          (λ (p)
            (peer-send! p (request-bytes 1 #:params (params "HTTP_X_FORWARDED_FOR" "10.0.0.1"
                                                            "HTTP_X_FORWARDED_FOR" "10.0.0.3")))
            (define out (answer-stdout (peer-answer p 1)))
            (check-has #rx#"\"HTTP_X_FORWARDED_FOR\"=#\"10.0.0.1\"\n#\"HTTP_X_FORWARDED_FOR\"=#\"10.0.0.3\"" out)
            (check-same-connection p))))))

   (test-case "14: CR, LF and NUL from a request header never reach a response header raw"
     (with-peer path
       (λ (p)
         (peer-send! p (request-bytes 1 #:params (params "REQUEST_URI" "/" "HTTP_X_EVIL" "a\r\nSet-Cookie: x=1\0")))
         (define out (answer-stdout (peer-answer p 1)))
         (check-equal? (cgi-header out "X-Echo") "a  Set-Cookie: x=1")
         (check-false (cgi-header out "Set-Cookie")))))))
