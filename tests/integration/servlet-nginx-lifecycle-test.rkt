#lang racket/base
;; Servlet sessions through a real nginx while the pool changes under them (the
;; continuation blog of web-server's tutorial, blog-session.rkt, under `raco fastcgi serve`
;; --workers 2): a reload (SIGHUP) mid-session: the old worker drains (the status says
;; so, with its live sessions) and still answers its URLs; recycling (--max-requests) the
;; same; once --session-drain has passed, the old URL gets the expiration page; a worker
;; SIGKILLed: its URLs get the expiration page, at once and after, never a 5xx.
;; The status is polled in the file the manager writes next to its pid file and then
;; checked once on the status page through nginx (servlet-pool.rkt).
(module+ test
  (require rackunit
           "blog-session.rkt"
           "browser.rkt"
           "lib.rkt"
           "servlet-pool.rkt")

  ;; ---------------------------------------------------------------------------------
  ;; The runs.

  (define (run dir)
    (define-values (blog _stateless) (prepare-blogs! dir))

    ;; 3. A reload mid-session.
    (call-with-server
     dir "reload" blog '() 2
     (λ (s)
       (call-with-nginx
        dir "reload" s
        (λ (f) (check-reload s f)))))

    ;; 3. Recycling.
    (call-with-server
     dir "recycle" blog '("--max-requests" "5") 2
     (λ (s)
       (call-with-nginx
        dir "recycle" s
        (λ (f) (check-recycle s f)))))

    ;; 4 and 3. A worker killed; the end of the drain.
    (call-with-server
     dir "crash" blog '("--session-drain" "2") 2
     (λ (s)
       (call-with-nginx
        dir "crash" s
        (λ (f)
          (check-crash s f)
          (check-drain-end s f)))))
    (printf "servlet-nginx-lifecycle-test: ~a s\n" (elapsed)))

  ;; wait-for-board : server seconds string (hash -> any) -> any
  ;; Polls the status the manager writes (no request to any worker) until pred answers.
  (define (wait-for-board s secs what pred)
    (wait-until secs what (λ () (let ([b (read-board s)]) (and b (pred b))))))

  ;; draining-owner? : hash natural [#:sessions? boolean] -> boolean
  ;; The status lists the worker numbered owner as draining (sessions?: with live sessions).
  (define (draining-owner? st owner #:sessions? [sessions? #t])
    (for/or ([w (in-list (hash-ref st 'workers '()))])
      (and (equal? (hash-ref w 'state #f) "draining")
           (or (not sessions?) (positive? (hash-ref w 'sessions 0)))
           (eqv? owner (hash-ref w 'id #f)))))

  ;; wait-for-draining-owner : server natural string (hash -> any) -> void
  ;; Until the status shows the owner draining (and more, by ready?); then, within 5 s
  ;; (workers count their sessions every 2 s), with its live sessions.
  (define (wait-for-draining-owner s owner what [ready? (λ (b) #t)])
    (wait-for-board s 60 what (λ (b) (and (ready? b) (draining-owner? b owner #:sessions? #f))))
    (wait-for-board s 5 (format "the status to count the live sessions of the draining worker ~a" owner)
                    (λ (b) (draining-owner? b owner))))

  ;; session-before : string server fronts -> (or/c (cons string natural) #f)
  ;; A test case: a new session's link to "First Post", answered right; the link and the
  ;; pid of the worker that holds it (#f when the case failed).
  (define (session-before what s f)
    (define result #f)
    (test-case (format "~a: a session's URL answers" what)
      (define href (first-post-href (fronts-close f)))
      ((expect-first-post (format "before the ~a" what)) (browse (fronts-keep f) href))
      (define pid (owner-pid s href))
      (check-true (and pid #t) (format "no live worker owns ~a" href))
      (when pid (set! result (cons href pid))))
    result)

  ;; follow-expecting : fronts string (page -> void) -> void
  ;; href three times through each front, each time on a new connection from the client.
  (define (follow-expecting f href check)
    (for* ([i (in-range 3)] [port (list (fronts-close f) (fronts-keep f))])
      (check (browse port href))))

  ;; check-reload : server fronts -> void
  (define (check-reload s f)
    (define start (session-before "reload" s f))
    (when start
      (define href (car start))
      (define owner (continuation-owner href))
      (c-kill (manager-pid s) SIGHUP)
      (test-case "reload: generation 2, the old worker draining with its session"
        (wait-for-draining-owner s owner "generation 2 and the session's worker draining"
                                 (λ (b) (eqv? 2 (hash-ref b 'generation #f))))
        (define st (status f))
        (check-equal? (hash-ref st 'generation) 2)
        (check-true (draining-owner? st owner) (format "status: ~s" st))
        (check-true (>= (hash-ref st 'draining_workers) 1))
        (check-true (positive? (hash-ref st 'sessions))))
      (test-case "reload: the old session's URL still answers, from new connections"
        (follow-expecting f href (expect-first-post "after the reload")))
      (test-case "reload: a new session works"
        (blog-session (fronts-close f) "after-reload" #:live? #t))
      (test-case "reload: the old worker still drains"
        (check-true (draining-owner? (status f) owner #:sessions? #f)))))

  ;; check-recycle : server fronts -> void ; under --max-requests 5
  (define (check-recycle s f)
    (define start (session-before "recycling" s f))
    (when start
      (define href (car start))
      (define owner (continuation-owner href))
      (test-case "recycling: the session's worker is recycled and drains"
        ;; more requests, one at a time, until the owner has taken its five and is replaced
        (wait-until 60 "the session's worker to drain"
                    (λ ()
                      (define b (read-board s))
                      (or (and b (draining-owner? b owner #:sessions? #f))
                          (begin
                            (when (and b (for/or ([w (in-list (hash-ref b 'workers '()))])
                                           (and (eqv? owner (hash-ref w 'id #f))
                                                (< (hash-ref w 'requests 0) 5))))
                              (check-equal? (page-status (browse (fronts-close f) "/")) 200))
                            (sleep 0.1)
                            #f))))
        (wait-for-draining-owner s owner "the session's worker draining")
        (check-true (draining-owner? (status f) owner)))
      (test-case "recycling: the early session still answers"
        (follow-expecting f href (expect-first-post "after recycling")))))

  ;; check-crash : server fronts -> void
  ;; The owner of a session SIGKILLed: its URL gets the expiration page from the other
  ;; worker, at once (the dying process's private socket still takes connections for a
  ;; while, then resets them) and once it is gone; the pool replaces it.
  (define (check-crash s f)
    (define start (session-before "crash" s f))
    (when start
      (define href (car start))
      (define pid (cdr start))
      (test-case "crash: right after SIGKILL, the owner's URL gets the expiration page"
        (c-kill pid SIGKILL)
        (expect-expired "a killed worker's URL, at once" (browse (fronts-close f) href)))
      (test-case "crash: the dead owner's URL gets the expiration page"
        (wait-until 10 "the killed worker to be gone" (λ () (not (directory-exists? (format "/proc/~a" pid)))))
        (follow-expecting f href (λ (p) (expect-expired "a killed worker's URL" p))))
      (test-case "crash: the pool replaces the worker"
        (define (replaced? st)
          (define ws (hash-ref st 'workers))
          (and (= 2 (length ws))
               (not (memv pid (map (λ (w) (hash-ref w 'pid)) ws)))
               (andmap (λ (w) (and (member (hash-ref w 'state) '("idle" "busy")) #t)) ws)))
        (wait-for-board s 60 "a replacement worker" replaced?)
        (define st (status f))
        (check-true (replaced? st) (format "status: ~s" st))
        (check-true (positive? (hash-ref st 'restarts))))
      (test-case "crash: a new session works"
        (blog-session (fronts-close f) "after-crash" #:live? #t))))

  ;; check-drain-end : server fronts -> void ; under --session-drain 2
  (define (check-drain-end s f)
    (define start (session-before "session drain" s f))
    (when start
      (define href (car start))
      (define pid (cdr start))
      (test-case "session drain: once it is over, the old URL gets the expiration page"
        (c-kill (manager-pid s) SIGHUP)
        (wait-for-board s 60 "the old worker to finish draining"
                        (λ (b)
                          (and (eqv? 2 (hash-ref b 'generation #f))
                               (not (memv pid (map (λ (w) (hash-ref w 'pid)) (hash-ref b 'workers))))
                               (not (directory-exists? (format "/proc/~a" pid))))))
        (follow-expecting f href (λ (p) (expect-expired "a drained worker's URL" p))))))

  (call-with-temp-dir "fcgi-servlet" run))

