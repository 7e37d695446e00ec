#lang racket/base
;; The lines between the manager and the processes of its pool, each written once here:
;; its verb, who sends it, its fields by name and type. Both ends print and parse from
;; this table (as the FastCGI records are made and read from protocol-records.rkt's), and
;; tests/lines-test.rkt holds the exact lines. One line each, ASCII, ended by a linefeed.
;;
;; The channels (who writes to whom):
;;   greeting  the first line of a process on the manager's control socket: a worker's
;;             hello, a generation's loader's, the base's, or an ask: a status-path
;;             worker's for the board, `ctl stacks`'s or a status-path worker's for the
;;             running requests' stacks (each answered with one line of JSON, then closed:
;;             control.rkt, manager-stacks.rkt)
;;   worker    a worker's reports to the manager, after its hello
;;   loader    a loader's or the base's reports, and their answers to fork lines
;;   manager   the manager's lines to a worker or a loader: the keys first (control.rkt)
;;
;; Field types: nat (a natural number), int (an integer: -1 is a failed fork), hex (bytes
;; as hexadecimal), (word SYMBOL ...) (one of those words), text (the rest of the line:
;; the sender escapes it to plain ASCII, log-escape), nats (the rest of the line: naturals).
;; A message marked named writes its fields as NAME=VALUE, so that either end may know
;; more of them than the other (a worker of a newer install, started at a reload): unknown
;; names are passed over, missing ones are absent from what parse-line gives.
(require racket/string
         file/sha1)
(provide message-line
         parse-line
         line-spec-names
         channel-specs
         message-forms)

;; spec: verb (symbol), fields: (listof (list name type)), named?: fields as NAME=VALUE
(struct spec (verb fields named?))

