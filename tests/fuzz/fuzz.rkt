#lang racket/base
;; A seeded fuzzer for the FastCGI server. Each input is the byte stream of one connection:
;; valid records generated from the grammar (BEGIN_REQUEST, PARAMS with 1- and 4-byte pair
;; lengths, STDIN, DATA, ABORT_REQUEST, GET_VALUES, unknown types, keep-conn on and off,
;; multiplexed ids, random record splits and padding), then mutated (flipped bytes, cuts,
;; duplicated and reordered records, extreme lengths, huge padding, random ids and types,
;; pair lengths near 2^31, BEGIN_REQUEST floods). Inputs go in batches, many connections at
;; once, to a child server (server.rkt). After each batch: a good request is still
;; answered, the child's VmRSS is under a bound, every log line is an escaped warning, and
;; every answer was a well-formed record stream. A failing batch is replayed one input at a
;; time on a fresh server to find the culprit, which is saved under crashes/.
;;
;;   racket fuzz.rkt [--seconds N] [--seed S]        (make fuzz FUZZ_SECONDS=N)
(require compiler/find-exe
         racket/file
         racket/list
         racket/port
         racket/runtime-path
         racket/unix-socket
         "../../fastcgi/private/protocol/protocol.rkt"
         "../integration/lib.rkt")
(provide generate-input
         input-seed
         call-with-fuzz-server
         fuzz-server-proc
         fuzz-server-path
         child-command
         run-batch
         check-server
         fuzz
         crash-files
         crashes-dir
         known-bug-inputs)

(define-runtime-path server-module "server.rkt")
(define-runtime-path crashes-dir "crashes")

;; ---------------------------------------------------------------------------------------
;; Randomness: every input is a function of its seed alone.

;; input-seed : natural natural natural -> natural ; the seed of one input of one batch
(define (input-seed seed batch index)
  (modulo (+ (* seed 1000003) (* batch 7919) index 1) 2147483647))

;; with-seed : natural (-> any) -> any
(define (with-seed s thunk)
  (parameterize ([current-pseudo-random-generator (make-pseudo-random-generator)])
    (random-seed (max 1 (modulo s 2147483647)))
    (thunk)))

;; pick : list -> any
(define (pick l) (list-ref l (random (length l))))

;; chance? : real -> boolean
(define (chance? p) (< (random) p))

;; random-bytes : natural -> bytes
(define (random-bytes n)
  (define bs (make-bytes n))
  (for ([i (in-range n)]) (bytes-set! bs i (random 256)))
  bs)

;; ---------------------------------------------------------------------------------------
;; Generation.

;; rec : byte natural bytes natural -> bytes ; one record with explicit padding
(define (rec type id content pad)
  (bytes-append (bytes 1 type (quotient id 256) (bitwise-and id 255)
                       (quotient (bytes-length content) 256)
                       (bitwise-and (bytes-length content) 255) pad 0)
                content
                (if (chance? 0.5) (make-bytes pad 0) (random-bytes pad))))

;; random-pad : bytes -> natural
(define (random-pad content)
  (cond [(chance? 0.6) (padding-for (bytes-length content))]
        [(chance? 0.5) 0]
        [else (random 256)]))

