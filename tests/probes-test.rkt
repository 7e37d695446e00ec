#lang racket/base
;; What the server takes from Racket and web-server without their documentation is checked
;; once, at load (util/probes.rkt, and each module that relies on such a thing). On this
;; Racket every probe holds: no line, and the unchecked or fast way is the one in use.
;; Each assumption broken on purpose (a constructor of another arity or field order, an
;; accessor that answers otherwise, a reader that reads wrongly, a primitive that makes
;; something else, code that sends other bytes or does not compile, an extra or a foreign
;; epoll set or pipe among the runtime's descriptors) gives its one line, naming the Racket
;; version, and the fallback. The manager's side of a loader's refusal is in
;; manager-reports-test.
(require ffi/unsafe
         ffi/unsafe/vm
         racket/list
         racket/port
         racket/promise
         racket/runtime-path
         racket/system
         net/url-string
         rackunit
         web-server/safety-limits
         web-server/http/request-structs
         web-server/http/response-structs
         (only-in web-server/http/request make-read-request parse-bindings)
         (prefix-in private: (only-in (submod web-server/http/request-structs private)
                                      make-request make-header request-uri binding:form
                                      header-value headers-assq*))
         (prefix-in private: (only-in (submod web-server/http/response-structs private)
                                      response-output))
         (only-in '#%paramz parameterization-key)
         "../fastcgi/private/util/log.rkt"
         "../fastcgi/private/util/probes.rkt"
         "../fastcgi/private/util/fast-bytes.rkt"
         "../fastcgi/private/os/ffi.rkt"
         "../fastcgi/private/os/fork.rkt"
         "../fastcgi/private/os/runtime-fds.rkt"
         "../fastcgi/private/servlet/web-private.rkt"
         "../fastcgi/private/servlet/web-form.rkt"
         "../fastcgi/private/manager/manager-gc.rkt"
         "../fastcgi/private/dev/dev-static.rkt")

(define V (version))
(define-runtime-path probes-module "../fastcgi/private/util/probes.rkt")
(define-runtime-path logging-module "../fastcgi/private/os/logging.rkt")

;; lines-of : (-> any) -> (values any (listof string)) ; the fastcgi warnings it logged
(define (lines-of thunk)
  (define receiver (make-log-receiver fastcgi-logger 'warning 'fastcgi))
  (define result (thunk))
  (values result
          (let loop ()
            (define v (sync/timeout 0 receiver))
            (if v (cons (vector-ref v 1) (loop)) '()))))

;; line : string ... -> string ; the line a failed probe logs
(define (line . parts) (apply string-append "fastcgi: Racket " V ": " parts))

;; First, while no receiver takes the warnings: every probe of the modules above held.
(test-case "at load, on this Racket: no probe failed, so no line is waiting"
  (check-equal? (take-pending-probe-lines!) '()))

(test-case "a failed probe while nobody listens: its line waits, and a process's logging prints it"
  (unless (log-level? fastcgi-logger 'warning 'fastcgi)
    (check-false (assumption-holds? "a thing" (λ () "it is broken") "the slow way"))
    (check-equal? (take-pending-probe-lines!) (list (string-append "Racket " V ": a thing: it is broken: the slow way")))
    (check-equal? (take-pending-probe-lines!) '() "taken once"))
  (define err (open-output-string))
  (parameterize ([current-error-port err] [current-output-port (open-output-nowhere)])
    (system* (find-executable-path "racket") "-e"
             (format "~s" `(begin (require (file ,(path->string probes-module))
                                           (file ,(path->string logging-module)))
                                  (assumption-holds? "a thing" (λ () "it is broken") "the slow way")
                                  (start-stderr-logging! 'info)
                                  (flush-logging)))))
  (check-regexp-match (regexp (string-append "warning fastcgi: Racket " (regexp-quote V) ": a thing: it is broken: the slow way\n$"))
                      (get-output-string err)))

;; ---------------------------------------------------------------------------------------
;; probes.rkt

(test-case "probe-line, arity-probe, reads-back-probe; a probe that raises fails; a required one raises"
  (check-equal? (probe-line "what" "why" "then") (string-append "Racket " V ": what: why: then"))
  (check-true (arity-probe (λ (a b) a) 2))
  (check-equal? (arity-probe (λ (a b c) a) 2) "takes 3 arguments, expected 2")
  (check-equal? (arity-probe (case-lambda [(a) a] [(a b) a]) 3) "takes 1 or 2 arguments, expected 3")
  (check-equal? (arity-probe (λ a a) 2) "takes at least 0 arguments, expected 2")
  (check-equal? (arity-probe 5 2) "is 5, not a procedure")
  (check-true (reads-back-probe cons '(1 2) (list car cdr)))
  (check-equal? (reads-back-probe (λ (a b) (cons b a)) '(1 2) (list car cdr))
                "its field 1 reads back as 2, expected 1")
  (define-values (held lines) (lines-of (λ () (assumption-holds? "a thing" (λ () (car '())) "the slow way"))))
  (check-false held)
  (check-equal? lines (list (line "a thing: its probe raised: car: contract violation: the slow way")))
  (check-exn (λ (e) (and (exn:fail:unsupported? e)
                         (equal? (exn-message e) (line "a thing: it is broken: no other way"))))
             (λ () (assumption-required! "a thing" (λ () "it is broken") "no other way"))))

;; ---------------------------------------------------------------------------------------
;; web-server's private submodules (servlet/web-private.rkt)

(test-case "on this web-server: the unchecked procedures are the private submodules' own"
  (check-eq? make-request/raw private:make-request)
  (check-eq? make-header/raw private:make-header)
  (check-eq? binding:form/raw private:binding:form)
  (check-eq? request-uri/raw private:request-uri)
  (check-eq? header-value/raw private:header-value)
  (check-eq? headers-assq*/raw private:headers-assq*)
  (check-eq? response-output/raw private:response-output)
  (check-eq? continuation-parameterization-key parameterization-key))

;; what a name of web-private.rkt is, applied or alone, where its check failed or held
(define failed #f)
(define held #t)
(define-checked after-failed failed car cdr)
(define-checked after-held held car cdr)

(test-case "a name whose check failed is the contracted procedure, applied or alone; one whose check held, the private one"
  (check-equal? (after-failed '(1 . 2)) 2)
  (check-eq? after-failed cdr)
  (check-equal? (after-held '(1 . 2)) 1)
  (check-eq? after-held car))

(define u (string->url "http://probe.example/p"))
(define request-args (list #"GET" u '() (delay '()) #f "192.0.2.1" 80 "192.0.2.2"))
(define request-readers (list request-method request-uri request-headers/raw
                              (λ (r) (force (request-bindings/raw-promise r)))
                              request-post-data/raw request-host-ip request-host-port request-client-ip))
(define request-expected (list #"GET" u '() '() #f "192.0.2.1" 80 "192.0.2.2"))
(struct fake9 (a b c d e f g h i))

(test-case "a private constructor of another arity, or that puts a field elsewhere: does not hold (the contracted one), one line"
  (define-values (c1 l1)
    (lines-of (λ () (constructor-holds? "request" fake9 make-request 8 request-args request-readers request-expected))))
  (check-false c1)
  (check-equal? l1 (list (line "web-server's unchecked request constructor: takes 9 arguments, expected 8: using the contracted one")))
  (define (swapped m u h b p host port client) (private:make-request m u h b p client port host))
  (define-values (c2 l2)
    (lines-of (λ () (constructor-holds? "request" swapped make-request 8 request-args request-readers request-expected))))
  (check-false c2)
  (check-equal? l2 (list (line "web-server's unchecked request constructor: its field 6 reads back as \"192.0.2.2\", expected \"192.0.2.1\": using the contracted one")))
  (define-values (c3 l3)
    (lines-of (λ () (constructor-holds? "request" private:make-request make-request 8 request-args request-readers request-expected))))
  (check-true c3 "the real one holds")
  (check-equal? l3 '()))

(test-case "a public struct of another number of fields: refused at load, naming the version"
  (check-exn (λ (e) (equal? (exn-message e)
                            (line "web-server's request struct: takes 9 arguments, expected 8: this fastcgi fills it by position and does not run on this web-server")))
             (λ () (constructor-holds? "request" private:make-request fake9 8 request-args request-readers request-expected))))

(test-case "a private accessor or function that answers otherwise: does not hold (the contracted one), one line"
  (define h (header #"A" #"b"))
  (define-values (c1 l1) (lines-of (λ () (same-holds? "header-value" header-field header-value (list (list h))))))
  (check-false c1)
  (check-equal? l1 (list (line "web-server's unchecked header-value: answers #\"A\" for (#(struct:header #\"A\" #\"b\")), where the contracted one answers #\"b\": using the contracted one")))
  (define resp (response 200 #"OK" 0 #f '() (λ (out) (write-bytes #"probe" out))))
  (define (other-output r) (λ (out) (write-bytes #"other" out)))
  (define-values (c2 l2)
    (lines-of (λ () (same-holds? "response-output" other-output response-output (list (list resp))
                                 (λ (o) (call-with-output-bytes o))))))
  (check-false c2)
  (check-equal? (length l2) 1)
  (check-regexp-match #rx"answers #\"other\" for .*, where the contracted one answers #\"probe\": using the contracted one$" (car l2))
  (define-values (c3 l3) (lines-of (λ () (same-holds? "headers-assq*" (λ (f hs) #f) headers-assq* (list (list #"a" (list h)))))))
  (check-false c3)
  (check-equal? (length l3) 1))

(test-case "parameterization-key: a key under which no parameterization is found fails its probe"
  (check-true (parameterization-key-probe parameterization-key))
  (check-equal? (parameterization-key-probe (make-continuation-mark-key))
                "its mark in a continuation is #f, not a parameterization"))

;; ---------------------------------------------------------------------------------------
;; web-server/http/request's readers (servlet/web-form.rkt)

(define (make-safety-limits*) (make-safety-limits))

(define multipart-body
  (bytes-append #"--B\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--B--\r\n"))

(test-case "form readers: the real ones read; a parse-bindings or make-read-request that reads wrongly: refused, one line"
  (define-values (ok? read-multipart) (form-readers parse-bindings make-read-request))
  (check-true ok?)
  (define parts (read-multipart (open-input-bytes multipart-body) #"B" (make-safety-limits*)))
  (check-equal? (map (λ (b) (cons (binding-id b) (binding:form-value b))) parts) '((#"x" . #"1")))
  (define (short-parse data) (drop-right (parse-bindings data) 1))
  (define-values (r l) (lines-of (λ () (call-with-values (λ () (form-readers short-parse make-read-request)) list))))
  (check-false (first r))
  (check-equal? l (list (line "web-server's parse-bindings (web-server/http/request): reads a probe form as ((#\"a\" #\"1\") (#\"b\" #\"x y\")), expected ((#\"a\" #\"1\") (#\"b\" #\"x y\") (#\"c\" #\"\")): application/x-www-form-urlencoded bodies are refused (400)")))
  (define (broken-reader #:safety-limits s) (λ (conn port addresses) (error 'read-request "no")))
  (define-values (r2 l2) (lines-of (λ () (call-with-values (λ () (form-readers parse-bindings broken-reader)) list))))
  (check-true (first r2))
  (check-equal? l2 (list (line "web-server's make-read-request (web-server/http/request) on a multipart body: its probe raised: read-request: no: multipart/form-data bodies are refused (400)")))
  (check-exn exn:fail:network? (λ () ((second r2) (open-input-bytes multipart-body) #"B" (make-safety-limits*)))))

;; ---------------------------------------------------------------------------------------
;; The runtime's descriptors (os/runtime-fds.rkt, os/fork.rkt)

(define c-epoll-create1 (get-ffi-obj "epoll_create1" #f (_fun _int -> _int)))
(define c-pipe2 (get-ffi-obj "pipe2" #f (_fun _bytes _int -> _int)))
(define c-close (get-ffi-obj "close" #f (_fun _int -> _int)))
(define c-dup (get-ffi-obj "dup" #f (_fun _int -> _int)))
(define c-read (get-ffi-obj "read" #f (_fun _int _bytes _size -> _ssize)))

;; a-pipe : -> (values fd fd) ; a non-blocking, close-on-exec pipe's read and write ends
(define (a-pipe)
  (define b (make-bytes 8))
  (c-pipe2 b #o2004000)
  (values (integer-bytes->integer b #t #f 0 4) (integer-bytes->integer b #t #f 4 8)))

(test-case "the runtime's epoll set and wake-up pipe: found, and the fork is not refused"
  (define found (runtime-descriptors-probe))
  (check-pred list? found (format "~a" found))
  (define links (open-descriptors))
  (check-equal? (cdr (assv (first found) links)) "anon_inode:[eventpoll]")
  (check-regexp-match #rx"^pipe:" (cdr (assv (second found) links)))
  (check-equal? (cdr (assv (second found) links)) (cdr (assv (third found) links)))
  (check-false (fork-refusal))
  (check-pred procedure? fork-child!))

(test-case "an extra epoll set or pipe, a foreign one in the runtime's place: each a reason, and the fork refused"
  (define rt (runtime-descriptors-probe))
  (define ep (c-epoll-create1 #o2000000))
  (define both (format "(~a, ~a)" (min ep (first rt)) (max ep (first rt))))
  (check-equal? (runtime-descriptors-probe) (format "2 epoll descriptors ~a, expected 1" both))
  (check-equal? (fork-refusal) (format "the runtime's epoll set and wake-up pipe: 2 epoll descriptors ~a, expected 1" both))
  (check-equal? (runtime-descriptors-probe (filter (λ (d) (not (= (car d) (first rt)))) (open-descriptors)))
                (format "the epoll descriptor ~a is not the one the runtime watches descriptors in" ep))
  (c-close ep)
  (define-values (r w) (a-pipe))
  (check-equal? (runtime-descriptors-probe)
                (format "2 pipes held at both ends (~a, ~a), expected 1 (the wake-up pipe)" (min r (second rt)) (max r (second rt))))
  (check-equal? (runtime-descriptors-probe (filter (λ (d) (not (memv (car d) (cdr rt)))) (open-descriptors)))
                (format "the pipe (~a, ~a) is not the runtime's wake-up pipe: a byte written to it stays unread" r w))
  (check-equal? (c-read r (make-bytes 1) 1) -1 "the probe's byte was read back: the pipe is as it was")
  (c-close r)
  (c-close w)
  (check-false (fork-refusal) "all closed: the fork is not refused"))

(test-case "two write ends of one pipe (standard output and error on one pipe) are not a pipe held at both ends"
  (define-values (r w) (a-pipe))
  (c-close r)
  (define w2 (c-dup w))
  (check-pred list? (runtime-descriptors-probe))
  (c-close w)
  (void (c-close w2)))

;; ---------------------------------------------------------------------------------------
;; Chez Scheme's insides (os/ffi.rkt, util/fast-bytes.rkt, manager/manager-gc.rkt)

(test-case "the zero-copy send: the real one holds; other bytes, or code that does not compile: none, one line"
  (check-pred procedure? c-sendrecs/fast)
  (check-true (sendrecs-probe c-sendrecs/fast))
  (define-values (s1 l1) (lines-of (λ () (checked-sendrecs (λ () (make-sendrecs '(fx+ (foreign-sizeof 'ptr) 2)))))))
  (check-false s1)
  (check-equal? l1 (list (line "the zero-copy send (sendmsg of $object-address addresses, vm-eval'd): the bytes received differ from the records' from byte 0 on: records are copied before they are sent")))
  (define-values (s2 l2) (lines-of (λ () (checked-sendrecs (λ () (vm-eval '(no-such-form 1)))))))
  (check-false s2)
  (check-equal? l2 (list (line "the zero-copy send (sendmsg of $object-address addresses, vm-eval'd): its Chez Scheme code does not compile: variable no-such-form is not bound: records are copied before they are sent"))))

(test-case "unfilled buffers and the range comparison: the real ones hold; others fall back to the plain ones, one line"
  (check-eq? make-unfilled-bytes (vm-primitive 'make-bytevector))
  (check-not-equal? (object-name bytes-range=?) 'portable-range=?)
  (define-values (m l) (lines-of (λ () (checked-unfilled make-vector))))
  (check-eq? m make-bytes)
  (check-equal? l (list (line "Chez Scheme's make-bytevector as a byte string: does not make a mutable byte string of the length asked: buffers are zeroed as they are made")))
  (define (first-four a i b j n) (or (< n 4) (bytes=? (subbytes a i (+ i 4)) (subbytes b j (+ j 4)))))
  (define-values (c l2) (lines-of (λ () (checked-range=? (λ () first-four)))))
  (check-equal? (object-name c) 'portable-range=?)
  (check-equal? l2 (list (line "the Chez Scheme comparison of byte ranges: answers #t for 12 bytes from 3, expected #f: ranges are compared a byte at a time"))))

(test-case "heap-reserve-ratio: a procedure that does not keep what is set: not set, one line"
  (define-values (set? l) (lines-of (λ () (manager-memory-setup! (case-lambda [() 1.0] [(x) (void)])))))
  (check-false set?)
  (check-equal? l (list (line "Chez Scheme's heap-reserve-ratio: reads 1.0 once set to 1.5: the manager keeps the runtime's reserve of freed memory")))
  (define-values (set2? l2) (lines-of (λ () (manager-memory-setup! #f))))
  (check-false set2?)
  (check-equal? l2 (list (line "Chez Scheme's heap-reserve-ratio: is #f, not a procedure of no argument or one: the manager keeps the runtime's reserve of freed memory")))
  (define ratio (vm-primitive 'heap-reserve-ratio))
  (define before (ratio))
  (check-true (manager-memory-setup!))
  (check-equal? (ratio) 0.1)
  (ratio before))

;; ---------------------------------------------------------------------------------------
;; The dev front's files (dev/dev-static.rkt)

(test-case "output-file of another arity, or a Range read otherwise: files go out whole, one line"
  (define-values (o1 l1) (lines-of (λ () (checked-file-output (λ (a b c d) (void)) (λ (hs) '((0 . 9)))))))
  (check-pred procedure? o1)
  (check-equal? l1 (list (line "web-server's output-file and read-range-header: output-file takes 4 arguments, expected 5: files are served whole, without ranges")))
  (define-values (o2 l2) (lines-of (λ () (checked-file-output (λ (a b c d e) (void)) (λ (hs) #f)))))
  (check-equal? l2 (list (line "web-server's output-file and read-range-header: read-range-header reads bytes=0-9 as #f: files are served whole, without ranges")))
  (define-values (o3 l3) (lines-of (λ () (checked-file-output (λ (a b c d e) (void)) (λ (hs) '((0 . 9)))))))
  (check-equal? l3 '()))
