#lang scribble/manual

@(define (shell . s) (nested #:style 'code-inset (apply verbatim s)))

@title[#:tag "deploy-apache"]{Apache and CGI-only hosts}

The directory @filepath{deploy/apache} of the source tree holds one Apache 2.4
configuration per way of reaching an application, each included as it is, started and
checked (a GET, a form POST, a 2 MiB body, a 404 and a 3 MiB download) by
@filepath{tests/integration/apache-test.rkt}. Each sets its paths with @tt{Define},
whose defaults a @tt{Define} before the @tt{Include} replaces. With every one of them the
application sees the path and query the client sent (@tt{REQUEST_URI}), so a servlet
routes the same way behind Apache as behind nginx.

@itemlist[
 @item{@filepath{proxy-fcgi-unix.conf} (modules @tt{proxy}, @tt{proxy_fcgi}): the
  application runs as a service on a unix socket and Apache connects to it with
  @tt{SetHandler "proxy:unix:/run/fastcgi/app.sock|fcgi://localhost/"}. The socket is
  created with mode @tt{0660}: start the server with @exec{--socket-group www-data} so
  that Apache's user can connect:
  @shell{raco fastcgi serve app.rkt --listen unix:/run/fastcgi/app.sock --socket-group www-data}}
 @item{@filepath{proxy-fcgi-tcp.conf}: the same over TCP
  (@exec{--listen 127.0.0.1:9000}), with @tt{ProxyPass "/" "fcgi://127.0.0.1:9000/"
  enablereuse=on}: Apache keeps its FastCGI connections open between requests, which it
  does not do by default. A reload or a recycle hands those kept connections to the
  workers that go on serving, as for nginx (@secref["operations"]):
  @filepath{tests/integration/lossless-test.rkt} runs reloads and recycles under GETs and
  POSTs through this file and sees every request answered. Both files set @tt{ProxyFCGIBackendType GENERIC}, so that Apache
  does not rewrite @tt{SCRIPT_FILENAME} and @tt{PATH_INFO} as it does for PHP-FPM.}
 @item{@filepath{fcgid.conf} with @filepath{fcgid-wrapper.sh} (module @tt{fcgid}): Apache
  starts the application itself. @tt{mod_fcgid} runs the wrapper with a listening socket
  as file descriptor 0, and the wrapper runs
  @exec{raco fastcgi serve --single-process "$FASTCGI_APP"}, which accepts there.
  @tt{mod_fcgid} sends each process one request at a time and starts more processes under
  load, hence one process each, without the manager. The processes run as Apache's user,
  so the package must be installed where that user finds it
  (@exec{raco pkg install --scope installation}). The file raises @tt{mod_fcgid}'s body
  limit (128 KiB by default) to 64 MiB with @tt{FcgidMaxRequestLen}, gives the first request
  time for Racket to start (@tt{FcgidIOTimeout 60}) and streams answers
  (@tt{FcgidOutputBufferSize 0}).}
 @item{@filepath{trampoline-cgi.conf} (modules @tt{cgi}, @tt{alias}, @tt{env}) and
  @filepath{htaccess-trampoline} (@tt{cgi}, @tt{rewrite}, @tt{env}, @tt{mime}): for hosts
  that run CGI programs only, described next.}]

@section[#:tag "deploy-apache-trampoline"]{The CGI trampoline}

@filepath{trampoline/fcgi-trampoline} is a small C program (it needs only the C library)
that a web server runs as an ordinary CGI program. It sends its request to the application
as one FastCGI Responder request (id 1, without KEEP_CONN) and relays the answer: the whole
CGI environment becomes the params, @tt{CONTENT_LENGTH} bytes of standard input become the
body (sent 64 KiB at a time, never held whole), the application's CGI header block is
checked (a @tt{Status:} line passes through) and its body streamed to standard output as it
arrives, and its STDERR stream goes to standard error, that is, the web server's error log.
The application keeps running between requests:

@shell{make -C trampoline                 # gcc, libc only
raco fastcgi serve app.rkt --listen unix:$HOME/run/app.sock --socket-mode 0666}

On a shared host, copy the binary to the document root as @filepath{fcgi-trampoline.cgi}
(mode 755) and @filepath{deploy/apache/htaccess-trampoline} as @filepath{.htaccess}, with
the socket's path in its @tt{SetEnv FASTCGI_CONNECT} line: files of the directory are
served by Apache, every other path goes to the application.

Environment variables:
@itemlist[
 @item{@tt{FASTCGI_CONNECT}: where the application listens, @tt{unix:/path},
  @tt{A.B.C.D:PORT} or @tt{[IPv6]:PORT} (literal addresses only). Default: the value of
  @exec{make DEFAULT_CONNECT=...} at build time, @tt{unix:/run/fastcgi/app.sock} unless
  changed.}
 @item{@tt{FASTCGI_TIMEOUT}: seconds (fractions allowed, at most 86400) for the connect and
  for each read and write. Default: 5 seconds to connect and 30 for each read and write
  (@exec{make CONNECT_TIMEOUT=... IO_TIMEOUT=...}), below Apache's own @tt{Timeout} of 60.}]

Until a header has been sent, every failure is a clean CGI answer and one line on standard
error; after that, the body stops short and the exit status tells why:

@tabular[#:style 'boxed
         #:sep @hspace[2]
         (list (list @bold{exit} @bold{answer} @bold{when})
               (list "0" "the application's" "the answer was relayed whole")
               (list "1" "500" "FASTCGI_CONNECT or FASTCGI_TIMEOUT is malformed")
               (list "2" "503" "no socket, connection refused, connect timeout, or OVERLOADED")
               (list "3" "502" "a malformed FastCGI record or CGI header, or EOF before END_REQUEST")
               (list "4" "504" "the application made no progress within the timeout")
               (list "5" "none" "standard input or output failed: the client went away")
               (list "6" "400" "CONTENT_LENGTH is not a number"))]

Apache's @tt{mod_cgi} writes the whole request body before it reads any output. When the
application answers without reading its body (an early 413, say), the trampoline stops
forwarding the body as soon as the application closes its side or ends the request, or
after one second in which neither the application nor standard output took anything, and
reads the rest of the body and throws it away, so that the three programs do not wait on
each other until a timeout.

Per hello-world request under @tt{mod_cgi}, the trampoline costs a few milliseconds (a
CGI program's fork and exec), the same as libfcgi's @exec{cgi-fcgi}; Racket run as a
CGI program costs about half a second, its start-up, on every request
(@filepath{bench/trampoline-results.md}, from @exec{make bench-trampoline}).
