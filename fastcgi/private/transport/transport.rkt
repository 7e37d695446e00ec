#lang racket/base
;; The transport layer, one module for its users: listeners (TCP host:port, unix socket
;; paths, inherited fds, private sockets) and the connected sockets they accept, and the
;; allowed-clients check. Every descriptor made or adopted there is close-on-exec: no
;; program the application starts holds one. Each concern is its own module:
;;   listen-address.rkt    the text of --listen, parsed and printed
;;   listener-options.rkt  a listener's settings (backlog, socket mode, owner, group)
;;   open-listener.rkt     opening the listener an address names (TCP, unix, fd:N)
;;   inherited-socket.rkt  fd 0 (FCGI_LISTENSOCK_FILENO) and systemd socket activation
;;   private-socket.rkt    the manager's and the workers' abstract unix sockets
;;   listener.rkt          an open listener: accepting, closing
;;   socket-io.rkt         reading and writing an accepted connection's fd
;;   allowed-clients.rkt   FCGI_WEB_SERVER_ADDRS
;;   transport-exn.rkt     exn:fail:fastcgi:transport
(require "allowed-clients.rkt"
         "inherited-socket.rkt"
         "listen-address.rkt"
         "listener-options.rkt"
         "listener.rkt"
         "open-listener.rkt"
         "private-socket.rkt"
         "socket-io.rkt"
         "transport-exn.rkt")
(provide (struct-out exn:fail:fastcgi:transport)
         parse-listen-address listen-spec? listen-spec->string ip+port->string
         listener-options? make-listener-options default-listener-options
         listener-options-backlog listener-options-socket-mode
         listener-options-socket-owner listener-options-socket-group
         open-listener listener-for
         inherited-listener open-private-listener private-connect
         listener? listener-fd listener-kind listener-address
         listener-accept listener-accept-fd listener-try-accept listener-close!
         fd->ports
         socket-shutdown-write! socket-close!
         socket-read! socket-write! socket-write-records! sendrecs-max
         socket-input-pending?
         listener-queue-length
         parse-allowed-clients client-allowed?
         fd-listening-socket?)
