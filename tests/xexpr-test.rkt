#lang racket/base
;; xexpr.rkt writes what the `xml` collection's xexpr->string writes, for the kinds of
;; x-expression the status page uses.
(require (prefix-in x: xml)
         rackunit
         "../fastcgi/private/util/xexpr.rkt")

(test-case "the same text as xml's xexpr->string"
  (for ([x (in-list
            `((p "a < b & c > d \"q\"")
              (a ([href "?json&x=\"1\""] [class "c<>"]) "JSON")
              (br) (p) (img ([src "x"]))
              (td ([style "width: 3px"]))
              (html (head (title "pool") (style "td { text-align: right }"))
                    (body (h1 "status " nbsp 169 "é😀")
                          (table (tr (th "pid") (td "12")) (tr (td ([colspan "2"]) "x")))))
              "plain & <text>"))])
    (check-equal? (xexpr->string x) (x:xexpr->string x) (format "~s" x))))

(test-case "what is not an x-expression is refused"
  (check-exn exn:fail:contract? (λ () (xexpr->string (vector 1)))))
