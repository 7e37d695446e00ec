#lang racket/base
;; fastcgi/private/util/catch.rkt: catching and catch-all against with-handlers, on a table of
;; bodies: the body's value, what the predicate takes, what goes on to the enclosing
;; handler, and raised values that are not exceptions.
(require rackunit
         "../fastcgi/private/util/catch.rkt")

;; outcome : (-> any) -> any ; the thunk's value, or (list 'outer v) for what got past it
(define (outcome thunk)
  (with-handlers ([(λ (e) #t) (λ (e) (list 'outer (if (exn? e) (exn-message e) e)))])
    (thunk)))

(test-case "catching: as (with-handlers ([pred on-caught]) body ...) on each row"
  ;; name, body, predicate, expected (the same for with-handlers)
  (define rows
    (list (list "a value" (λ () 42) exn:fail? 42)
          (list "the last of several expressions" (λ () (void) 'last) exn:fail? 'last)
          (list "an exn:fail the predicate takes" (λ () (error 'x "boom")) exn:fail? '(caught "x: boom"))
          (list "one it does not take" (λ () (raise 'sym)) exn:fail? '(outer sym))
          (list "a non-exception it takes" (λ () (raise 7)) number? '(caught 7))
          (list "a break is not an exn:fail" (λ () (raise (let/ec k (make-exn:break "b" (current-continuation-marks) k))))
                exn:fail? '(outer "b"))))
  (define (on-caught e) (list 'caught (if (exn? e) (exn-message e) e)))
  (for ([row (in-list rows)])
    (define-values (name body pred want) (apply values row))
    (check-equal? (outcome (λ () (catching pred on-caught (body)))) want name)
    (check-equal? (outcome (λ () (with-handlers ([pred on-caught]) (body)))) want
                  (format "~a (with-handlers)" name))))

(test-case "catch-all: anything raised, exceptions or not; the body's value otherwise"
  (check-equal? (catch-all (λ (e) (list 'got e)) (raise 'anything)) '(got anything))
  (check-equal? (catch-all (λ (e) 'got) (error 'x "y")) 'got)
  (check-equal? (catch-all (λ (e) 'got) 1 2 3) 3))

(test-case "catching: on-caught runs outside the body's handler, so what it raises goes on"
  (check-equal? (outcome (λ () (catching exn:fail? (λ (e) (error 'again "twice")) (error 'x "once"))))
                '(outer "again: twice")))

(test-case "catching: a handler inside the body still sees what is raised first"
  (check-equal? (catching exn:fail? (λ (e) 'outer-caught)
                  (with-handlers ([exn:fail? (λ (e) 'inner)]) (error 'x "y")))
                'inner))
