#lang racket/base
;; HOSTILE.md 5, 8, 13, 14 and 18 by the thousand: floods of BEGIN_REQUESTs, unknown roles,
;; bad requests, params and bodies past their limits, sent to a child server
;; (tests/fuzz/server.rkt) whose peak memory is read in /proc/PID/status and whose log lines
;; are counted (at most so many a second, the rest counted in a later line). The shared
;; checks are in tests/lib/hostile.rkt.
(require racket/format
         racket/list
         rackunit
         "../fastcgi/private/protocol/protocol.rkt"
         "fuzz/fuzz.rkt"
         "integration/lib.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

(call-with-temp-dir
 "fcgi-hostile-child"
 (λ (dir)
   (call-with-fuzz-server
    dir #:args '("--idle-timeout" "30" "--read-timeout" "10")
    (λ (fs)
      ;; warm every path once, so first-use allocations are not counted
      (check-child-good fs)
      (child-answer fs (request-bytes 1 #:params (params "BIG" (make-string 200000 #\x))))

      (test-case "8: BEGIN_REQUEST flood with fresh ids: OVERLOADED past the cap, memory bounded"
        (define growth #f)
        (define lines
          (new-log-lines
           fs #rx#"[^\n]*OVERLOADED[^\n]*"
           (λ ()
             (set! growth
                   (peak-growth-kb
                    fs
                    (λ ()
                      (on-connections
                       fs 10
                       (λ (p)
                         (peer-send! p (apply bytes-append (for/list ([id (in-range 1 5001)]) (begin-bytes id))))
                         (check-equal? (remove-duplicates (end-statuses p 4900)) '(overloaded))
                         ;; a live request on the flooded connection is still served
                         (peer-send! p (stream->bytes 'params 1 #"") (stream->bytes 'stdin 1 #"x"))
                         (check-status (peer-answer p 1 10) 200)))))))))
        (printf "8: 10 connections x 5000 BEGIN_REQUEST: peak growth ~a kB\n" growth)
        ;; 1000 live requests (100 per connection) at about 18 KiB each measured 17 to 35
        ;; MiB; without the cap, 50000 would take about 900 MiB
        (check-true (< growth (* 64 1024)) (format "grew ~a kB" growth))
        ;; 49,000 refusals, logged at most once a second (one line each, before)
        (printf "8: ~a OVERLOADED log lines\n" (length lines))
        (check-once-a-second lines #rx#"over 100 live requests on one connection: OVERLOADED")
        (check-child-good fs))

      (test-case "5: unknown roles by the thousand on a kept connection: each answered, logged once a second"
        (define lines
          (new-log-lines
           fs #rx#"[^\n]*UNKNOWN_ROLE[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (apply bytes-append (for/list ([id (in-range 1 5001)])
                                                     (record->bytes 'begin-request id (begin-request-content 9 #t)))))
                 (check-equal? (remove-duplicates (end-statuses p 5000)) '(unknown-role))
                 (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                 (check-status (peer-answer p 1) 200))))))
        (printf "5: 5000 unknown roles: ~a log lines\n" (length lines))
        (check-once-a-second lines #rx#"role 9 not served: UNKNOWN_ROLE")
        (check-child-good fs))

      (test-case "14: bad requests by the thousand: each answered 400, 10 log lines a second, the rest counted"
        ;; a refused request costs the peer about 50 bytes and wrote a line of about 120
        ;; (one per request, before); now the first 10 of a second are written in full and
        ;; the next one written says how many were not
        (define n 2000)
        (define t0 (current-inexact-milliseconds))
        (define flood
          (new-log-lines
           fs #rx#"[^\n]*CONTENT_LENGTH is not a number[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (apply bytes-append
                                      (for/list ([id (in-range 1 (add1 n))])
                                        (request-bytes id #:params (params "CONTENT_LENGTH" "x")))))
                 (define answers (peer-answers p (for/list ([id (in-range 1 (add1 n))]) id) 30))
                 (check-equal? (length answers) n)
                 (for ([a (in-list answers)]) (check-status a 400)))))))
        (define seconds (/ (- (current-inexact-milliseconds) t0) 1000.0))
        (printf "14: ~a bad requests in ~a s: ~a log lines\n" n (~r seconds #:precision 2) (length flood))
        ;; (the second's first lines may have gone to an earlier test's refusals)
        (check-true (<= 1 (length flood) (* 10 (+ 2 (ceiling seconds))))
                    (format "~a lines in ~a s" (length flood) seconds))
        ;; the next line, more than a second later, counts the ones held back
        (sleep 1.1)
        (define after
          (new-log-lines
           fs #rx#"[^\n]*CONTENT_LENGTH is not a number[^\n]*"
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (peer-send! p (request-bytes 1 #:params (params "CONTENT_LENGTH" "y")))
                 (check-status (peer-answer p 1) 400))))))
        (check-equal? (length after) 1)
        ;; every request is accounted for: written, or counted in a later line
        (define (held-back line)
          (define m (regexp-match #rx#"answered 400 \\(([0-9]+) more like it not written\\)$" line))
          (if m (string->number (bytes->string/utf-8 (cadr m))) 0))
        (check-true (regexp-match? #rx#"more like it not written" (car after)) (format "~s" (car after)))
        (check-equal? (+ (length flood) 1 (for/sum ([l (in-list (append flood after))]) (held-back l)))
                      (+ n 1))
        (check-child-good fs))

      (test-case "8 and 13: 100 live requests a connection, each with unfinished params: memory bounded"
        ;; Each request alone stays under max-params-bytes (120,000 of 128 KiB), so only
        ;; connection-buffer (1 MiB) bounds what the 100 of one connection hold together:
        ;; about 8 of them keep their params, the others are answered OVERLOADED. Without
        ;; it, the 10 connections grew the child by 183 MiB.
        (define overloaded (box 0))
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (on-connections
              fs 10
              (λ (p)
                (define half (pairs->bytes (list (cons #"P" (make-bytes 59990 120)))))
                (for ([id (in-range 1 101)])
                  (peer-send! p (begin-bytes id) (record->bytes 'params id half)
                              (record->bytes 'params id half)))
                (define ends (filter values (end-statuses p #f 3)))
                (check-equal? (remove-duplicates ends) '(overloaded))
                (set-box! overloaded (+ (unbox overloaded) (length ends))))))))
        (printf "8 and 13: 10 connections x 100 requests x 120,000 bytes of params: peak growth ~a kB, ~a OVERLOADED\n"
                growth (unbox overloaded))
        (check-true (> (unbox overloaded) 800) (format "~a OVERLOADED" (unbox overloaded)))
        (check-true (< growth (* 64 1024)) (format "grew ~a kB" growth))
        (check-child-good fs))

      (test-case "13: params over the limits: 431, memory bounded"
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (for ([c 4])
               (with-peer (fuzz-server-path fs)
                 (λ (p)
                   ;; 8 MiB of params in 64 KiB records, then 2000 tiny pairs
                   (peer-send! p (begin-bytes 1))
                   (for ([i 128]) (peer-send! p (record->bytes 'params 1 (make-bytes 65535 65))))
                   (peer-send! p (record->bytes 'params 1 #"") (stream->bytes 'stdin 1 #""))
                   (check-status (peer-answer p 1 20) 431)
                   (peer-send! p (request-bytes 2 #:params (for/list ([i 2000]) (cons (format "P~a" i) ""))))
                   (check-status (peer-answer p 2) 431)
                   (peer-send! p (request-bytes 3 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                   (check-status (peer-answer p 3) 200)))))))
        (printf "13: 4 x 8 MiB of params: peak growth ~a kB\n" growth)
        (check-true (< growth max-growth-kb) (format "grew ~a kB" growth))
        (check-child-good fs))

      (test-case "18: STDIN over the body limit (1 MiB in the child): 413, memory bounded"
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (with-peer (fuzz-server-path fs)
               (λ (p)
                 (define writer
                   (thread (λ ()
                             (peer-send! p (begin-bytes 1) (stream->bytes 'params 1 #""))
                             (for ([i 320]) (peer-send! p (record->bytes 'stdin 1 (make-bytes 65528 66))))
                             (peer-send! p (record->bytes 'stdin 1 #"")))))
                 (check-status (peer-answer p 1 20) 413)
                 (sync/timeout 20 writer)
                 (peer-send! p (request-bytes 2 #:params (params "CONTENT_LENGTH" "1") #:stdin #"z"))
                 (check-status (peer-answer p 2) 200))))))
        (printf "18: 20 MiB body past a 1 MiB limit: peak growth ~a kB\n" growth)
        (check-true (< growth max-growth-kb) (format "grew ~a kB" growth))
        (check-child-good fs))))))