;; len-bytes : natural -> bytes ; a pair length, in the 4-byte form at random when short
(define (len-bytes n)
  (if (and (< n 128) (chance? 0.8))
      (bytes n)
      (bytes (bitwise-ior #x80 (arithmetic-shift n -24)) (bitwise-and (arithmetic-shift n -16) 255)
             (bitwise-and (arithmetic-shift n -8) 255) (bitwise-and n 255))))

;; pairs-content : (listof (cons bytes bytes)) -> bytes
(define (pairs-content pairs)
  (apply bytes-append
         (for/list ([p (in-list pairs)])
           (bytes-append (len-bytes (bytes-length (car p))) (len-bytes (bytes-length (cdr p)))
                         (car p) (cdr p)))))

;; stream : byte natural bytes boolean -> (listof bytes)
;; content split into records of random sizes; the empty record ends it when end?.
(define (stream type id content end?)
  (define len (bytes-length content))
  (define chunk (if (chance? 0.3) (add1 (random (max 1 (min len 65535)))) 65535))
  (append
   (for/list ([i (in-range 0 len chunk)])
     (define part (subbytes content i (min len (+ i chunk))))
     (rec type id part (random-pad part)))
   (if end? (list (rec type id #"" (if (chance? 0.9) 0 (random 256)))) '())))

(define param-names
  '(#"REQUEST_METHOD" #"REQUEST_URI" #"QUERY_STRING" #"SCRIPT_NAME" #"SCRIPT_FILENAME"
    #"PATH_INFO" #"HTTP_HOST" #"HTTP_PROXY" #"HTTP_X_FORWARDED_FOR" #"HTTP_X_FORWARDED-FOR"
    #"REMOTE_ADDR" #"SERVER_PORT" #"GATEWAY_INTERFACE"))

;; random-value : -> bytes
(define (random-value)
  (case (random 5)
    [(0) #""]
    [(1) (pick '(#"GET" #"POST" #"/" #"/a?b=c" #"0" #"-1" #"99999999999999999999" #"\r\n\0\e"))]
    [(2) (random-bytes (random 300))]
    [(3) (make-bytes (random 5000) (+ 32 (random 95)))]
    [else (string->bytes/utf-8 (number->string (random 100000)))]))

;; request-records : natural -> (listof (listof bytes))
;; One request as lists of records (BEGIN_REQUEST, then each stream), to be sent in order
;; or interleaved with other requests.
(define (request-records id)
  (define role (cond [(chance? 0.85) 1] [(chance? 0.5) 2] [(chance? 0.8) 3] [else (random 65536)]))
  (define keep? (chance? 0.6))
  (define body (if (chance? 0.1) (random-bytes (random 140000)) (random-bytes (random 3000))))
  (define data (random-bytes (random 2000)))
  (define pairs
    (append
     (for/list ([i (in-range (random 12))])
       (cons (if (chance? 0.8) (pick param-names) (random-bytes (add1 (random 40)))) (random-value)))
     (if (chance? 0.7)
         (list (cons #"CONTENT_LENGTH"
                     (if (chance? 0.8)
                         (string->bytes/utf-8 (number->string (bytes-length body)))
                         (random-value))))
         '())
     (if (= role 3)
         (list (cons #"FCGI_DATA_LENGTH" (string->bytes/utf-8 (number->string (bytes-length data)))))
         '())))
  (define begin (rec 1 id (bytes (quotient role 256) (bitwise-and role 255) (if keep? 1 0) 0 0 0 0 0) 0))
  (define parts
    (list (list begin)
          (stream 4 id (pairs-content pairs) #t)
          (if (= role 2) '() (stream 5 id body (chance? 0.92)))
          (if (= role 3) (stream 8 id data #t) '())))
  (if (chance? 0.1)
      ;; ABORT_REQUEST somewhere after the BEGIN_REQUEST
      (let* ([flat (apply append (cdr parts))]
             [at (random (add1 (length flat)))])
        (list (list begin) (append (take flat at) (list (rec 2 id #"" 0)) (drop flat at))))
      parts))

;; interleave : (listof (listof bytes)) -> (listof bytes) ; random merge keeping each order
(define (interleave lists)
  (let loop ([lists (filter pair? lists)] [acc '()])
    (if (null? lists)
        (reverse acc)
        (let* ([i (random (length lists))]
               [l (list-ref lists i)]
               [rest (append (take lists i) (if (null? (cdr l)) '() (list (cdr l))) (drop lists (add1 i)))])
          (loop rest (cons (car l) acc))))))

;; generate-records : -> (listof bytes) ; one connection's valid records
(define (generate-records)
  (define n (add1 (random 4)))
  (define ids
    (remove-duplicates
     (for/list ([i (in-range n)]) (if (chance? 0.8) (add1 i) (add1 (random 65535))))))
  (define requests (map (λ (id) (apply append (request-records id))) ids))
  (define body
    (if (chance? 0.5) (apply append requests) (interleave requests)))
  (define management
    (append (if (chance? 0.1)
                (list (rec 9 0 (pairs-content (list (cons #"FCGI_MAX_CONNS" #"") (cons #"FCGI_MPXS_CONNS" #"")
                                                    (cons (random-bytes (random 20)) #"")))
                           0))
                '())
            (if (chance? 0.05) (list (rec (+ 12 (random 244)) 0 (random-bytes (random 20)) 0)) '())))
  (append management body))

;; ---------------------------------------------------------------------------------------
;; Mutation.

;; set-byte : bytes natural byte -> bytes ; a copy with one byte changed (when in range)
(define (set-byte bs i v)
  (define c (bytes-copy bs))
  (when (< i (bytes-length c)) (bytes-set! c i v))
  c)

;; mutate-record : bytes -> bytes
;; A cut can leave an empty "record"; its mutation is bytes appended (there is no byte to flip).
(define (mutate-record r)
  (case (if (zero? (bytes-length r)) 7 (random 8))
    [(0) (for/fold ([r r]) ([k (in-range (add1 (random 4)))])
           (define i (random (bytes-length r)))
           (set-byte r i (bitwise-xor (bytes-ref r i) (add1 (random 255)))))]
    [(1) (define n (pick (list 0 1 7 8 9 65535 (random 65536))))        ; declared length
         (set-byte (set-byte r 4 (quotient n 256)) 5 (bitwise-and n 255))]
    [(2) (if (chance? 0.5)                                               ; huge padding
             (bytes-append (set-byte r 6 255) (make-bytes 255 0))
             (set-byte r 6 255))]
    [(3) (define id (pick (list 0 1 2 65535 (random 65536))))            ; id
         (set-byte (set-byte r 2 (quotient id 256)) 3 (bitwise-and id 255))]
    [(4) (set-byte r 1 (random 256))]                                    ; type
    [(5) (set-byte r 0 (pick '(0 2 255)))]                               ; version
    [(6) (if (> (bytes-length r) 12)                                     ; a pair length near 2^31
             (let ([i (+ 8 (random (- (bytes-length r) 12)))]
                   [len (pick (list #"\177\377\377\377" #"\377\377\377\377" #"\200\0\0\0"
                                    #"\200\0\377\377" #"\200\1\0\0"))])
               (bytes-append (subbytes r 0 i) len (subbytes r (+ i 4))))
             r)]
    [else (bytes-append r (random-bytes (add1 (random 40))))]))

;; mutate : (listof bytes) -> (listof bytes) ; one to three mutations of the record list
(define (mutate recs)
  (for/fold ([recs recs]) ([k (in-range (add1 (random 3)))])
    (define n (length recs))
    (define i (random (max 1 n)))
    (case (if (zero? n) 6 (random 7))
      [(0 1 2) (append (take recs i) (list (mutate-record (list-ref recs i))) (drop recs (add1 i)))]
      [(3) (append (take recs i) (list (list-ref recs i)) (drop recs i))]     ; duplicate
      [(4) (define j (random n))                                             ; swap two
           (for/list ([r (in-list recs)] [k (in-naturals)])
             (cond [(= k i) (list-ref recs j)] [(= k j) (list-ref recs i)] [else r]))]
      [(5) (define all (apply bytes-append recs))                           ; cut
           (if (zero? (bytes-length all)) recs (list (subbytes all 0 (random (bytes-length all)))))]
      [else                                                                  ; floods
       (if (chance? 0.5)
           (append recs (for/list ([id (in-range 1000 (+ 1000 (random 400)))])
                          (rec 1 id (bytes 0 1 1 0 0 0 0 0) 0)))
           (append recs (list (rec 1 77 (bytes 0 1 1 0 0 0 0 0) 0))
                   (for/list ([k (in-range (random 40))])
                     (rec 4 77 (make-bytes 65535 (+ 65 k)) 0))))])))

;; generate-input : natural -> bytes ; the input of one seed
(define (generate-input s)
  (with-seed s
    (λ ()
      (define recs (generate-records))
      (apply bytes-append (if (chance? 0.85) (mutate recs) recs)))))

;; known-bug-inputs : (listof (cons string bytes))
;; One connection each, after the known bugs of other servers listed in HOSTILE.md.
(define known-bug-inputs
  (with-seed 1 (λ () (let ([begin1 (rec 1 1 (bytes 0 1 1 0 0 0 0 0) 0)]
        [end-streams (bytes-append (rec 4 1 #"" 0) (rec 5 1 #"" 0))])
    (list
     ;; libfcgi CVE-2025-23016: name and value lengths near 2^31 whose sum overflows
     (cons "libfcgi-cve-2025-23016"
           (bytes-append begin1 (rec 4 1 #"ÿÿÿÿÿÿÿAB" 6) end-streams))
     ;; Go issue 11824: declared pair lengths larger than the record
     (cons "go-11824"
           (bytes-append begin1 (rec 4 1 #"@NAME" 4) end-streams))
     ;; php-fpm CVE-2019-11043: empty PATH_INFO, long SCRIPT_FILENAME
     (cons "php-fpm-cve-2019-11043"
           (bytes-append begin1
                         (rec 4 1 (pairs-content (list (cons #"SCRIPT_FILENAME" (make-bytes 4000 47))
                                                       (cons #"PATH_INFO" #"")
                                                       (cons #"REQUEST_URI" #"/index.php/%0a")))
                              0)
                         end-streams))
     ;; Go issue 81548: BEGIN_REQUEST flood with fresh ids
     (cons "go-81548"
           (apply bytes-append (for/list ([id (in-range 1 5001)]) (rec 1 id (bytes 0 1 1 0 0 0 0 0) 0))))
     ;; HAProxy 16-bit truncation: content length 65535 with padding 255, then a record
     ;; whose bytes would be read as a header by a reader that truncates
     (cons "haproxy-16-bit"
           (bytes-append begin1 (rec 4 1 (make-bytes 65535 65) 255) (rec 4 1 #"" 0)
                         (rec 5 1 (make-bytes 65535 66) 255) (rec 5 1 #"" 0)))
     ;; HHVM: one bad record aborting the whole server
     (cons "hhvm-bad-record" (bytes-append begin1 (bytes 1 4 0 1 255 255 255 0) #"short"))
     ;; Perl FCGI CVE-2011-2766: params of one request carried into the next
     (cons "perl-fcgi-cve-2011-2766"
           (bytes-append begin1 (rec 4 1 (pairs-content (list (cons #"SECRET" #"1"))) 0) end-streams
                         begin1 (rec 4 1 #"" 0) (rec 5 1 #"" 0))))))))

;; ---------------------------------------------------------------------------------------
;; The child server.

;; The limits the child runs with: short deadlines so that a batch ends in seconds.
(define child-limits
  '("--first-byte-timeout" "2" "--idle-timeout" "2" "--read-timeout" "2" "--write-timeout" "3"
    "--drain-timeout" "1" "--request-timeout" "5" "--max-body" "1048576"))

;; A running child: its process, socket path, and how much of its stderr was checked.
(struct fuzz-server (proc path [log-offset #:mutable] [baseline-kb #:mutable]))

;; call-with-fuzz-server : path (fuzz-server -> any) #:args (listof string) #:nofile natural
;;                         -> any
;; Starts server.rkt in dir (args after the child's limits override them); with nofile,
;; under `prlimit --nofile=N:N`.
(define (call-with-fuzz-server dir proc #:args [args '()] #:nofile [nofile #f])
  (define path (path->string (build-path dir "fuzz.sock")))
  (define racket (path->string (find-exe)))
  (define-values (program argv)
    (if nofile
        (values (require-program! "/usr/bin/prlimit" "util-linux")
                (list* (format "--nofile=~a:~a" nofile nofile) racket
                       (path->string server-module) (string-append "unix:" path)
                       (append child-limits args)))
        (values racket (list* (path->string server-module) (string-append "unix:" path)
                              (append child-limits args)))))
  (call-with-process
   "fuzz-server" program argv #:dir dir #:stdout-pipe? #t
   (λ (p)
     (define line (read-line/timeout (proc-stdout p) 60 "the fuzz server"))
     (unless (regexp-match? #rx"^ready [0-9]+$" line)
       (error 'fuzz "the fuzz server said ~s" line))
     (define fs (fuzz-server p path 0 #f))
     (set-fuzz-server-baseline-kb! fs (child-rss fs))
     (proc fs))))

;; child-command : fuzz-server string -> string ; one line to the child, one line back
(define (child-command fs cmd)
  (define p (fuzz-server-proc fs))
  (write-string (string-append cmd "\n") (proc-stdin p))
  (flush-output (proc-stdin p))
  (read-line/timeout (proc-stdout p) 20 (format "the answer to ~a" cmd)))

;; child-rss : fuzz-server -> natural ; VmRSS in kB after two major collections
(define (child-rss fs)
  (child-command fs "gc")
  (status-memory-kb (proc-pid (fuzz-server-proc fs)) 'VmRSS))

;; ---------------------------------------------------------------------------------------
;; Driving inputs.

;; Record types the server may send: STDOUT, STDERR, END_REQUEST, GET_VALUES_RESULT,
;; UNKNOWN_TYPE.
(define answer-types '(stdout stderr end-request get-values-result unknown-type))

;; send-input : path bytes natural -> (cons (or/c #f string) natural)
;; One connection: writes the input in chunks picked by seed (half-closing after, or not),
;; reads until EOF or 6 s. #f when all is well, else what was wrong with the answer; and
;; the number of END_REQUEST records received.
(define (send-input path input s)
  (define-values (in out)
    (with-handlers ([exn:fail? (λ (e) (values #f #f))]) (unix-socket-connect path)))
  (cond
    [(not in) (cons "could not connect" 0)]
    [else
     (define-values (chunk half-close?)
       (with-seed s (λ () (values (if (chance? 0.3) (add1 (random 4096)) (max 1 (bytes-length input)))
                                  (chance? 0.7)))))
     (define writer
       (thread (λ ()
                 (with-handlers ([exn:fail? void])   ; the server may close first
                   (for ([i (in-range 0 (bytes-length input) chunk)])
                     (write-bytes input out i (min (bytes-length input) (+ i chunk)))
                     (flush-output out))
                   (when half-close? (close-output-port out))))))
     (define got (open-output-bytes))
     (define deadline (+ (current-inexact-milliseconds) 6000))
     (define eof?
       (let loop ()
         (define left (/ (- deadline (current-inexact-milliseconds)) 1000))
         (cond
           [(<= left 0) #f]
           [(not (sync/timeout left in)) #f]
           [else
            (define buf (make-bytes 65536))
            (define n (with-handlers ([exn:fail? (λ (e) eof)]) (read-bytes-avail!* buf in)))
            (cond [(eof-object? n) #t]
                  [else (write-bytes buf got 0 n) (loop)])])))
     (kill-thread writer)
     (with-handlers ([exn:fail? void]) (close-output-port out))
     (close-input-port in)
     (define answer (get-output-bytes got))
     (cons (and eof? (answer-problem answer))
           (for/sum ([r (in-list (answer-records answer))]) (if (eq? (car r) 'end-request) 1 0)))]))

;; answer-problem : bytes -> (or/c #f string) ; the server's bytes must be whole records
(define (answer-problem bs)
  (define d (make-decoder))
  (decoder-feed! d bs)
  (let loop ()
    (define r (with-handlers ([exn:fail? (λ (e) (exn-message e))]) (decoder-next! d)))
    (cond
      [(string? r) (format "undecodable answer: ~a" r)]
      [(record? r)
       (if (memq (record-type r) answer-types)
           (loop)
           (format "answer record of type ~a" (record-type r)))]
      [(positive? (decoder-buffered d))
       (format "answer ends in a partial record (~a bytes)" (decoder-buffered d))]
      [else #f])))

;; answer-records : bytes -> (listof (cons symbol bytes)) ; the whole records in bs
(define (answer-records bs)
  (define d (make-decoder))
  (decoder-feed! d bs)
  (let loop ([acc '()])
    (define r (decoder-next! d))
    (if r (loop (cons (cons (record-type r) (record-content r)) acc)) (reverse acc))))

;; run-batch : fuzz-server (listof (cons natural bytes)) [box] -> (listof string)
;; All inputs at once, one connection each; the problems found in the answers. The
;; END_REQUEST records received are added to answered.
(define (run-batch fs inputs [answered (box 0)])
  (define results (make-vector (length inputs) #f))
  (define threads
    (for/list ([in (in-list inputs)] [i (in-naturals)])
      (thread (λ () (vector-set! results i (send-input (fuzz-server-path fs) (cdr in) (car in)))))))
  (for-each thread-wait threads)
  (set-box! answered (+ (unbox answered) (for/sum ([r (in-vector results)]) (cdr r))))
  (for/list ([r (in-vector results)] [in (in-list inputs)] #:when (car r))
    (format "input ~a: ~a" (car in) (car r))))

;; The most the child's RSS may grow over its first figure, after collection.
(define max-growth-kb (* 96 1024))

;; A log line the server may print: a timestamp, "warning", and printable ASCII only.
(define good-log-line #px"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+ warning [ -~]*$")

;; check-server : fuzz-server -> (listof string)
;; The problems with the child now: a good request, memory, new log lines.
(define (check-server fs)
  (define good
    (with-handlers ([exn:fail? exn-message])
      (define-values (in out) (unix-socket-connect (fuzz-server-path fs)))
      (write-bytes (bytes-append (record->bytes 'begin-request 1 (begin-request-content 'responder #f))
                                 (record->bytes 'params 1 (pairs->bytes '(("CONTENT_LENGTH" . "4"))))
                                 (record->bytes 'params 1 #"")
                                 (record->bytes 'stdin 1 #"good") (record->bytes 'stdin 1 #""))
                   out)
      (flush-output out)
      (define answer (with-timeout 10 "the good request" (λ () (port->bytes in))))
      (close-output-port out)
      (close-input-port in)
      (and (not (equal? (answer-records answer)
                        '((stdout . #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nid=1 role=responder params=1 body=4 data=0\n")
                          (stdout . #"")
                          (end-request . #"\0\0\0\0\0\0\0\0"))))
           (format "the good request got ~s" answer))))
  (define rss (child-rss fs))
  (define log-text (file->bytes (proc-stderr-file (fuzz-server-proc fs))))
  (define new-log (subbytes log-text (fuzz-server-log-offset fs)))
  (define complete (let ([m (regexp-match-positions #rx#"\n[^\n]*$" new-log)])
                     (if m (caar m) 0)))
  (set-fuzz-server-log-offset! fs (+ (fuzz-server-log-offset fs) (if (zero? complete) 0 (add1 complete))))
  (define bad-lines
    (for/list ([line (in-list (regexp-split #rx#"\n" (subbytes new-log 0 complete)))]
               #:unless (or (zero? (bytes-length line)) (regexp-match? good-log-line line)))
      line))
  (append
   (if good (list good) '())
   (if (> (- rss (fuzz-server-baseline-kb fs)) max-growth-kb)
       (list (format "VmRSS ~a kB, ~a kB over the first figure" rss (- rss (fuzz-server-baseline-kb fs))))
       '())
   (for/list ([l (in-list (take bad-lines (min 5 (length bad-lines))))])
     (format "log line ~s" l))))

;; ---------------------------------------------------------------------------------------
;; The fuzzing loop.

;; crash-files : -> (listof path) ; the saved regression inputs, sorted
(define (crash-files)
  (if (directory-exists? crashes-dir)
      (sort (for/list ([f (in-list (directory-list crashes-dir #:build? #t))]
                       #:when (regexp-match? #rx"[.]bin$" (path->string f)))
              f)
            string<? #:key path->string)
      '()))

;; save-crash! : string bytes -> path
(define (save-crash! name bs)
  (make-directory* crashes-dir)
  (define f (build-path crashes-dir (string-append name ".bin")))
  (call-with-output-file f (λ (o) (write-bytes bs o)) #:exists 'truncate)
  f)

;; isolate! : (listof (cons natural bytes)) natural natural -> (listof path)
;; Replays a failing batch one input at a time, each on a fresh server; saves the inputs
;; that fail alone, or, when none does, the whole batch (replayed together).
(define (isolate! inputs seed batch)
  (define culprits
    (for/list ([in (in-list inputs)]
               #:when (call-with-temp-dir
                       "fcgi-fuzz1"
                       (λ (dir)
                         (call-with-fuzz-server
                          dir
                          (λ (fs) (pair? (append (run-batch fs (list in)) (check-server fs))))))))
      in))
  (for/list ([in (in-list (if (null? culprits) inputs culprits))])
    (save-crash! (format "seed-~a-batch-~a-input-~a" seed batch (car in)) (cdr in))))

;; fuzz : #:seconds real #:seed natural #:connections natural #:log (string -> any)
;;        -> (values natural natural (listof string))
;; Batches until seconds have passed or a batch fails; returns the number of inputs sent
;; (one connection each), the END_REQUEST records they got, and the problems (empty when
;; none). Failing inputs are saved under crashes/.
(define (fuzz #:seconds secs #:seed seed #:connections [per-batch 64] #:log [log void])
  (define deadline (+ (current-inexact-milliseconds) (* 1000 secs)))
  (define answered (box 0))
  (call-with-temp-dir
   "fcgi-fuzz"
   (λ (dir)
     (call-with-fuzz-server
      dir
      (λ (fs)
        (let loop ([batch 0] [sent 0])
          (cond
            [(>= (current-inexact-milliseconds) deadline) (values sent (unbox answered) '())]
            [else
             (define inputs
               (for/list ([i (in-range per-batch)])
                 (define s (input-seed seed batch i))
                 (cons s (generate-input s))))
             (define problems (append (run-batch fs inputs answered) (check-server fs)))
             (log (format "batch ~a: ~a inputs, ~a bytes, VmRSS ~a kB~a" batch per-batch
                          (for/sum ([in (in-list inputs)]) (bytes-length (cdr in)))
                          (status-memory-kb (proc-pid (fuzz-server-proc fs)) 'VmRSS)
                          (if (null? problems) "" (format ": ~a" problems))))
             (cond
               [(null? problems) (loop (add1 batch) (+ sent per-batch))]
               [else
                (define saved (isolate! inputs seed batch))
                (values (+ sent per-batch) (unbox answered)
                        (append problems (map (λ (f) (format "saved ~a" f)) saved)))])])))))))

(module+ main
  (require racket/cmdline)
  (define seconds 60)
  (define seed (current-seconds))
  (command-line
   #:once-each
   [("--seconds") s "how long to fuzz (default 60)" (set! seconds (string->number s))]
   [("--seed") s "the seed (default: the time)" (set! seed (string->number s))])
  (printf "fuzzing for ~a s with seed ~a\n" seconds seed)
  (define-values (sent answered problems)
    (fuzz #:seconds seconds #:seed seed #:log (λ (line) (printf "~a\n" line) (flush-output))))
  (printf "~a inputs (connections), ~a END_REQUEST records back, ~a problems\n"
          sent answered (length problems))
  (for ([p (in-list problems)]) (printf "  ~a\n" p))
  (exit (if (null? problems) 0 1)))

(module+ test
  (require rackunit)
  (test-case "inputs are a function of their seed"
    (for ([s (in-range 1 200)])
      (check-equal? (generate-input s) (generate-input s))))
  (test-case "an empty record (left by a cut) can be mutated: seed 279243812 of CI's run"
    (for ([s (in-range 1 50)])
      (check-true (positive? (bytes-length (with-seed s (λ () (mutate-record #"")))))))
    (check-true (bytes? (generate-input 279243812))))
  (test-case "unmutated inputs are whole record streams"
    (for ([s (in-range 1 200)])
      (define recs (with-seed s generate-records))
      (define d (make-decoder))
      (decoder-feed! d (apply bytes-append recs))
      (check-equal? (let loop ([n 0]) (if (decoder-next! d) (loop (add1 n)) n)) (length recs))
      (check-equal? (decoder-buffered d) 0)))
  (test-case "log lines: only escaped warnings pass"
    (check-true (regexp-match? good-log-line #"2026-01-02T03:04:05 warning protocol error from unix: x"))
    (check-false (regexp-match? good-log-line #"2026-01-02T03:04:05 error handler raised: boom"))
    (check-false (regexp-match? good-log-line #"2026-01-02T03:04:05 warning a\ebad"))
    (check-false (regexp-match? good-log-line #"context...:")))
  (test-case "answer-problem accepts whole answers and rejects partial ones"
    (define good (bytes-append (record->bytes 'stdout 1 #"x") (record->bytes 'end-request 1 (make-bytes 8 0))))
    (check-false (answer-problem good))
    (check-regexp-match #rx"partial" (answer-problem (subbytes good 0 10)))
    (check-regexp-match #rx"type" (answer-problem (record->bytes 'params 1 #"")))))
