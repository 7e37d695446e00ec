#lang racket/base
;; A listener's settings, with their defaults stated here and nowhere else: the command
;; line, the manager, the workers and serve/fastcgi all take them from this module.
(provide listener-options?
         listener-options-backlog
         listener-options-socket-mode
         listener-options-socket-owner
         listener-options-socket-group
         default-listener-options
         make-listener-options)

;; backlog: the listen backlog (of a unix or TCP socket the process opens itself);
;; socket-mode: the mode of a unix socket file; socket-owner, socket-group: its owner and
;; group (a name or a number), #f to leave them as the file was created.
(struct listener-options (backlog socket-mode socket-owner socket-group) #:transparent)

;; make-listener-options : #:backlog #:socket-mode #:socket-owner #:socket-group
;;                         -> listener-options
(define (make-listener-options #:backlog [backlog 1024]
                               #:socket-mode [mode #o660]
                               #:socket-owner [owner #f]
                               #:socket-group [group #f])
  ;; checked here, not by a contract: racket/contract would load into every process for it
  (define (check! ok? what v) (unless ok? (raise-argument-error 'make-listener-options what v)))
  (check! (exact-positive-integer? backlog) "#:backlog exact-positive-integer?" backlog)
  (check! (and (exact-integer? mode) (<= 0 mode #o7777)) "#:socket-mode (integer-in 0 #o7777)" mode)
  (check! (user-or-group? owner) "#:socket-owner (or/c #f string? exact-nonnegative-integer?)" owner)
  (check! (user-or-group? group) "#:socket-group (or/c #f string? exact-nonnegative-integer?)" group)
  (listener-options backlog mode owner group))

(define (user-or-group? v) (or (not v) (string? v) (exact-nonnegative-integer? v)))

(define default-listener-options (make-listener-options))
