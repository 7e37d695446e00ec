#lang racket/base
;; An x-expression as HTML text, for the status page: what the `xml` collection's
;; xexpr->string writes for the x-expressions the page uses (elements with or without
;; attributes, strings, entity symbols, character numbers). Not `xml` itself, which loads
;; racket/contract into the worker that answers the page (jsexpr.rkt says why that matters).
(provide xexpr->string)

;; xexpr->string : xexpr -> string
(define (xexpr->string x)
  (define out (open-output-string))
  (write-xexpr x out)
  (get-output-string out))

(define (write-xexpr x out)
  (cond
    [(string? x) (write-string (escape x #f) out)]
    [(symbol? x) (write-string (string-append "&" (symbol->string x) ";") out)]
    [(exact-nonnegative-integer? x) (write-string (format "&#~a;" x) out)]
    [(and (pair? x) (symbol? (car x)))
     (define tag (symbol->string (car x)))
     (define-values (attrs body)
       (if (and (pair? (cdr x)) (attributes? (cadr x))) (values (cadr x) (cddr x)) (values '() (cdr x))))
     (write-string (string-append "<" tag) out)
     (for ([a (in-list attrs)])
       (write-string (string-append " " (symbol->string (car a)) "=\"" (escape (cadr a) #t) "\"") out))
     (cond
       [(and (null? body) (memq (car x) empty-tags)) (write-string "/>" out)]
       [else
        (write-string ">" out)
        (for ([c (in-list body)]) (write-xexpr c out))
        (write-string (string-append "</" tag ">") out)])]
    [else (raise-argument-error 'xexpr->string "xexpr?" x)]))

;; the elements written short when empty (xml's html-empty-tags)
(define empty-tags '(param meta link isindex input img hr frame col br basefont base area))

;; attributes? : any -> boolean ; ((name "value") ...)
(define (attributes? v)
  (and (list? v)
       (for/and ([a (in-list v)])
         (and (list? a) (= 2 (length a)) (symbol? (car a)) (string? (cadr a))))))

;; escape : string boolean -> string ; & < > always, " too in an attribute value
(define (escape s attr?)
  (regexp-replace* (if attr? #rx"[&<>\"]" #rx"[&<>]") s
                   (λ (c) (case c [("&") "&amp;"] [("<") "&lt;"] [(">") "&gt;"] [else "&quot;"]))))
