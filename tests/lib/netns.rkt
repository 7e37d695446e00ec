#lang racket/base
;; Machines made as network namespaces, for the cluster tests
;; (tests/integration/cluster-test.rkt and cluster-servlet-test.rkt).
(require rackunit
         "../integration/lib.rkt")
(provide make-bridge-network!
         check-root-isolated)

;; make-bridge-network! : #:ip! (string ... -> void) #:ns (string -> string) #:subnet string
;;                        #:hosts (listof string) #:host-address (string -> string) -> void
;; The namespace (ns "lb") holds bridge br0 at SUBNET.1; each host's veth is created in lb
;; with its peer, eth0 at (host-address host), in the host's namespace, so no interface of
;; the test's ever exists in the root namespace. ip! runs ip with its arguments.
(define (make-bridge-network! #:ip! ip! #:ns ns #:subnet subnet #:hosts hosts
                              #:host-address host-address)
  (for ([n (in-list (cons "lb" hosts))])
    (ip! "netns" "add" (ns n))
    (ip! "-n" (ns n) "link" "set" "lo" "up"))
  (ip! "-n" (ns "lb") "link" "add" "br0" "type" "bridge")
  (ip! "-n" (ns "lb") "addr" "add" (string-append subnet ".1/24") "dev" "br0")
  (ip! "-n" (ns "lb") "link" "set" "br0" "up")
  (for ([h (in-list hosts)])
    (define lb-end (string-append "b" h))
    (ip! "-n" (ns "lb") "link" "add" lb-end "type" "veth" "peer" "name" "eth0" "netns" (ns h))
    (ip! "-n" (ns "lb") "link" "set" lb-end "master" "br0")
    (ip! "-n" (ns "lb") "link" "set" lb-end "up")
    (ip! "-n" (ns h) "addr" "add" (string-append (host-address h) "/24") "dev" "eth0")
    (ip! "-n" (ns h) "link" "set" "eth0" "up")))

;; check-root-isolated : path string -> void
;; The root namespace has no route into SUBNET.0/24 and no address in it (ip: ip's path).
(define (check-root-isolated ip subnet)
  (define-values (c o e) (run-program ip (list "route" "show" (string-append subnet ".0/24"))))
  (check-equal? o #"")
  (define-values (c2 o2 e2) (run-program ip (list "-4" "addr" "show")))
  (check-false (regexp-match? (regexp (regexp-quote (string-append subnet "."))) o2)))
