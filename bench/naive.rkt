#lang racket/base
;; The naive design, as people write it today: a thread per connection, one request per
;; connection, params parsed into a hash, the answer written, the connection closed.
;;   racket bench/naive.rkt unix:/tmp/naive.sock      or      racket bench/naive.rkt 127.0.0.1:9000
(require racket/tcp
         racket/unix-socket)

(define hello #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n")

;; read-length : bytes natural -> (values natural natural) ; a 1- or 4-byte length, next index
(define (read-length bs i)
  (define b (bytes-ref bs i))
  (if (< b 128)
      (values b (add1 i))
      (values (bitwise-ior (arithmetic-shift (bitwise-and b 127) 24)
                           (arithmetic-shift (bytes-ref bs (+ i 1)) 16)
                           (arithmetic-shift (bytes-ref bs (+ i 2)) 8)
                           (bytes-ref bs (+ i 3)))
              (+ i 4))))

;; parse-params : bytes -> (hash bytes bytes)
(define (parse-params bs)
  (let loop ([i 0] [h (hash)])
    (cond
      [(>= i (bytes-length bs)) h]
      [else
       (define-values (nl i1) (read-length bs i))
       (define-values (vl i2) (read-length bs i1))
       (loop (+ i2 nl vl)
             (hash-set h (subbytes bs i2 (+ i2 nl)) (subbytes bs (+ i2 nl) (+ i2 nl vl))))])))

;; record : natural natural bytes -> bytes ; one record of type for request id
(define (record type id content)
  (define n (bytes-length content))
  (bytes-append (bytes 1 type (arithmetic-shift id -8) (bitwise-and id 255)
                       (arithmetic-shift n -8) (bitwise-and n 255) 0 0)
                content))

;; serve-connection : input-port output-port -> void
;; Reads records until the body ends, answers, closes: the connection serves one request.
(define (serve-connection in out)
  (let loop ([params #""])
    (define head (read-bytes 8 in))
    (when (and (bytes? head) (= (bytes-length head) 8))
      (define type (bytes-ref head 1))
      (define id (+ (* 256 (bytes-ref head 2)) (bytes-ref head 3)))
      (define content (read-bytes (+ (* 256 (bytes-ref head 4)) (bytes-ref head 5)) in))
      (read-bytes (bytes-ref head 6) in)
      (define body (if (bytes? content) content #""))
      (cond
        [(= type 4) (if (zero? (bytes-length body))
                        (begin (parse-params params) (loop params))
                        (loop (bytes-append params body)))]
        [(and (= type 5) (zero? (bytes-length body)))
         (write-bytes (bytes-append (record 6 id hello) (record 6 id #"")
                                    (record 3 id (bytes 0 0 0 0 0 0 0 0)))
                      out)
         (flush-output out)]
        [else (loop params)])))
  (close-input-port in)
  (close-output-port out))

(module+ main
  (define address (vector-ref (current-command-line-arguments) 0))
  (define unix-path (and (regexp-match? #rx"^unix:" address) (substring address 5)))
  (when (and unix-path (file-exists? unix-path)) (delete-file unix-path))
  (define listener
    (if unix-path
        (unix-socket-listen unix-path 1024)
        (let ([m (regexp-match #rx"^(.*):([0-9]+)$" address)])
          (tcp-listen (string->number (caddr m)) 1024 #t (cadr m)))))
  (let loop ()
    (define-values (in out)
      (if unix-path (unix-socket-accept listener) (tcp-accept listener)))
    (thread (λ () (with-handlers ([exn:fail? void]) (serve-connection in out))))
    (loop)))
