#lang racket/base
;; io.rkt: the same table of actions and answers, run against both implementations (a
;; socket's raw descriptor, and a pair of ports), so that the connection layer may use
;; either without asking which it has.
(require rackunit
         racket/file
         racket/unix-socket
         fastcgi/private/engine/io
         (only-in fastcgi/private/transport/transport parse-listen-address open-listener
                  listener-accept-fd listener-close!))

(define dir (make-temporary-file "fastcgi-io-~a" 'directory))

;; with-fd-io : ((io input-port output-port) -> any) -> any
;; An io over the accepted end of a unix socket; the peer's end as ports.
(define (with-fd-io proc)
  (define path (build-path dir "io.sock"))
  (when (file-exists? path) (delete-file path))
  (define l (open-listener (parse-listen-address (string-append "unix:" (path->string path)))))
  (define-values (pin pout) (unix-socket-connect path))
  (define-values (fd peer) (listener-accept-fd l))
  (dynamic-wind void
                (λ () (proc (fd-io fd) pin pout))
                (λ () (listener-close! l) (close-input-port pin) (close-output-port pout))))

;; with-port-io : ((io input-port output-port) -> any) -> any
;; An io over two pipes; the peer's ends of them.
(define (with-port-io proc)
  (define-values (in peer-out) (make-pipe))
  (define-values (peer-in out) (make-pipe))
  (proc (port-io in out) peer-in peer-out))

(define (read-some in n)
  (define bs (make-bytes n))
  (define k (and (sync/timeout 5 in) (read-bytes-avail! bs in)))
  (if (exact-integer? k) (subbytes bs 0 k) k))

;; the table: each step is a name and a procedure of (io peer-in peer-out) that checks
(define steps
  (list
   (cons "receive with nothing there: 0"
         (λ (x pin pout)
           (check-equal? (io-receive! x (make-bytes 16) 0 16) 0)))
   (cons "readable-evt: not ready while nothing is there, ready once the peer sends"
         (λ (x pin pout)
           (check-false (sync/timeout 0.05 (io-readable-evt x)))
           (write-bytes #"hello" pout)
           (flush-output pout)
           (check-not-false (sync/timeout 5 (io-readable-evt x)))
           (define bs (make-bytes 16))
           (check-equal? (io-receive! x bs 2 16) 5)
           (check-equal? (subbytes bs 2 7) #"hello")))
   (cons "send: the bytes taken, which the peer reads"
         (λ (x pin pout)
           (check-equal? (io-send! x #"xxanswer" 2 8) 6)
           (check-equal? (read-some pin 64) #"answer")))
   (cons "send-records: what it takes in one go (or 0), the rest by send; the peer gets all"
         (λ (x pin pout)
           (define heads #"HEAD0001HEAD0002")
           (define body #"abcdef")
           (define r (io-send-records! x heads 0 body 0 3 2))
           (check-not-false (memv r '(0 22)) (format "took ~a" r))
           (when (zero? r)
             (for ([j 2])
               (io-send! x heads (* 8 j) (* 8 (add1 j)))
               (io-send! x body (* 3 j) (* 3 (add1 j)))))
           (define got (let loop ([acc #""])
                         (if (>= (bytes-length acc) 22) acc (loop (bytes-append acc (read-some pin 64))))))
           (check-equal? got #"HEAD0001abcHEAD0002def")))
   (cons "input-pending?: a boolean, #f with nothing unread"
         (λ (x pin pout)
           (check-false (io-input-pending? x))))
   (cons "shutdown: the peer reads the end"
         (λ (x pin pout)
           (io-shutdown! x)
           (check-equal? (read-some pin 16) eof)))
   (cons "close: #t once; then receive is eof, send #f, the evts ready at once"
         (λ (x pin pout)
           (check-false (io-closed? x))
           (check-true (io-close! x))
           (check-false (io-close! x))
           (check-true (io-closed? x))
           (check-equal? (io-receive! x (make-bytes 4) 0 4) eof)
           (check-false (io-send! x #"late" 0 4))
           (check-not-false (sync/timeout 0 (io-readable-evt x)))
           (check-not-false (sync/timeout 0 (io-writable-evt x)))))))

(for ([impl (list (cons "fd" with-fd-io) (cons "ports" with-port-io))])
  (test-case (format "the table over ~a" (car impl))
    ((cdr impl)
     (λ (x pin pout)
       (for ([s (in-list steps)])
         (with-check-info (['step (car s)] ['io (car impl)])
           ((cdr s) x pin pout)))))))

(test-case "the peer's end: receive gives eof over both"
  (for ([with (list with-fd-io with-port-io)])
    (with (λ (x pin pout)
            (close-output-port pout)
            (check-not-false (sync/timeout 5 (io-readable-evt x)))
            (check-equal? (io-receive! x (make-bytes 4) 0 4) eof)))))

(test-case "fd-io knows its descriptor; port-io has none"
  (with-fd-io (λ (x pin pout) (check-true (exact-nonnegative-integer? (io-fd x)))))
  (with-port-io (λ (x pin pout) (check-false (io-fd x)))))

(delete-directory/files dir)
