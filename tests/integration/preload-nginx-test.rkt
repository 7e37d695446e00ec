#lang racket/base
;; A forked pool (the default: one loader loads the app, its workers are forked) behind a
;; real nginx: examples/guess.rkt (send/suspend continuations) under `raco fastcgi serve
;; --workers 2`, nginx with upstream keepalive + fastcgi_keep_conn on, and without kept
;; connections. Games are played to the end over HTTP, each page a 200 with the hint the
;; previous guess calls for, 4 games at once (2 through each front), again (3 rounds at
;; most) until each of the two forked workers holds a game's continuations (the
;; continuation URL names its worker). The processes, the status and nginx:
;; servlet-pool.rkt; the page parsing: browser.rkt.
(module+ test
  (require racket/file
           racket/list
           racket/string
           rackunit
           "browser.rkt"
           (only-in "deploy-lib.rkt" repo-file)
           "lib.rkt"
           "servlet-pool.rkt")

  ;; comm : natural -> (or/c string #f) ; the process's name
  (define (comm pid)
    (with-handlers ([exn:fail? (λ (e) #f)])
      (string-trim (file->string (format "/proc/~a/comm" pid)))))

  ;; ppid : natural -> (or/c natural #f)
  (define (ppid pid)
    (define t (with-handlers ([exn:fail? (λ (e) #f)]) (file->string (format "/proc/~a/status" pid))))
    (define m (and t (regexp-match #px"(?m:^PPid:\\s+([0-9]+)$)" t)))
    (and m (string->number (cadr m))))

  ;; play! : port-number -> (values natural (or/c natural #f))
  ;; One game through nginx at port, guessing by halves: each page is a 200; the first
  ;; says the game starts, each next one says the last guess was too small or too large,
  ;; the last one that it was won, in as many guesses as were made. The guesses, and the
  ;; worker id that holds the game's continuations (#f if the form's URL names none).
  (define (play! port)
    (define start (browse port "/"))
    (check-equal? (page-status start) 200 (format "GET /: ~a" (page-body start)))
    (check-regexp-match #rx"I am thinking of a number from 1 to 100\\." (page-text start))
    (define owner
      (let ([fs (page-forms start)]) (and (pair? fs) (continuation-owner (form-action (car fs))))))
    (let loop ([p start] [lo 1] [hi 100] [n 0])
      (define fs (page-forms p))
      (check-equal? (length fs) 1 (format "the page after ~a guesses: ~a" n (page-body p)))
      (check-true (<= lo hi) (format "no number is left between ~a and ~a" lo hi))
      (cond
        [(or (null? fs) (> lo hi) (>= n 10)) (values n owner)]
        [else
         (define guess (quotient (+ lo hi) 2))
         (define next (submit port (car fs) (list (number->string guess))))
         (define text (page-text next))
         (check-equal? (page-status next) 200 (format "guess ~a: ~a" guess (page-body next)))
         (cond
           [(equal? (page-title next) "You got it")
            (check-regexp-match (regexp (format "It was ~a; you found it in ~a guesses\\." guess (add1 n))) text)
            (values (add1 n) owner)]
           [(regexp-match? (regexp (format "^Guess the number ~a is too small\\. " guess)) text)
            (check-regexp-match (regexp (format "Guesses so far: ~a$" (add1 n))) text)
            (loop next (add1 guess) hi (add1 n))]
           [(regexp-match? (regexp (format "^Guess the number ~a is too large\\. " guess)) text)
            (check-regexp-match (regexp (format "Guesses so far: ~a$" (add1 n))) text)
            (loop next lo (sub1 guess) (add1 n))]
           [else
            (fail (format "guess ~a: an unexpected page: ~a" guess (page-body next)))
            (values n owner)])])))

  (call-with-temp-dir
   "fcgi-preload-ng"
   (λ (dir)
     (call-with-server
      dir "guess" (repo-file "examples" "guess.rkt") '() 2
      (λ (s)
        (test-case "guess.rkt, default: two forked workers of the manager"
          (define b (read-board s))
          (check-equal? (hash-ref b 'preload #f) "forked")
          (define ws (hash-ref b 'workers '()))
          (check-equal? (length ws) 2)
          (for ([w (in-list ws)])
            (define pid (hash-ref w 'pid))
            (check-equal? (hash-ref w 'forked #f) #t (format "worker ~a" pid))
            (check-equal? (comm pid) "fastcgi-worker")
            (check-equal? (ppid pid) (manager-pid s)))
          (check-equal? (comm (hash-ref b 'loader_pid)) "fastcgi-loader"))
        (call-with-nginx
         dir "guess" s
         (λ (f)
           (define ids (map (λ (w) (hash-ref w 'id)) (hash-ref (read-board s) 'workers '())))
           (test-case "guess.rkt through nginx, kept and not kept FastCGI connections: games won, both workers' continuations"
             ;; games 4 at a time (2 through each front), so that connections come at
             ;; once and the kernel hands them to both workers: sequential ones tend to go
             ;; to the same worker
             (define owners
               (let loop ([batch 0] [owners '()])
                 (cond
                   [(or (>= batch 3) (and (> batch 0) (for/and ([id (in-list ids)]) (memv id owners)))) owners]
                   [else
                    (define games
                      (for/list ([i (in-range 4)])
                        (define port (if (even? i) (fronts-keep f) (fronts-close f)))
                        (define ch (make-channel))
                        (thread (λ () (channel-put ch (with-handlers ([(λ (e) #t) (λ (e) e)])
                                                        (call-with-values (λ () (play! port)) list)))))
                        ch))
                    (define results (for/list ([ch (in-list games)]) (or (sync/timeout 120 ch) "timed out")))
                    (define new-owners
                      (for/list ([r (in-list results)] [i (in-naturals)])
                        (cond
                          [(pair? r)
                           (check-true (<= 1 (car r) 7) (format "game ~a.~a: ~a guesses" batch i (car r)))
                           (check-true (and (memv (cadr r) ids) #t)
                                       (format "game ~a.~a: its continuations' worker ~a, the workers ~a" batch i (cadr r) ids))
                           (cadr r)]
                          [else (fail (format "game ~a.~a: ~a" batch i (if (exn? r) (exn-message r) r))) #f])))
                    (loop (add1 batch) (append owners new-owners))])))
             (printf "preload-nginx: ~a games, their continuations' workers ~a (the pool's: ~a)\n"
                     (length owners) owners ids)
             (check-true (for/and ([id (in-list ids)]) (and (memv id owners) #t))
                         (format "games held by workers ~a of ~a" (remove-duplicates owners) ids)))
           (test-case "guess.rkt: still the same two forked workers; no errors logged"
             (define b (read-board s))
             (check-equal? (sort (map (λ (w) (hash-ref w 'id)) (hash-ref b 'workers '())) <) (sort ids <))
             (check-true (andmap (λ (w) (eq? (hash-ref w 'forked #f) #t)) (hash-ref b 'workers '())))
             (check-clean-logs s f)))))))))
