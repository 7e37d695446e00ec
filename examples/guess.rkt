#lang racket/base
;; A guessing game written with continuations, as web-server's servlets are: the game is
;; one loop that asks for a guess with send/suspend and carries its state (the secret and
;; the guesses so far) in ordinary variables. Every page's form posts to the continuation
;; of that moment, so the Back button and a second tab each go on from the page they show.
;;
;;   raco fastcgi serve examples/guess.rkt --listen unix:/tmp/guess.sock --workers 2
;;
;; The continuations live in the worker that made them; the server passes a request for
;; them to that worker, whichever worker the front reached (manual: Continuations).
(require racket/list
         web-server/servlet)
(provide start)

;; start : request -> response ; a new game for each visit of the start page
(define (start req)
  (play (add1 (random 100)) '()))

;; play : natural (listof natural) -> response
;; guesses: the guesses so far, latest first.
(define (play secret guesses)
  (define req (send/suspend (λ (k-url) (ask-page k-url guesses (hint secret guesses)))))
  (define guess (read-guess req))
  (cond
    [(not guess) (play secret guesses)]
    [(= guess secret) (won-page secret (add1 (length guesses)))]
    [else (play secret (cons guess guesses))]))

;; read-guess : request -> (or/c natural #f) ; the form's `guess`, a whole number 1-100
(define (read-guess req)
  (define b (assq 'guess (request-bindings req)))
  (define n (and b (string->number (cdr b))))
  (and (exact-integer? n) (<= 1 n 100) n))

;; hint : natural (listof natural) -> string
(define (hint secret guesses)
  (cond
    [(null? guesses) "I am thinking of a number from 1 to 100."]
    [(< (first guesses) secret) (format "~a is too small." (first guesses))]
    [else (format "~a is too large." (first guesses))]))

;; ask-page : string (listof natural) string -> response
(define (ask-page k-url guesses message)
  (response/xexpr
   `(html (head (title "Guess the number"))
          (body (h1 "Guess the number")
                (p ([class "hint"]) ,message)
                (form ([method "post"] [action ,k-url])
                      (input ([name "guess"] [type "number"] [min "1"] [max "100"] [autofocus "autofocus"]))
                      (input ([type "submit"] [value "Guess"])))
                (p ,(format "Guesses so far: ~a" (length guesses)))))))

;; won-page : natural natural -> response
(define (won-page secret tries)
  (response/xexpr
   `(html (head (title "You got it"))
          (body (h1 "You got it")
                (p ([class "won"]) ,(format "It was ~a; you found it in ~a guesses." secret tries))
                (p (a ([href "/"]) "Play again"))))))
