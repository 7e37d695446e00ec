#lang racket/base
;; scoreboard.rkt: the status file is written whole (to a temporary file renamed over the
;; old one) and read back equal; absent, or not a board: #f.
(require racket/file
         rackunit
         "../fastcgi/private/status/scoreboard.rkt")

(define board
  (hasheq 'pool "www" 'generation 1 'requests 7 'listen_queue 'null 'last_reload_error "app.rkt: boom"
          'workers (list (hasheq 'pid 101 'state "busy" 'queue_delay 0.25 'memory 52428800)
                         (hasheq 'pid 102 'state "starting" 'memory 'null))))

(test-case "the scoreboard file: written whole, read back; absent or not a board: #f"
  (define dir (make-temporary-directory "fcgi-pool-status-~a"))
  (define path (path->string (build-path dir "m.pid.status.json")))
  (define (file-with text) (call-with-output-file path #:exists 'truncate (λ (o) (write-string text o))) path)
  (dynamic-wind
   void
   (λ ()
     (check-false (read-scoreboard path) "absent")
     (for ([b (in-list (list board (hasheq) (hasheq 'pool "p" 'workers '())))])
       (write-scoreboard! path b)
       (check-equal? (read-scoreboard path) b)
       (check-false (file-exists? (string-append path ".tmp")) "the temporary file is renamed"))
     (for ([text (in-list '("" "{\"pool\": " "[1, 2]" "\"board\"" "null"))])
       (check-false (read-scoreboard (file-with text)) (format "~s" text))))
   (λ () (delete-directory/files dir))))
