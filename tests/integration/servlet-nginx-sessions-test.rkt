#lang racket/base
;; Servlets with continuations under `raco fastcgi serve`, through a real nginx, driven by
;; a scripted browser (browser.rkt): the web-server tutorial's blogs (blog-session.rkt),
;; run as the tutorial says to run them outside DrRacket.
;;   - iteration-11.rkt (SQLite, formlets, send/suspend/dispatch, embed/url), its first
;;     line `#lang web-server/insta` replaced by the documented three lines, under
;;     --workers 4; nginx with kept FastCGI connections (upstream keepalive +
;;     fastcgi_keep_conn on) and without. Many sessions at once; every continuation URL
;;     answers its page; requests reach several workers, and a worker's continuation URL
;;     is answered when the connection lands on another worker (the relay).
;;   - iteration-9s.rkt (#lang web-server, stateless; `(provide start)` appended, and two
;;     fixes without which its forms are a 500 under serve/servlet too: see prepare-blogs!):
;;     the same, and a tampered URL is a 400.
;;   - both compared with web-server's own serve/servlet running the same file: the same
;;     session gives the same pages (URLs aside).
;; The processes, the status and the access log: servlet-pool.rkt. Reloads, recycling, a
;; killed worker and the end of a session drain: servlet-nginx-lifecycle-test.rkt.
;; The tutorial's files are copied into a temporary folder (never into the repository).
(module+ test
  (require rackunit
           "blog-session.rkt"
           "browser.rkt"
           "lib.rkt"
           "servlet-pool.rkt")

  ;; ---------------------------------------------------------------------------------
  ;; The runs.

  (define (run dir)
    (define-values (blog stateless) (prepare-blogs! dir))
    (define blog-pages #f)
    (define stateless-pages #f)

    ;; 1. The continuation blog, four workers.
    (call-with-server
     dir "blog" blog '() 4
     (λ (s)
       (call-with-nginx
        dir "blog" s
        (λ (f)
          (test-case "continuation blog: one session, as under serve/servlet (compared below)"
            (set! blog-pages (blog-session (fronts-keep f) "compared" #:live? #t)))
          (define titles '())
          (for ([port (list (fronts-keep f) (fronts-close f))]
                [name '("kept" "closed")])
            (test-case (format "continuation blog: 8 x 3 sessions at once, FastCGI connections ~a" name)
              (set! titles (append titles (check-sessions port name #:live? #t)))))
          (test-case "continuation blog: every post is on the front page"
            (check-front-page (fronts-close f) (cons "Post compared" titles)))
          (test-case "continuation blog: the requests reached several workers"
            (check-several-workers (fronts-keep f) 4))
          (test-case "continuation blog: a worker's URL answered from fresh connections to others"
            (define href (first-post-href (fronts-close f)))
            (check-answered-elsewhere s (fronts-close f) href (expect-first-post "relayed")))
          (test-case "continuation blog: no errors logged"
            (check-clean-logs s f))))))

    ;; 2. The stateless blog, four workers.
    (call-with-server
     dir "stateless" stateless '() 4
     (λ (s)
       (call-with-nginx
        dir "stateless" s
        (λ (f)
          (test-case "stateless blog: one session, as under serve/servlet (compared below)"
            (set! stateless-pages (blog-session (fronts-keep f) "compared" #:live? #f)))
          (test-case "stateless blog: a tampered URL is a 400"
            (check-tampered f))
          (for ([port (list (fronts-keep f) (fronts-close f))]
                [name '("kept" "closed")])
            (test-case (format "stateless blog: 8 x 3 sessions at once, FastCGI connections ~a" name)
              (check-sessions port name #:live? #f)))
          (test-case "stateless blog: a session's post is on the front page"
            (blog-session (fronts-close f) "last" #:live? #f)
            (check-front-page (fronts-close f) '("Post last")))
          (test-case "stateless blog: the requests reached several workers"
            (check-several-workers (fronts-keep f) 4))
          (test-case "stateless blog: one URL resumed by several workers"
            (define front (browse (fronts-close f) "/"))
            (define href (find-link front "Post last"))
            (check-true (string? href))
            (check-answered-elsewhere s (fronts-close f) href
                                      (λ (p) (expect-detail "stateless URL" p "Post last"
                                                            "Body of last: Jörg & <Co>"
                                                            '("Comment on last, été")))
                                      #f))
          (test-case "stateless blog: no errors logged"
            (check-clean-logs s f))))))

    ;; The same file under serve/servlet: the same pages.
    (test-case "serve/servlet gives the same pages: continuation blog"
      (call-with-serve/servlet
       dir "ss-blog" blog #f
       (λ (port) (check-equal? (blog-session port "compared" #:live? #t) blog-pages))))
    (test-case "serve/servlet gives the same pages: stateless blog"
      (call-with-serve/servlet
       dir "ss-stateless" stateless #t
       (λ (port) (check-equal? (blog-session port "compared" #:live? #f) stateless-pages))))

    (printf "servlet-nginx-sessions-test: ~a s\n" (elapsed)))

  ;; flip : string natural -> string ; the character at i changed to another of its kind
  (define (flip s i)
    (define c (string-ref s i))
    (string-append (substring s 0 i)
                   (string (cond [(char=? c #\a) #\b] [(char-alphabetic? c) #\a]
                                 [(char=? c #\0) #\1] [else #\0]))
                   (substring s (add1 i))))

  ;; check-tampered : fronts -> void
  ;; One character of the c parameter changed, in its signature and in what it signs: 400.
  (define (check-tampered f)
    (define front (browse (fronts-keep f) "/"))
    (define href (find-link front "First Post"))
    (define start (regexp-match-positions #rx"^/;\\(\\(%22c%22%20\\.%20%22" href))
    (define sig (regexp-match-positions #px"[0-9a-f]{32}%22\\)\\)$" href))
    (check-true (and start sig #t) (format "not a signed stateless URL: ~a" href))
    ;; a letter or digit halfway through what is signed, not part of a %XX escape
    (define payload-at
      (and start sig
           (for/first ([i (in-range (quotient (+ (cdr (car start)) (car (car sig))) 2) (car (car sig)))]
                       #:when (and (or (char-alphabetic? (string-ref href i)) (char-numeric? (string-ref href i)))
                                   (not (char=? (string-ref href (- i 1)) #\%))
                                   (not (char=? (string-ref href (- i 2)) #\%))))
             i)))
    (check-true (and payload-at #t) (format "nothing to change in ~a" href))
    (when payload-at
      (for ([tampered (list (flip href (car (car sig))) (flip href payload-at))])
        (check-not-equal? tampered href)
        (for ([port (list (fronts-keep f) (fronts-close f))])
          (define p (browse port tampered))
          (check-equal? (page-status p) 400 (format "~a: ~a" tampered (page-body p))))))
    ((expect-first-post "the URL untouched") (browse (fronts-close f) href)))

  (call-with-temp-dir "fcgi-servlet" run))

