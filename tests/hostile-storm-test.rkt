#lang racket/base
;; HOSTILE.md 26: a storm of connections past max-connections (fast 503s, memory bounded)
;; and descriptors above 1024, against a child server (tests/fuzz/server.rkt). The shared
;; checks are in tests/lib/hostile.rkt.
(require racket/list
         rackunit
         "fuzz/fuzz.rkt"
         "integration/lib.rkt"
         "lib/hostile.rkt"
         "lib/raw-peer.rkt")

;; open-with-request : path natural boolean -> peer ; a connection with one request sent
(define (open-with-request path keep?)
  (define p (peer-connect path))
  (peer-send! p (request-bytes 1 #:keep? keep? #:params (params "CONTENT_LENGTH" "1") #:stdin #"s"))
  p)

(call-with-temp-dir
 "fcgi-storm"
 (λ (dir)
   (call-with-fuzz-server
    dir #:args '("--max-connections" "20" "--idle-timeout" "60" "--first-byte-timeout" "5")
    (λ (fs)
      (test-case "26: a storm past max-connections: fast 503s, bounded, no crash"
        (define path (fuzz-server-path fs))
        ;; 20 kept connections fill the server
        (define held (for/list ([i 20]) (open-with-request path #t)))
        (for ([p held]) (check-status (peer-answer p 1) 200))
        (define statuses (make-vector 300 #f))
        (define t0 (current-inexact-milliseconds))
        (define growth
          (peak-growth-kb
           fs
           (λ ()
             (define threads
               (for/list ([i 300])
                 (thread
                  (λ ()
                    (define p (open-with-request path #f))
                    (vector-set! statuses i
                                 (with-handlers ([exn:fail? exn-message])
                                   (define a (peer-answer p 1 20))
                                   (list (cgi-status (answer-stdout a)) (answer-protocol-status a)
                                         (peer-eof? p 5))))
                    (peer-close! p)))))
             (for-each thread-wait threads))))
        (define secs (/ (- (current-inexact-milliseconds) t0) 1000.))
        (printf "26: 300 connections past a full server: ~a s, peak growth ~a kB, answers ~a\n"
                secs growth (remove-duplicates (vector->list statuses)))
        (check-equal? (remove-duplicates (vector->list statuses)) (list (list 503 'request-complete #t)))
        (check-true (< secs 10) "fast answers")
        (check-true (< growth max-growth-kb))
        ;; the held connections still serve, and once they close a new one is served
        (for ([p held]) (check-child-same p 2))
        (for-each peer-close! held)
        (sleep 0.3)
        (check-child-good fs))))
   (test-case "26: descriptors above 1024: 300 connections at once, all served"
    (call-with-fuzz-server
     dir #:nofile 4096 #:args '("--hold-fds" "1100" "--idle-timeout" "60")
     (λ (fs)
       (define path (fuzz-server-path fs))
       (define peers (for/list ([i 300]) (open-with-request path #t)))
       (for ([p peers]) (check-status (peer-answer p 1 20) 200))
       (define high (string->number (child-command fs "fds")))
       (printf "26: ~a sockets above fd 1024 in the child\n" high)
       (check-true (>= high 300))
       (for ([p peers]) (check-child-same p 2))
       (for-each peer-close! peers)
       (check-child-good fs))))))
