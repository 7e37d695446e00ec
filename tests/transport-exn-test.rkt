#lang racket/base
;; fastcgi/private/transport/transport-exn.rkt: the transport layer's exception and the helpers
;; that raise it: the message's "fastcgi: " prefix, errno's text, and check-syscall's
;; clean-up before the raise.
(require ffi/unsafe
         rackunit
         "../fastcgi/private/transport/transport-exn.rkt")

(test-case "raise-transport: an exn:fail:fastcgi:transport, \"fastcgi: \" and the formatted text"
  (define e (with-handlers ([values values]) (raise-transport "cannot ~a ~s" "bind" "x")))
  (check-pred exn:fail:fastcgi:transport? e)
  (check-pred exn:fail? e)
  (check-equal? (exn-message e) "fastcgi: cannot bind \"x\""))

(test-case "raise-errno: what failed, then errno's message and number"
  (check-exn (λ (e) (and (exn:fail:fastcgi:transport? e)
                         (regexp-match? #rx"^fastcgi: cannot open x: No such file or directory \\(errno 2\\)$"
                                        (exn-message e))))
             (λ () (raise-errno "cannot open x" 2))))

(test-case "check-syscall: nothing for a result >= 0; else the clean-up, then the saved errno"
  (define cleaned 0)
  (define (clean-up) (set! cleaned (add1 cleaned)))
  (check-equal? (check-syscall 0 "ok" clean-up) (void))
  (check-equal? (check-syscall 7 "ok" clean-up) (void))
  (check-equal? cleaned 0 "no clean-up on success")
  (saved-errno 13)
  (check-exn (λ (e) (and (exn:fail:fastcgi:transport? e)
                         (regexp-match? #rx"^fastcgi: bind: Permission denied \\(errno 13\\)$" (exn-message e))))
             (λ () (check-syscall -1 "bind" clean-up)))
  (check-equal? cleaned 1 "cleaned up once, before the raise")
  (saved-errno 2)
  (check-exn #rx"errno 2" (λ () (check-syscall -1 "open"))))
