;; The server's layers, lowest first: a module may require modules of its own folder and of
;; the folders before it, never of a folder after it. tests/layering-test.rkt checks every
;; module against this list; README's Layout and the manual's module map follow it.
(("util"      "pure helpers: clocks, logging's front, tables, limits, hashes, JSON and xexprs")
 ("os"        "the kernel through the FFI: descriptors, signals, processes, fork, epoll, log files")
 ("protocol"  "FastCGI records and pairs, and the CGI/HTTP facts a response needs")
 ("transport" "sockets: listening (TCP, unix, inherited, systemd), accepting, the client")
 ("engine"    "one server: connections, their owner, requests, dispatch, handlers, output")
 ("servlet"   "web-server's servlets on the engine: requests, continuations, sessions, relay")
 ("status"    "metrics and the status board, rendered as JSON, text, HTML, OpenMetrics")
 ("worker"    "a worker process: the app, the config, its control channel, the loader")
 ("manager"   "the manager: spawning, watching, reloading, scaling, its status")
 ("dev"       "raco fastcgi dev: a reloading development server")
 ("cli"       "the raco fastcgi commands"))
