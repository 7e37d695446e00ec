#lang racket/base
;; What the workers tell the manager (manager.rkt), over its control socket (control.rkt;
;; the lines are listed in worker.rkt's header): a thread per connection hands each line to
;; the main loop, which applies it here: ready (and a reload's new generation taking over),
;; stat, metrics, limit, recycle, failed. A worker answering the status path asks for the board instead.
(require racket/list
         racket/string
         "clock.rkt"
         "control.rkt"
         "log.rkt"
         "manager-reload.rkt"
         "manager-state.rkt"
         "manager-status.rkt"
         "manager-workers.rkt"
         "metrics.rkt"
         "transport.rkt")
(provide start-control-thread!
         message!)

;; start-control-thread! : manager -> thread
;; Each control connection gets the keys first; then a worker says "hello PID" and reports,
;; or a worker answering the status path asks for the board (the last one published).
(define (start-control-thread! m)
  (thread
   (λ ()
     (let loop ()
       (define-values (in out peer)
         (with-handlers ([exn:fail? (λ (e) (values #f #f #f))]) (listener-accept (manager-control m))))
       (when in
         (thread (λ ()
                   (with-handlers ([exn:fail? void]) (write-keys! out (manager-secret m) (manager-relay-key m)))
                   (read-reports in out (manager-messages m) (λ () (manager-last-board m)))))
         (loop))))))

;; read-reports : input-port output-port channel (-> (or/c hash #f)) -> void
;; After hello, the main loop gets (list pid out), the port to ask the worker to retire,
;; then (list pid line) for each line, then (list pid eof) when the connection ends.
;; Asked for the board instead, it answers and the connection ends.
(define (read-reports in out messages board)
  (define pid
    (with-handlers ([exn:fail? (λ (e) #f)])
      (define hello (read-line in))
      (when (equal? hello "board") (answer-board! out (board)))
      (define m (and (string? hello) (regexp-match #rx"^hello ([0-9]+)$" hello)))
      (and m (string->number (cadr m)))))
  (when pid
    (channel-put messages (list pid out))
    (with-handlers ([exn:fail? void])
      (let loop ()
        (define line (read-line in))
        (when (string? line)
          (channel-put messages (list pid line))
          (loop))))
    (channel-put messages (list pid eof)))
  (close-input-port in)
  (unless pid (with-handlers ([exn:fail? void]) (close-output-port out))))

;; message! : manager (list natural (or/c output-port eof-object string)) -> void
;; From a worker's control connection: its port (after hello), a line, its end.
(define (message! m msg)
  (define w (hash-ref (manager-workers m) (first msg) #f))
  (define x (second msg))
  (cond
    [(output-port? x) (when w (set-worker-control! w x))]
    [(eof-object? x) (when w (set-worker-reports-done?! w #t))]
    [else
     (when w (set-worker-heard-ms! w (now-ms)))
     (handle-message! m (first msg) x)]))

;; handle-message! : manager natural string -> void
(define (handle-message! m pid line)
  (define w (hash-ref (manager-workers m) pid #f))
  (define words (string-split line))
  (when (and w (pair? words))
    (case (first words)
      [("ready") (ready! m w) (publish! m (now-ms))]
      [("stat") (stat! w (rest words))]
      [("metrics") (let ([x (words->metrics (rest words))]) (when x (set-worker-metrics! w x)))]
      [("limit") (let ([n (and (pair? (rest words)) (string->number (second words)))])
                   (set-worker-max-requests! w (and (exact-positive-integer? n) n)))]
      [("recycle") (recycle! m w (string-join (rest words)))]
      ;; escaped by the worker: one line of plain ASCII
      [("failed") (set-worker-failure! w (substring line (min (string-length line) 7)))]
      [else (void)])))

;; stat! : worker (listof string) -> void
;; 6 numbers or more (a newer worker may send more than this manager knows)
(define (stat! w words)
  (define ns (for/list ([n (in-list (map string->number words))])
               (and (exact-nonnegative-integer? n) n)))
  (when (and (>= (length ns) 6) (andmap values (take ns 6)))
    (when (or (positive? (second ns)) (> (first ns) (worker-requests w)))
      (set-worker-last-busy-ms! w (now-ms)))
    (set-worker-requests! w (first ns))
    (set-worker-active! w (second ns))
    (set-worker-connections! w (third ns))
    (set-worker-slow! w (fourth ns))
    (set-worker-shed! w (fifth ns))
    (set-worker-queue-delay! w (sixth ns))
    (when (and (>= (length ns) 7) (seventh ns)) (set-worker-sessions! w (seventh ns)))
    (when (and (>= (length ns) 8) (eighth ns)) (set-worker-log-dropped! w (eighth ns)))))

;; ready! : manager worker -> void
;; The last of a reload's new generation ready: the old one retires, the new one serves.
;; Otherwise a fresh worker takes the place of one of its generation waiting to be recycled.
(define (ready! m w)
  (set-worker-state! w 'ready)
  (set-worker-ready-ms! w (now-ms))
  (set-manager-ever-ready?! m #t)
  (log-fastcgi-info "worker ~a ready (generation ~a)" (worker-pid w) (worker-gen w))
  (define reload-gen (manager-reload-gen m))
  (cond
    [(and reload-gen (= (worker-gen w) reload-gen))
     (when (andmap (λ (x) (eq? (worker-state x) 'ready)) (serving m reload-gen))
       (for ([old (in-list (live-workers m))] #:when (< (worker-gen old) reload-gen))
         (retire! m old "reload: replaced by the new generation"))
       (set-manager-gen! m reload-gen)
       (log-fastcgi-info "reload done: generation ~a serves" reload-gen)
       (reload-settled! m #f))]
    [else
     (define waiting (sort (filter (λ (x) (and (worker-recycle x) (= (worker-gen x) (worker-gen w))
                                               (not (eq? (worker-state x) 'draining))))
                                   (live-workers m))
                           < #:key worker-started-ms))
     (when (pair? waiting) (retire! m (first waiting) (worker-recycle (first waiting))))]))