(define (msg verb #:named? [named? #f] . fields) (spec verb fields named?))

(define channels
  (hasheq
   'greeting
   (list (msg 'hello '(pid nat))
         (msg 'loader '(pid nat))
         (msg 'base '(pid nat))
         (msg 'board)
         (msg 'stacks)
         (msg 'reload '(canary-ms nat)))           ; ctl reload --canary: a reload with a trial
   'worker
   (list (msg 'ready)
         ;; the counters, when they change; oldest-age-ms: the oldest running request's
         ;; age (0: none), since the two ends' clocks differ
         (msg 'stat #:named? #t
              '(requests nat) '(active nat) '(connections nat) '(slow nat) '(shed nat)
              '(queue-delay nat) '(sessions nat) '(log-dropped nat) '(oldest-age-ms nat))
         (msg 'metrics '(counts nats))             ; metrics.rkt's metrics->counts
         (msg 'limit '(max-requests nat))          ; before ready: the limit it drew
         (msg 'recycle '(why text))                ; once: it wants to be replaced
         (msg 'failed '(why text))                 ; instead of ready; then it exits 3
         (msg 'beat)                               ; every second once ready
         (msg 'stacks '(query nat) '(json text)))  ; answers stacks QUERY: its running requests
   'loader
   (list (msg 'refused '(why text))                ; this Racket cannot fork as expected
         (msg 'unsafe '(what text))                ; loading left what a fork cannot share
         (msg 'forced '(what text))                ; the same, forking all the same (--preload)
         (msg 'failed '(why text))                 ; the app does not load
         (msg 'loaded '(kind (word raw servlet)) '(image nat))
         (msg 'ready '(image nat))                 ; the base, its heap static
         (msg 'forked '(id nat) '(pid int))        ; answers fork ID (pid -1: it failed)
         (msg 'forked-loader '(gen nat) '(pid int))) ; answers loader GEN
   'manager
   (list (msg 'keys '(secret hex) '(relay-key hex))
         (msg 'retire '(successors nats))          ; the worker ids its connections go to
         (msg 'fork '(id nat))                     ; to a loader: fork worker ID
         (msg 'loader '(gen nat))                  ; to the base: fork generation GEN's loader
         (msg 'stacks '(query nat)))))             ; to a worker: its running requests' stacks

;; channel-specs : symbol -> (listof symbol) ; a channel's verbs
(define (channel-specs channel) (map spec-verb (hash-ref channels channel)))

;; message-forms : symbol -> (listof string)
;; A channel's messages as the manual shows them: "stat requests=N ...", "loaded
;; raw|servlet IMAGE", "retire SUCCESSORS...".
(define (message-forms channel)
  (for/list ([s (in-list (hash-ref channels channel))])
    (string-join
     (cons (symbol->string (spec-verb s))
           (for/list ([f (in-list (spec-fields s))])
             (define name (string-upcase (symbol->string (car f))))
             (define type (cadr f))
             (define v (cond [(memq type '(text nats)) (string-append name "...")]
                             [(pair? type) (string-join (map symbol->string (cdr type)) "|")]
                             [else name]))
             (if (spec-named? s) (format "~a=~a" (car f) (if (pair? type) v "N")) v)))
     " ")))

;; line-spec-names : symbol symbol -> (listof symbol) ; a message's field names
(define (line-spec-names channel verb) (map car (spec-fields (find-spec channel verb))))

(define (find-spec channel verb)
  (or (for/first ([s (in-list (hash-ref channels channel
                                         (λ () (raise-argument-error 'message-line "channel" channel))))]
                  #:when (eq? (spec-verb s) verb))
        s)
      (raise-arguments-error 'message-line "no such message" "channel" channel "verb" verb)))

;; message-line : symbol symbol #:NAME value ... -> string
;; The line (without its linefeed) of the message verb of channel, its fields given by
;; name, each as its type says: every field, and no other.
(define message-line
  (make-keyword-procedure
   (λ (kws vals channel verb)
     (define s (find-spec channel verb))
     (define given (for/hasheq ([k (in-list kws)] [v (in-list vals)])
                     (values (string->symbol (keyword->string k)) v)))
     (define names (map car (spec-fields s)))
     (unless (and (= (hash-count given) (length names)) (andmap (λ (n) (hash-has-key? given n)) names))
       (raise-arguments-error 'message-line "the fields are not the message's"
                              "message" verb "expected" names "given" (hash-keys given)))
     (string-join
      (cons (symbol->string verb)
            (for*/list ([f (in-list (spec-fields s))]
                        [w (in-list (field->words verb (car f) (cadr f) (hash-ref given (car f))))])
              (if (spec-named? s) (format "~a=~a" (car f) w) w)))
      " "))))

;; field->words : symbol symbol type any -> (listof string)
(define (field->words verb name type v)
  (define (bad) (raise-arguments-error 'message-line "a field's value is not of its type"
                                       "message" verb "field" name "type" type "value" v))
  (cond
    [(eq? type 'nat) (if (exact-nonnegative-integer? v) (list (number->string v)) (bad))]
    [(eq? type 'int) (if (exact-integer? v) (list (number->string v)) (bad))]
    [(eq? type 'hex) (if (bytes? v) (list (bytes->hex-string v)) (bad))]
    [(eq? type 'text) (if (and (string? v) (not (regexp-match? #rx"[\r\n]" v))) (list v) (bad))]
    [(eq? type 'nats) (if (and (list? v) (andmap exact-nonnegative-integer? v)) (map number->string v) (bad))]
    [(and (pair? type) (eq? (car type) 'word))
     (if (memq v (cdr type)) (list (symbol->string v)) (bad))]
    [else (bad)]))

;; parse-line : symbol string -> (or/c (cons symbol (hash/c symbol any)) #f)
;; The message of channel that line is, as its verb and its fields by name; #f when it is
;; none of the channel's, or its fields are not as the message says.
(define (parse-line channel line)
  (define r (regexp-match #px"^([a-z-]+)(?: (.*))?$" line))
  (define s (and r (for/first ([s (in-list (hash-ref channels channel))]
                               #:when (string=? (symbol->string (spec-verb s)) (cadr r)))
                     s)))
  (define rest (and r (caddr r)))
  (define fields
    (cond
      [(not s) #f]
      [(spec-named? s) (parse-named (spec-fields s) (if rest (string-split rest " " #:trim? #f) '()))]
      [else (parse-positional (spec-fields s) rest)]))
  (and fields (cons (spec-verb s) fields)))

;; parse-positional : (listof field) (or/c string #f) -> (or/c hash #f)
(define (parse-positional fields rest)
  (let loop ([fields fields] [rest rest] [acc (hasheq)])
    (cond
      [(null? fields) (and (not rest) acc)]
      [else
       (define type (cadr (car fields)))
       (define name (car (car fields)))
       (cond
         [(memq type '(text nats))        ; the rest of the line
          (define v (parse-value type (or rest "")))
          (and (not (void? v)) (null? (cdr fields)) (hash-set acc name v))]
         [else
          (define r (and rest (regexp-match #px"^([^ ]*)(?: (.*))?$" rest)))
          (define v (if r (parse-value type (cadr r)) (void)))
          (and (not (void? v)) (loop (cdr fields) (caddr r) (hash-set acc name v)))])])))

;; parse-named : (listof field) (listof string) -> (or/c hash #f)
(define (parse-named fields words)
  (let loop ([words words] [acc (hasheq)])
    (cond
      [(null? words) acc]
      [else
       (define r (regexp-match #px"^([a-z-]+)=(.*)$" (car words)))
       (define f (and r (assq (string->symbol (cadr r)) fields)))
       (cond
         [(not r) #f]
         [(not f) (loop (cdr words) acc)]          ; a field this end does not know
         [else
          (define v (parse-value (cadr f) (caddr r)))
          (and (not (void? v)) (loop (cdr words) (hash-set acc (car f) v)))])])))

;; parse-value : type string -> any ; (void) when s is not of the type
(define (parse-value type s)
  (cond
    [(eq? type 'nat) (if (regexp-match? #px"^[0-9]{1,18}$" s) (string->number s) (void))]
    [(eq? type 'int) (if (regexp-match? #px"^-?[0-9]{1,18}$" s) (string->number s) (void))]
    [(eq? type 'hex) (if (regexp-match? #px"^(?:[0-9a-f]{2})*$" s) (hex-string->bytes s) (void))]
    [(eq? type 'text) s]
    [(eq? type 'nats)
     (define ws (if (string=? s "") '() (string-split s " " #:trim? #f)))
     (if (andmap (λ (w) (regexp-match? #px"^[0-9]{1,18}$" w)) ws) (map string->number ws) (void))]
    [(and (pair? type) (eq? (car type) 'word))
     (define w (string->symbol s))
     (if (memq w (cdr type)) w (void))]
    [else (void)]))
