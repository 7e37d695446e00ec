#lang racket/base
;; A JSON API over an in-memory store of items:
;;   GET  /api/items        -> 200 {"items": [...]}
;;   POST /api/items        <- {"name": string, "qty": natural}  -> 201 the item, with its id
;;   GET  /api/items/ID     -> 200 the item, or 404
;; A body that is not JSON is a 400; JSON of the wrong shape is a 422. Errors are JSON too.
;;   raco fastcgi serve examples/json-api.rkt --listen unix:/tmp/api.sock
(require json
         web-server/dispatch
         web-server/http)
(provide start)

(define items (make-hasheqv))   ; id -> item (a hasheq)
(define next-id 1)
(define items-lock (make-semaphore 1))

;; json-error : natural string -> response
(define (json-error code message)
  (response/jsexpr (hasheq 'error message) #:code code))

;; parse-body : bytes -> (or/c jsexpr #f) ; #f unless the body is exactly one JSON value
(define (parse-body body)
  (with-handlers ([exn:fail:read? (λ (e) #f)])
    (define in (open-input-bytes body))
    (define v (read-json in))
    (and (not (eof-object? v))
         (eof-object? (peek-char (skip-whitespace in)))
         v)))

;; skip-whitespace : input-port -> input-port
(define (skip-whitespace in)
  (regexp-match #px"^\\s*" in)
  in)

;; item-shape? : jsexpr -> boolean
(define (item-shape? v)
  (and (hash? v)
       (string? (hash-ref v 'name #f))
       (< 0 (string-length (hash-ref v 'name)) 101)
       (exact-nonnegative-integer? (hash-ref v 'qty #f))))

;; list-items : request -> response
(define (list-items req)
  (define all (call-with-semaphore items-lock (λ () (hash-values items))))
  (response/jsexpr
   (hasheq 'items (sort all < #:key (λ (i) (hash-ref i 'id))))))

;; create-item : request -> response ; 201, 400 or 422
(define (create-item req)
  (define v (parse-body (or (request-post-data/raw req) #"")))
  (cond
    [(not v) (json-error 400 "the body is not valid JSON")]
    [(not (item-shape? v)) (json-error 422 "expected {\"name\": string (1-100 characters), \"qty\": natural}")]
    [else
     (define item
       (call-with-semaphore
        items-lock
        (λ ()
          (define i (hasheq 'id next-id 'name (hash-ref v 'name) 'qty (hash-ref v 'qty)))
          (hash-set! items next-id i)
          (set! next-id (add1 next-id))
          i)))
     (response/jsexpr item #:code 201
                      #:headers (list (header #"Location"
                                              (string->bytes/utf-8
                                               (format "/api/items/~a" (hash-ref item 'id))))))]))

;; get-item : request natural -> response
(define (get-item req id)
  (define item (call-with-semaphore items-lock (λ () (hash-ref items id #f))))
  (if item
      (response/jsexpr item)
      (json-error 404 (format "no item ~a" id))))

;; not-found : request -> response
(define (not-found req) (json-error 404 "no such resource"))

(define-values (start url-for)
  (dispatch-rules
   [("api" "items") #:method "get" list-items]
   [("api" "items") #:method "post" create-item]
   [("api" "items" (integer-arg)) #:method "get" get-item]
   [else not-found]))
