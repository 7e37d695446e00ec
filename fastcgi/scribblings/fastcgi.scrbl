#lang scribble/manual
@(require racket/runtime-path
          scribble/core
          (only-in "../private/worker/lines.rkt" message-forms)
          (for-label racket/base
                     racket/contract
                     web-server/http
                     (only-in net/url string->url)
                     (only-in web-server/servlet-env serve/servlet)
                     (only-in web-server/servlet/web servlet-prompt)
                     (only-in web-server/safety-limits make-safety-limits)
                     (only-in web-server/dispatch dispatch-rules)
                     (only-in web-server/dispatchers/dispatch exn:dispatcher)
                     fastcgi
                     fastcgi/client))

@;; status-html.png: drawn by tools/status-screenshot.sh from the running code
@(define-runtime-path status-png "status-html.png")
@(define (wire . s) (apply tt s))
@(define (octal s) (racketvalfont s))
@(define (nonterm s) (tt "<" s ">"))
@(define (shell . s) (nested #:style 'code-inset (apply verbatim s)))

@title{FastCGI: Serving Racket Applications behind a Web Server}
@author{The fastcgi authors}

This package runs Racket web applications as FastCGI applications, so that a web server
such as nginx, HAProxy, lighttpd or Apache accepts HTTP and passes each request to Racket
over a unix socket or TCP connection.

An application is either an ordinary @racketmodname[web-server] servlet, a procedure
from @racket[request?] to @racket[response?], or a @emph{raw} handler that reads the
FastCGI params and body and writes CGI output itself. The raw interface also serves the
Authorizer and Filter roles.

The package provides the @racketmodname[fastcgi] library (@secref["api"]), the
@racketmodname[fastcgi/client] library (@secref["client"]), and the
@exec{raco fastcgi} command with the subcommands @exec{serve}, @exec{dev} and
@exec{request} (@secref["cli"]).

@table-of-contents[]

@; ---------------------------------------------------------------------------------------
@section[#:tag "intro"]{Introduction}

A FastCGI application is a long-running process that listens on a socket. The web server
(the @deftech{front}) connects to it and sends each HTTP request as a FastCGI request: a
set of name-value @deftech{params} (the CGI variables such as @wire{REQUEST_METHOD},
@wire{REQUEST_URI} and @wire{HTTP_HOST}) and a body stream. The application answers with
CGI output: header lines, a blank line and the body. One connection can carry many
requests, one after another or at the same time.

@subsection[#:tag "quick-start"]{Quick start}

The file @filepath{examples/hello.rkt} in the package's repository is a servlet:

@codeblock|{
#lang racket/base
(require web-server/http)
(provide start)

(define (start req)
  (response/output (λ (out) (write-bytes #"Hello, World!\n" out))
                   #:mime-type #"text/plain"))
}|

Try it with a local HTTP front, then serve it on a unix socket for a real web server:

@shell|{
raco fastcgi dev examples/hello.rkt      # http://127.0.0.1:8080/
raco fastcgi serve examples/hello.rkt --listen unix:/tmp/hello.sock
}|

The smallest nginx configuration that passes requests to it is one @tt{location} block:

@shell|{
location / {
    fastcgi_pass unix:/tmp/hello.sock;
    include fastcgi_params;
}
}|

The socket file is created with mode @octal{0660}, so the nginx worker's user must be the
socket's owner or in its group; see @DFlag{socket-group} in @secref["serve"].

With that configuration nginx opens a new connection for every request. To keep
connections open between requests, both of these are needed:

@shell|{
upstream hello {
    server unix:/tmp/hello.sock;
    keepalive 8;
}
server {
    listen 80;
    location / {
        fastcgi_pass hello;
        include fastcgi_params;
        fastcgi_keep_conn on;
    }
}
}|

@tt{fastcgi_keep_conn on} makes nginx set the @wire{FCGI_KEEP_CONN} flag in each
@wire{BEGIN_REQUEST}; without the flag this server closes the connection once the request
has ended, as the FastCGI specification asks. The @tt{keepalive} directive gives nginx a
cache of idle connections to the upstream; without it nginx closes the connection itself
after each response, whatever the flag says. A kept connection that stays idle is closed
by this server after @racket[#:idle-timeout] seconds (120 by default; see
@secref["limits"]).

@; ---------------------------------------------------------------------------------------
@section[#:tag "apps"]{Applications}

An application file for @exec{raco fastcgi serve} and @exec{raco fastcgi dev} is a module
that provides one of:

@itemlist[
 @item{@racket[start], a procedure from @racket[request?] to @racket[response?]: a
       servlet (@secref["servlets"]);}
 @item{@racketidfont{fastcgi-handler}, a procedure that takes a
       @racket[fastcgi-request?] (@secref["raw"]).}
]

Either kind may also provide @racketidfont{fastcgi-roles}, the non-empty list of roles
it takes (default @racket['(responder)]): @racket['responder] and @racket['authorizer]
for a servlet, any of @racket['responder], @racket['authorizer] and @racket['filter] for
a raw handler. Any other value stops the command with an error.

When the module provides a procedure named @racket[start], it is used and
@racketidfont{fastcgi-handler} is ignored. When it provides neither, the command stops
with an error. From Racket, @racket[serve/fastcgi] serves a servlet and
@racket[serve/fastcgi-raw] a raw handler.

Connections on a socket are accepted and read by one thread, the event loop: it asks the
kernel (@tt{epoll}) which connections have input, and whether new ones wait, and reads
each in turn, so a kept connection costs no thread while it waits, and a request no
thread switch. When it has nothing to read it waits through Racket's scheduler, so that
the application's other threads run meanwhile; but right after a wait in which no other
thread ran, and while no handler runs, it waits in @tt{epoll} itself for up to 2 ms
(fewer system calls per request). During such a wait no other thread of the process
runs: one that becomes ready then (a timer, say) runs up to 2 ms late. Each request runs its
handler in a Racket thread of its own, or in the thread that reads its connection. The
second, the fast path, is taken when the request's input has all arrived and it is alone
on a connection that never carried two requests at once (nginx, Apache and lighttpd never
multiplex): no thread is made and nothing reads that connection while the handler runs.
As soon as the handler waits on @racket[fastcgi-request-abort-evt] or on a peer that does
not read its answer, or once it has run for 10 ms, its connection gets a reading thread
of its own (for the rest of its life) and a new thread becomes the event loop, so an
@wire{ABORT_REQUEST}, a closed connection or a second request is seen within about 20 ms,
and other connections wait about that long for a handler that blocks. (What watches
for the 10 ms looks every 10 ms until it has found no handler running for a second, then
waits for the next request: an idle server wakes only for its deadline checks, 4 times a
second.) The same goes
for a connection whose body its handler does not read yet. Limits, the request timeout
and the answer to a raising handler are the same either way. Requests whose body is
still arriving, Filters, multiplexed connections and, with shedding on
(@secref["shedding"]) or a @racket[#:request-memory] limit (@secref["runaway"]), every
request get a thread of their own; with shedding on, every
connection also gets its own reading thread instead of the event loop. One difference
can show: a parameter that a handler sets directly, not with @racket[parameterize],
stays set for the later requests run by the same thread: those of the same connection
(as with Racket's own web server, which serves a connection's requests in one thread)
and those of other connections that the event loop reads. A front sends many clients'
requests over one connection, so no handler should leave a parameter set this way.

While a handler runs, @racket[current-error-port] sends to the request's
@wire{FCGI_STDERR} stream: what the handler, and any thread it starts, writes there goes
to the front, which typically writes it to its error log.

@subsection[#:tag "servlets"]{Servlets}

A servlet runs as under @racketmodname[web-server]'s own servlet dispatcher: it may
capture continuations (@racketidfont{send/suspend} and its family), follow the servlet
module convention, or be a stateless servlet in @racketmodname[web-server/base]
(@secref["continuations"]). While it runs, @racket[current-fastcgi-request] holds the
raw request.

@subsubsection{From params to a request}

The @racket[request] given to the servlet is built from the params as follows.

@itemlist[
 @item{Method: @wire{REQUEST_METHOD}; @racket[#"GET"] when it is absent or empty.}
 @item{URI: @wire{REQUEST_URI}. When that param is absent, the URI is
       @wire{SCRIPT_NAME} followed by @wire{PATH_INFO}, then @litchar{?} and
       @wire{QUERY_STRING} when the query string is not empty; an empty URI becomes
       @litchar{/}. The bytes are decoded as UTF-8 (invalid sequences become
       @racket[#\uFFFD]) and parsed with @racket[string->url]; a URI that does not parse
       is answered 400 without calling the servlet.}
 @item{Headers: each param named @wire{HTTP_}@italic{NAME} becomes a header whose name
       is @italic{NAME} split at underscores, each part title-cased, joined with
       hyphens: @wire{HTTP_ACCEPT_LANGUAGE} becomes @tt{Accept-Language}.
       @wire{CONTENT_TYPE} and @wire{CONTENT_LENGTH} become @tt{Content-Type} and
       @tt{Content-Length} when not empty. Other params do not become headers. The
       headers keep the order of the params, and a name sent twice gives two headers.}
 @item{Host address and port: @wire{SERVER_ADDR} (default @racket["127.0.0.1"]) and
       @wire{SERVER_PORT} (default @racket[0]); client address: @wire{REMOTE_ADDR}
       (default @racket["127.0.0.1"]).}
 @item{Bindings and body: read from the request's @wire{FCGI_STDIN} by
       @racketmodname[web-server]'s own parser, so they behave as under
       @racket[serve/servlet]. A @tt{GET} request's body is not read. A
       @tt{multipart/form-data} body is parsed before the servlet is called, and file
       parts larger than 1 MiB are spooled to temporary files. Other bodies are read
       whole, up to @tt{Content-Length}, into @racket[request-post-data/raw]. The
       parser gets @racket[make-safety-limits] with
       @racket[#:max-request-body-length] and @racket[#:max-form-data-file-length] set to
       the @racket[#:max-body] limit (so one uploaded file may be as large as the whole
       body may be); its other limits (on the number and size of form fields, the number
       of files and parts) keep their defaults. A body the parser rejects is answered 400
       and logged as a warning. A @tt{GET} without a query gets what that parser gives
       it, no bindings and no post data, without calling it.}
]

A request may share parts with an earlier request whose params had the same values (a
front sends mostly the same params request after request): its header list and header
values, its addresses, and the url of a plain URI (a path of letters, digits and
@litchar{-._~}, with an optional query of the same). Those parts are immutable, so no
servlet can change them for the next request.

@subsubsection{From a response to CGI output}

The servlet's @racket[response] is written to the request's @wire{FCGI_STDOUT} as:

@itemlist[
 @item{@tt{Status: @italic{code} @italic{message}};}
 @item{@tt{Content-Type: @italic{mime}} when the response has a MIME type and no
       @tt{Content-Type} header of its own;}
 @item{each header of the response, in order, except @tt{Connection},
       @tt{Transfer-Encoding} and @tt{Keep-Alive} (compared without regard to case),
       which are dropped;}
 @item{a blank line, then the body written by the response's output procedure.}
]

Lines end with CR LF. Every CR, LF and NUL byte in the status message, the MIME type,
a header name or a header value is replaced by a space, so a response cannot add header
lines of its own making. No other header (such as @tt{Date} or @tt{Server}) is added.

@subsubsection{Errors}

When the servlet raises @racket[exn:dispatcher] (what @racket[dispatch-rules] does
when no rule matches and there is no @racket[else] clause), the front gets a plain-text
@tt{404 Not Found} page, as under @racket[serve/servlet]. When the servlet raises an exception, the front gets a plain-text
@tt{500 Internal Server Error} page, and the exception's message is logged at level
@racket['error] (@secref["logging"]); it is not sent to the front. When the exception
is an @racket[exn:fail:fastcgi:body] (the body went over a limit) the page is
@tt{413 Content Too Large} instead, and when it is a break (@racket[exn:break], as
sent by the request timeout) it is @tt{503 Service Unavailable}. Such a page replaces any
output that was still buffered. If output has already left (a full record of 65528 bytes,
or after @racket[flush-output] on the output port), no page can be sent: the request
ends with an @wire{END_REQUEST} whose application status is 1, and the front sees a
truncated answer. A call of @racket[exit] in the servlet, and a handler ended for holding
more memory than @racket[#:request-memory], are answered the same way, 500, with a warning
in the log (@secref["runaway"]).

@subsection[#:tag "continuations"]{Continuations, the servlet module convention and stateless servlets}

Everything @racketmodname[web-server] runs, runs here, on @racketmodname[web-server]'s
own machinery (its managers, stuffers, @racket[servlet-prompt]); what this server adds is
where continuations live in a pool of processes, and checks on what comes back from the
client.

@bold{Which forms run.} @racketidfont{send/suspend}, @racketidfont{send/suspend/dispatch},
@racketidfont{send/suspend/url}, @racketidfont{send/forward}, @racketidfont{send/back},
@racketidfont{send/finish}, @racketidfont{redirect/get}, @racketidfont{clear-continuation-table!},
@racketidfont{embed/url} (also inside formlets and @racketmodname[web-server/page]), web
cells and @racketidfont{with-errors-to-browser}, under @exec{raco fastcgi serve},
@exec{raco fastcgi dev} and @racket[serve/fastcgi]. The servlet runs as
@racketmodname[web-server]'s dispatcher runs it: with @racketidfont{current-servlet},
@racketidfont{current-execution-context} and @racketidfont{current-servlet-instance-id}
set, inside a continuation barrier and a prompt tagged @racket[servlet-prompt]. A call
of @racket[exit] in a servlet ends its request (a 500 page, and a warning in the log), not
the process.

@bold{The module convention.} An application file is read as @racketmodname[web-server]'s
servlet dispatcher reads a servlet module:
@itemlist[
 @item{@racketidfont{interface-version} @racket['v1] with @racketidfont{timeout} (seconds)
       and @racketidfont{start}: continuations in a timeout manager, as
       @racketidfont{make-v1.servlet} makes;}
 @item{@racketidfont{interface-version} @racket['v2] with @racketidfont{manager} and
       @racketidfont{start};}
 @item{@racketidfont{interface-version} @racket['stateless] with @racketidfont{start} and,
       optionally, @racketidfont{manager} (default: @racket[serve/servlet]'s default
       manager, below) and @racketidfont{stuffer} (default:
       @racketidfont{default-stuffer});}
 @item{only @racketidfont{start}: continuations in @racket[serve/servlet]'s default
       manager, a threshold LRU manager (below); a module written in
       @racketmodname[web-server] (@tt{#lang web-server}) that provides only
       @racketidfont{start} is a stateless servlet with @racketidfont{default-stuffer}, as
       @racket[serve/servlet] with @racket[#:stateless? #t] serves it.}
]
A stateless servlet's continuations travel in its URLs, and its manager keeps none of
them. One may still capture stateful ones: a module in @tt{#lang web-server/base} that
also requires @racketmodname[web-server/servlet] and calls its @racket[send/suspend]
family (easy to write, and it runs under @racket[serve/servlet], which is stateful).
web-server's servlet dispatcher gives a stateless servlet a manager that keeps nothing,
and there each such page fails (@tt{No instance for id: 0}). Here a stateless servlet's
manager (the module's, or the default) keeps such continuations as for a stateful servlet
(in the worker that captured them; other workers pass their URLs on to it), and the
first capture in a process logs one warning naming the mix and the fix (web-server/lang/
web's @racket[send/suspend], whose continuation is in the URL).

Servlets with an @racketidfont{interface-version} run with the module's folder as
@racket[current-directory], as under the servlet dispatcher; others in the server's. A
file in @tt{#lang web-server/insta} would start an HTTP server of its own when loaded:
it is refused at load with one line naming the change to make (the one
@racketmodname[web-server]'s tutorial gives for leaving DrRacket: a first line
@tt{#lang racket}, then @racket[(require web-server/servlet)] and @racket[(provide start)]).

@bold{The default manager.} @racket[serve/servlet]'s: a threshold LRU manager whose
continuations each have 24 life points, lose one every @DFlag{continuation-timeout}/24
seconds (default 14400 s, 4 hours, so 10 minutes a point) and gain one each time they are
used. Its memory threshold counts from what the worker held once the application had
loaded (after a major collection): sessions may add @DFlag{servlet-memory} bytes (default
128 MiB). (@racketmodname[web-server] compares its 128 MiB with the whole process, which
with @racketmodname[web-server/servlet] loaded on Racket CS 8.7 already holds about 180 MiB:
under @racket[serve/servlet] every continuation is under memory pressure from the start.)
Past the threshold, every continuation loses a point every 5 seconds, and, since that alone
would let a flood of new sessions pile up for 2 minutes, the server also ends the least
recently used half of the sessions at once when a new continuation is stored, at most
once a second unless the process is past the threshold by a quarter (so that however fast
sessions come, what the worker holds stays near the threshold; each such eviction costs a
major collection): their URLs get the expiration page. A manager the application brings
(@racket['v2], @racket['stateless], @racket[#:manager]) keeps its own rules. An expired or unknown continuation
gets the manager's expiration page (the default one is @racket[serve/servlet]'s: ``Sorry,
this page has expired. Please go back.''; a manager without one gets that one too),
never a 500. Instances are made in the manager only when a request first stores a
continuation: a servlet that never suspends costs the manager nothing.

@bold{Continuation ids.} A continuation URL carries @tt{(INSTANCE K-ID SALT)} in a path
parameter, as under @racketmodname[web-server]. Here the instance id carries the worker
that owns it (@tt{INSTANCE = local id * 2^32 + worker number}), and the salt carries 96
bits of an HMAC-SHA256, under a key each worker makes at start, of the three numbers: ids
cannot be guessed or forged, and a URL one worker did not hand out never reaches its
manager's tables. Before @racketmodname[web-server] @racket[read]s a path parameter, the
server checks its shape: a parameter must be what @racketmodname[web-server] writes (a
list of pairs of a short key and a string) or a plain token, and a @tt{k} must hold three
numbers; anything else (a cyclic datum, a deep list, a truncated or malformed @tt{k}) is
answered @tt{400 Bad Request} without calling the servlet, and logged (at most 10 lines a
second).

@bold{Across worker processes.} Continuations live in the memory of the worker that
captured them, and the front's connections reach any worker. Each worker of a pool that
serves a servlet with continuations also listens on a private socket of the pool (no
file: @secref["operations"]); a worker that receives a URL of another worker's continuation
passes the FastCGI request (params as they came, body streamed) to the owner there and
relays the answer back as it arrives. What a passed-on request costs is in
@filepath{bench/RESULTS.md} (the @italic{passed-on} row). When the owner cannot be
reached (it crashed, or retired and ended), the request is served where it arrived, and
gets the expiration page.

@bold{Reloads and recycling.} A worker replaced by a reload (@tt{SIGHUP}), recycling
(@DFlag{max-requests}, @DFlag{max-memory}) or a smaller pool @italic{retires}: it stops
accepting connections and finishes its requests, then goes on serving its live sessions
(the continuation URLs other workers pass on to it) until none is left or
@DFlag{session-drain} seconds (default 600) have passed; new sessions go to the new
workers. A worker with no live session stops at once, as before. The status page shows
each worker's live @tt{sessions}, the pool's total, and @tt{draining_workers}; a retiring
worker's state is @tt{draining}. Stopping the manager does not wait for sessions.

@bold{Stateless servlets.} Their continuations travel in the URL (the @tt{c} parameter),
serialized by the servlet's stuffer. The server signs what the stuffer makes: the URL
carries the stuffer's output, a dot and 128 bits of HMAC-SHA256 under the server's secret,
and what comes back is checked before the stuffer sees it, so nothing is deserialized from
a URL (or a @racketidfont{send/suspend/hidden} field) that this server did not make; a bad
signature is answered 400. The secret is read from @DFlag{secret-file} (at least 16
bytes; the same file on every host lets any host resume any URL); without it, the
manager makes one at start, shared by its workers and valid across reloads until it
stops, and the worker logs one warning line at load saying so. The secret is never put
in a URL, a log line or a process's command line.

@bold{Several hosts.} Stateful sessions need a front that pins a client to a host (an
HAProxy cookie); stateless servlets resume on any host that has the same secret. When the
pinned host is gone, the session gets the expiration page from another host. See
@filepath{deploy/cluster/} and the deployment chapter.

@bold{From one process to several.} Continuations are routed to their worker, but
anything else an application keeps in process memory is per worker: a module-level
variable (a counter, a list of posts, a cache) has one copy in each worker, and each
worker sees only the changes made by the requests it served (a worker forked from the
generation's loader starts with the value the loader had: @secref["preload"]). The
tutorial's blog with its posts in memory (its first iterations) shows different posts
depending on the worker that answers; with its posts in SQLite (@filepath{model-3.rkt})
every worker sees the same. Keep shared state in a database or a file, or serve such an
application with @DFlag{workers} 1 (one process still serves many requests at once, on
green threads; a servlet that mostly waits on I/O needs no more), and give it more
workers once its state is shared.

@subsection[#:tag "raw"]{Raw handlers}

A raw handler receives a @racket[fastcgi-request?] and writes CGI output to
@racket[(fastcgi-request-stdout r)]: CGI header lines (such as @tt{Status} and
@tt{Content-Type}), a blank line, then the body; the library does not check them. When the handler returns, its
buffered output is sent and the request ends with application status 0. Its result is
ignored. Exceptions are handled as for servlets (@secref["servlets"]). A process that
serves only raw handlers does not load web-server at all: @racketmodname[fastcgi] loads
its servlet side on first use (@secref["memory"] says what each process holds). The file
@filepath{examples/hello-raw.rkt} in the repository is a raw ``Hello, World!''; this one
echoes the request URI:

@codeblock|{
#lang racket/base
(require fastcgi)
(provide fastcgi-handler)

(define (fastcgi-handler r)
  (define out (fastcgi-request-stdout r))
  (write-bytes #"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\n" out)
  (write-bytes (fastcgi-param r "REQUEST_URI" #"") out)
  (newline out))
}|

The handler starts as soon as the params are complete; the body arrives on
@racket[(fastcgi-request-stdin r)] while it runs, under the flow rule in
@secref["flow"]. A handler that reads the body as it comes keeps at most
@racket[#:stdin-buffer] bytes of it queued, however large the body.

The roles:

@itemlist[
 @item{Responder (@racket['responder]): the ordinary request; @wire{FCGI_STDIN}
       carries the request body.}
 @item{Authorizer (@racket['authorizer]): the front asks whether to let a request
       through. There is no body: the stdin port is at end-of-file at once. By the
       FastCGI specification, an answer with status 200 grants access; a header @tt{Variable-@italic{NAME}: @italic{value}}
       in a granting answer asks the front to pass @italic{NAME} to the next stage.
       Any other answer is a denial that the front sends to the client.}
 @item{Filter (@racket['filter]): after @wire{FCGI_STDIN}, the front sends the file to
       filter on the @wire{FCGI_DATA} stream, read from
       @racket[(fastcgi-request-data r)]; its length is in the @wire{FCGI_DATA_LENGTH}
       param.}
]

A @wire{BEGIN_REQUEST} for a role the handler does not take is answered with an
@wire{END_REQUEST} whose protocol status is @wire{FCGI_UNKNOWN_ROLE}.

@; ---------------------------------------------------------------------------------------
@section[#:tag "cli"]{The command line}

@exec{raco fastcgi} has three subcommands; @exec{raco fastcgi @italic{command} --help}
lists a command's options.

@subsection[#:tag "serve"]{@exec{raco fastcgi serve}}

@commandline{raco fastcgi serve [@italic{option} ...] @italic{app-file}}

Serves @italic{app-file} (@secref["apps"]) as a FastCGI application. By default it runs
a @deftech{manager}: a process that opens the listening socket, starts worker processes
that accept connections on that one socket, and keeps the pool running
(@secref["manager"]). By default the app is loaded once, by a loader process, and the
workers are forked from it, so that they share what it loaded (@secref["preload"]). The default pool is @DFlag{pm} @tt{static} with one worker
per core; the first log line says what was chosen, for example
@tt{listening on unix:/run/app.sock (manager of /srv/app.rkt; pm static, 2 workers)}.
With @DFlag{single-process} the app is served in this one process instead, with no
manager.

The app file may also come before the options: @exec{raco fastcgi serve app.rkt --listen
unix:/tmp/app.sock} works. Log lines are printed to the standard error port
(@secref["logging"]); each line of a manager or worker carries its pid in brackets.

The options, grouped and described as @DFlag{help} prints them, then notes:

@bold{Listening socket}
@itemlist[
 @item{@DFlag{listen} @nonterm{addr} or @Flag{l} @nonterm{addr} ---
       ``Address to listen on: unix:/path, HOST:PORT, [::1]:PORT or fd:0. Default: fd 0
       when it is a listening socket (spawned by the web server), else systemd socket
       activation (LISTEN_FDS), else an error.''
       The address forms are described in @secref["addresses"].}
 @item{@DFlag{socket-mode} @nonterm{octal} ---
       ``Mode of a unix socket file (default 0660)''}
 @item{@DFlag{socket-owner} @nonterm{user} ---
       ``Owner (name or uid) of a unix socket file''}
 @item{@DFlag{socket-group} @nonterm{grp} ---
       ``Group (name or gid) of a unix socket file''
       @linebreak[]
       A value made only of digits, such as @tt{33}, is a numeric uid or gid; any other
       value is looked up as a user or group name.}
 @item{@DFlag{backlog} @nonterm{n} --- ``Listen backlog (default 1024)''}
 @item{@DFlag{allowed-clients} @nonterm{list} ---
       ``Comma-separated IPv4/IPv6 addresses or CIDR blocks allowed to connect over TCP
       (default: $FCGI_WEB_SERVER_ADDRS, else everyone). A list that parses to nothing
       denies everyone.'' See @secref["security"].}
]

@bold{Worker processes (the manager)} --- see @secref["manager"]
@itemlist[
 @item{@DFlag{workers} @nonterm{n} or @Flag{w} @nonterm{n} ---
       ``Worker processes for --pm static; for dynamic and ondemand, the default of
       --max-spare and half the default of --max-workers (default: the core count)''}
 @item{@DFlag{pm} @nonterm{kind} --- ``static (default), dynamic or ondemand''}
 @item{@DFlag{min-spare} @nonterm{n} --- ``dynamic: fewest idle workers (default 1)''}
 @item{@DFlag{max-spare} @nonterm{n} --- ``dynamic: most idle workers (default --workers)''}
 @item{@DFlag{max-workers} @nonterm{n} ---
       ``dynamic, ondemand: most workers (default 2 x --workers)''}
 @item{@DFlag{idle-timeout} @nonterm{secs} ---
       ``ondemand: seconds before an idle worker stops (default 10)''}
 @item{@DFlag{max-requests} @nonterm{n} ---
       ``Replace a worker after it took N requests (default: never)''}
 @item{@DFlag{max-requests-jitter} @nonterm{n} ---
       ``With --max-requests: each worker draws its limit in [max-requests, max-requests + N]
       when it starts, so that workers started together are not replaced together (default 0)''
       (@secref["recycle"]). Without @DFlag{max-requests}, any @nonterm{n} but 0 is an error.}
 @item{@DFlag{max-memory} @nonterm{size} ---
       ``Replace a worker whose private memory (its resident memory less what it shares
       with other processes, such as the loaded image) passes SIZE, e.g. 512m (default: never)''
       (@secref["recycle"]; how private memory is read: @secref["preload-memory"]).}
 @item{@DFlag{max-memory-hard} @nonterm{size} ---
       ``Stop a worker whose private memory passes SIZE at once, without waiting for its
       requests: SIGTERM, then SIGKILL 1 s later (default: 2 x --max-memory)''
       (@secref["recycle"]). It may not be below @DFlag{max-memory}.}
 @item{@DFlag{graceful-timeout} @nonterm{secs} ---
       ``Seconds to finish in-flight requests on stop and reload (default 30)''}
 @item{@DFlag{start-timeout} @nonterm{secs} ---
       ``Seconds a new worker, or a generation's loader, may take to load the app (default 60)''
       (@secref["preload"]).}
 @item{@DFlag{canary} @nonterm{secs} ---
       ``Reload through a canary: the new generation's first worker serves beside the old
       generation for SECS (and --canary-requests answers); past --canary-max-errors the
       reload rolls back by itself (default: no canary)'' (@secref["canary"])}
 @item{@DFlag{canary-requests} @nonterm{n} ---
       ``Answers a canary must give before it is judged, within 3 x its seconds (default 20)''}
 @item{@DFlag{canary-max-errors} @nonterm{points} ---
       ``Percentage points of 5xx answers a canary may have over the old generation (default 1)''}
 @item{@DFlag{pid-file} @nonterm{file} ---
       ``Write the manager's pid here (and the status to FILE.status.json)''}
 @item{@DFlag{preload} ---
       ``Load the app once per generation and fork the workers from it even when loading it
       leaves what a fork cannot share (open files, sockets); each such thing is logged''
       (@secref["preload"]).}
 @item{@DFlag{no-preload} ---
       ``Each worker loads the app itself (default: the app is loaded once per generation
       and the workers are forked from it, unless loading it leaves what a fork cannot
       share)''
       @linebreak[]
       Of @DFlag{preload} and @DFlag{no-preload}, the one given last applies.}
 @item{@DFlag{single-process} ---
       ``No manager: serve in this one process (the pm options do not apply)''
       @linebreak[]
       The access log, slow log, status and ping paths work in this mode too (the status
       then shows the one process). SIGHUP reopens the log files here; there is no
       reload.}
 @item{@DFlag{check} ---
       ``Load the app and check the options and paths, then exit (status 0: all is well); serve nothing''
       @linebreak[]
       Like @exec{nginx -t} and @exec{php-fpm -t}: see @secref["fail-fast"].}
]

@bold{Status and logs} --- see @secref["status"] and @secref["logs"]
@itemlist[
 @item{@DFlag{status-path} @nonterm{path} ---
       ``Answer the pool's status at this path, e.g. /status (?json ?openmetrics ?prometheus ?html)''}
 @item{@DFlag{ping-path} @nonterm{path} --- ``Answer "pong" at this path, e.g. /ping''}
 @item{@DFlag{access-log} @nonterm{file} ---
       ``One line per request to FILE, or - for stdout (default: none)''}
 @item{@DFlag{slow-log} @nonterm{file} ---
       ``Requests running past --slow-threshold, with their stack, to FILE''}
 @item{@DFlag{slow-threshold} @nonterm{secs} ---
       ``Seconds after which a request is slow (default 5)''}
 @item{@DFlag{log-level} @nonterm{level} ---
       ``Log level on stderr: error, warning, info (default), debug''
       (@tt{fatal} is accepted too).}
]

@bold{Servlets with continuations} --- see @secref["continuations"]
@itemlist[
 @item{@DFlag{continuation-timeout} @nonterm{secs} ---
       ``Seconds a continuation lives after its last use, in the default manager
       (default 14400: 4 hours, as serve/servlet)''}
 @item{@DFlag{servlet-memory} @nonterm{size} ---
       ``Memory a worker's sessions may add to what it held once the app loaded: past it,
       the default manager ends the least recently used sessions (default 128m)''}
 @item{@DFlag{session-drain} @nonterm{secs} ---
       ``Seconds a worker replaced by a reload or recycling keeps serving its live
       sessions, while new ones go to the new workers (default 600; 0: none)''}
 @item{@DFlag{secret-file} @nonterm{file} ---
       ``Sign stateless servlets' URLs with the secret in FILE (at least 16 bytes), the same
       on every host (default: a secret made at start, valid until the manager stops)''}
]

@bold{Limits (per worker)} --- see @secref["limits"]
@itemlist[
 @item{@DFlag{max-body} @nonterm{size} ---
       ``Largest request body (default 64m): 413 past it''}
 @item{@DFlag{max-params-bytes} @nonterm{size} ---
       ``Largest total of params (default 128k): 431 past it''}
 @item{@DFlag{max-params-pairs} @nonterm{n} ---
       ``Most params per request (default 1000): 431 past it''}
 @item{@DFlag{max-concurrent} @nonterm{n} ---
       ``Most handlers running at once (default 1000): 503 past it''}
 @item{@DFlag{max-queue-delay} @nonterm{secs} ---
       ``Shed load: past SECS of CPU work ahead of it, a new request gets 503 (default:
       off)'' (@secref["shedding"]); @tt{off} turns it off again.}
 @item{@DFlag{max-connections} @nonterm{n} --- ``Most open connections (default 1024)''}
 @item{@DFlag{max-requests-per-connection} @nonterm{n} ---
       ``Most live requests on one connection (default 100): OVERLOADED past it''}
 @item{@DFlag{stdin-buffer} @nonterm{size} ---
       ``Body bytes queued for one handler that has not read them (default 256k)''}
 @item{@DFlag{connection-buffer} @nonterm{size} ---
       ``Input the live requests of one multiplexed connection hold together (default
       1m)'' (@secref["limits"]: past it, @wire{FCGI_OVERLOADED} or the request ends).}
 @item{@DFlag{first-byte-timeout} @nonterm{secs} ---
       ``Seconds from accept to the first whole record (default 10)''}
 @item{@DFlag{keepalive-timeout} @nonterm{secs} ---
       ``Seconds a kept connection may idle between requests (default 120)''
       (the @racket[#:idle-timeout] limit).}
 @item{@DFlag{read-timeout} @nonterm{secs} ---
       ``Seconds without progress while a request's input is incomplete (default 30)''}
 @item{@DFlag{write-timeout} @nonterm{secs} ---
       ``Seconds one write may block on a peer that does not read (default 30)''}
 @item{@DFlag{request-timeout} @nonterm{secs} ---
       ``Seconds a handler may run before it is stopped and the front gets 503 (default:
       no limit)''}
 @item{@DFlag{request-memory} @nonterm{size} ---
       ``Memory one request's handler may hold: past it, the handler is ended and the front
       gets 500 (default: --max-memory when it is given, else no limit)'' (@secref["runaway"]).}
]

A @nonterm{size} is a number of bytes, optionally followed by @tt{k}, @tt{m} or @tt{g}
(either case) for KiB, MiB or GiB: @tt{512k}, @tt{64m}. A @nonterm{secs} is a positive
number, and @nonterm{n} a positive integer. The limit options set the fields of the same
name described in @secref["limits"] in every worker; @racket[#:drain-timeout] keeps its
default under @exec{raco fastcgi serve}. A bad value
stops the command with one error line before any worker starts.

@subsection[#:tag "dev"]{@exec{raco fastcgi dev}}

@commandline{raco fastcgi dev [@italic{option} ...] @italic{app-file}}

Runs @italic{app-file} behind a local HTTP front, for trying an application without a web
server. The application runs in a child process, served as @exec{raco fastcgi serve
--single-process} serves it, with the default limits, on a unix socket in a new temporary
directory. @racketmodname[web-server]'s HTTP server answers on the @DFlag{port}, serves
the @DFlag{static} folders, and forwards every other request over a FastCGI connection
with the params a front such as nginx sends (as @racket[fastcgi-request] builds them,
with @wire{REMOTE_ADDR}, @wire{SERVER_ADDR} and @wire{SERVER_PORT} taken from the HTTP
connection). A new FastCGI connection is made for each request. The answer's status
becomes the HTTP status; its other headers, except @tt{Status} and @tt{Content-Length},
are passed on. Each request and each answer is held whole in memory, and
the HTTP side has @racket[serve/servlet]'s default safety limits (for example, a request
body of at most 1 MiB), so this command is for development only. Log lines at level
@racket['info] go to the standard error port; the application's output goes to the
command's output and error ports, including what a handler writes to its
@racket[current-error-port] (the @wire{FCGI_STDERR} stream, which nginx writes to its
error log). Ctrl-C stops it and removes the temporary directory.

@bold{Reloading.} Unless @DFlag{no-reload} is given, a change to a source file of the
application makes the next request run the new code. Its source files are the
application file, every module it requires that is not part of the Racket installation,
of a package installed in the installation or user scope, or of this server (a linked
package counts as the application's), and the files its macros read at compile time
(@racketidfont{include}, @racketidfont{include-template}). They are checked every half
second and before each request; on a change, the child process is stopped (it finishes
its requests, for at most 3 seconds), a new one loads the application, and the command
prints a line such as @tt{reloaded blog.rkt after a change to model.rkt}. The new process
is a spare, started once the previous one had loaded the application, which has already
loaded (and instantiated) the libraries that the application required then, so that a
reload costs mostly the compilation of the application's own modules. These are compiled
from source in each process: a compiled file left by @exec{raco make} may be stale against
a dependency that changed. Continuations captured by the old process
(@racketidfont{send/suspend} and its family) are gone: their URLs get the expiration page.

When the application does not load (a syntax error, an exception while its modules are
instantiated), every request gets a 500 page with the error text until a source file
changes again; the error is also printed. When its process exits after it loaded (a call
to @racket[exit] from a thread the application started; in a handler, @racket[exit] ends
only its request), a request gets a 502 page with the end of the process's
output, and the next one starts a new process. With @DFlag{no-reload}, the code loaded at
start serves until the command stops: a change is not loaded, an application that does not
load at start stops the command with its error, and a process that exits is not replaced.

@bold{Static files.} A @tt{GET} or @tt{HEAD} request whose path names a regular file under
a @DFlag{static} folder is answered with that file, as @racket[serve/servlet]'s
@racket[#:extra-files-paths] does (with a content type by extension from
@racketmodname[web-server]'s @tt{mime.types}, and byte ranges); the folders are tried in
the order given. Any other request, including a path that names a folder, goes to the
application. A path with a @tt{..} segment, percent-encoded or not, and a path that leads
through a symbolic link to a file outside its folder, get a 404 answer.

@itemlist[
 @item{@DFlag{port} @nonterm{p} or @Flag{p} @nonterm{p} ---
       ``HTTP port of the local front (default 8080)''}
 @item{@DFlag{host} @nonterm{h} ---
       ``Address the local front listens on (default 127.0.0.1)''}
 @item{@DFlag{no-reload} ---
       ``Keep the code loaded at start (default: load it again when a source file of the
       app changes)''}
 @item{@DFlag{static} @nonterm{dir} ---
       ``Serve the files under DIR before the app; may be repeated''}
]

As with @exec{serve}, the app file may come before the options. For the web-server
tutorial's blog, whose first line is @tt{#lang web-server/insta}: replace that line with
@tt{#lang racket}, @racket[(require web-server/servlet)] and
@racket[(provide/contract (start (request? . -> . response?)))], then run
@exec{raco fastcgi dev blog.rkt --static htdocs} with the tutorial's @tt{htdocs} folder.

@subsection[#:tag "request"]{@exec{raco fastcgi request}}

@commandline{raco fastcgi request [@italic{option} ...] @italic{address} [@italic{uri}]}

Sends a request to any FastCGI application, as @tt{cgi-fcgi} does, and prints the answer.
@italic{address} is @tt{unix:/path}, @tt{/path}, @tt{HOST:PORT} or @tt{[IPv6]:PORT};
@italic{uri} defaults to @tt{/}. The request carries the params listed under
@racket[fastcgi-request]. For a single request, the application's @wire{FCGI_STDERR}
output is copied to the standard error port.

@itemlist[
 @item{@DFlag{method} @nonterm{method} ---
       ``HTTP method (default GET, or POST when a body is given)''}
 @item{@Flag{H} @nonterm{header} or @DFlag{header} @nonterm{header} (repeatable) ---
       ``Add the request header "Name: value" (sent as HTTP_NAME)''}
 @item{@Flag{p} @nonterm{name=value} or @DFlag{param} @nonterm{name=value} (repeatable) ---
       ``Add or override the raw FastCGI param <name>''}
 @item{@Flag{d} @nonterm{file} or @DFlag{data-file} @nonterm{file} ---
       ``Send the body from <file> (- for stdin)''}
 @item{@DFlag{stdin} --- ``Send the body from stdin''}
 @item{@DFlag{role} @nonterm{role} ---
       ``responder, authorizer or filter (default responder)''}
 @item{@DFlag{filter-data} @nonterm{file} ---
       ``Send <file> as the DATA stream (filter role)''}
 @item{@DFlag{no-keep-conn} ---
       ``Let the application close the connection after the reply''}
 @item{@DFlag{get-values} ---
       ``Print FCGI_MAX_CONNS, FCGI_MAX_REQS, FCGI_MPXS_CONNS as NAME=VALUE''}
 @item{@DFlag{repeat} @nonterm{n} ---
       ``Send <n> requests on one connection, a summary line for each''}
 @item{@DFlag{concurrent} @nonterm{n} ---
       ``Keep up to <n> requests in flight, multiplexed (@DFlag{repeat} defaults to <n>)''}
 @item{@DFlag{raw} --- ``Print the CGI output as received, headers included''}
 @item{@Flag{i} or @DFlag{include} ---
       ``Print the status line and headers, then the body''}
 @item{@DFlag{timeout} @nonterm{seconds} ---
       ``Seconds to wait to connect and for each reply (default 30)''}
 @item{@DFlag{abort-after} @nonterm{seconds} ---
       ``Send ABORT_REQUEST when no reply came within this many seconds, then wait for
       END_REQUEST''. The request is sent with id 1; an aborted request exits with
       status 1. It cannot be combined with @DFlag{repeat} or @DFlag{concurrent}.}
]

@Flag{d} and @DFlag{stdin} exclude each other, as do @DFlag{raw} and @Flag{i}.
A non-empty body sets @wire{CONTENT_LENGTH} to its length and, unless a @tt{Content-Type} header
is given, @wire{CONTENT_TYPE} to @tt{application/x-www-form-urlencoded}. With
@DFlag{role} @tt{authorizer}, the params @wire{CONTENT_LENGTH}, @wire{PATH_INFO},
@wire{PATH_TRANSLATED} and @wire{SCRIPT_NAME} are left out. With @DFlag{filter-data},
@wire{FCGI_DATA_LENGTH} and @wire{FCGI_DATA_LAST_MOD} (the file's modification time in
seconds) are added. @DFlag{param} values are applied last and replace params of the same
name. @DFlag{no-keep-conn} cannot be combined with @DFlag{repeat} or
@DFlag{concurrent}.

Without @DFlag{raw} or @Flag{i}, only the body is printed. With @DFlag{repeat} or
@DFlag{concurrent}, one line is printed per request as it completes:

@verbatim|{N id=ID status=STATUS protocol=PROTOCOL-STATUS stdout=BYTES stderr=BYTES time=MSms}|

The exit status is 0 when every answer has a status below 400 and the protocol status
@wire{FCGI_REQUEST_COMPLETE}; 1 when an answer has a status of 400 or more, another
protocol status, or output that is not valid CGI, and with @DFlag{repeat} or
@DFlag{concurrent} when a request failed (its line reads
@tt{@italic{N} error @italic{message}}); 2 for a usage error or a failure such as a
refused connection or no reply within the timeout, reported in one line on the standard
error port.

@; ---------------------------------------------------------------------------------------
@section[#:tag "manager"]{The manager: worker processes}

Racket's threads are green: one process uses one core. @exec{raco fastcgi serve} therefore
runs a manager process and several @deftech{worker} processes, as php-fpm does:

@itemlist[
 @item{The manager opens the listening socket (or takes the one it inherited, @secref["spawned"])
       and starts each generation's loader (@secref["preload"]), or each worker that loads
       the app itself, with that socket as its standard input, fd 0, which is the
       FastCGI convention; a worker forked from a loader inherits it there. Every worker
       accepts connections there; the kernel hands each
       connection to one of them. The manager never closes the socket while it runs, so
       no connection is refused while workers come and go.}
 @item{The manager never parses FastCGI and never loads the application: a loader loads
       it, and a worker serves it (one that is not forked loads it too). A broken or
       crashing app cannot take the manager down.}
 @item{Each worker reports to the manager over the manager's private control socket (no
       file; only processes of the manager's user may connect: @secref["operations"]):
       that it is ready, then its counters (requests handed to the app, requests
       in flight, connections accepted, slow requests) every 0.1 s while they change.
       After a second with nothing changed and nothing in flight, a worker waits for its
       next request before it looks again (an idle worker wakes 4 times a second), so
       connections accepted meanwhile are counted with that request.
       The manager reads each worker's memory from @filepath{/proc} once a second
       (@secref["preload-memory"]).}
 @item{A worker stops when the manager goes away: it gets SIGTERM from the kernel when its
       parent dies (@tt{PR_SET_PDEATHSIG}), and it also stops when the report socket closes.}
]

In the source (@filepath{fastcgi/private/}), @filepath{cli/serve-cli.rkt} parses the options
into one configuration struct, defined with every option's default in
@filepath{worker/config.rkt}, which also writes it on each worker's command line and reads it
back there; it holds no secret (the secret and the relay key come over the control
socket). @filepath{manager/manager.rkt} is the manager's loop; its pieces each take the pool's
state (@filepath{manager-state.rkt}, all in @filepath{manager/}; each of its fields has one
writer, the module its owner submodule is named after, and @filepath{lifecycle.rkt} alone
moves a process's state): @filepath{manager-workers.rkt} starts and stops
single workers as the process manager (@filepath{pm.rkt}) asks (spawned, or forked by
a generation's loader), @filepath{manager-forks.rkt} takes the forks' answers and
deadlines, @filepath{manager-reports.rkt} applies the workers' and the
loaders' reports, @filepath{manager-exits.rkt} a worker's exit,
@filepath{manager-loader.rkt} a loader's exit and deadline, @filepath{manager-reload.rkt}
reloads, @filepath{manager-canary.rkt} a canary reload's trial and verdict,
@filepath{manager-stacks.rkt} the asks for the running requests' stacks,
@filepath{manager-watch.rkt} is the tick (deadlines, the watchdog, memory),
@filepath{manager-status.rkt} the status board and files, @filepath{manager-gc.rkt} the
manager's own memory, and @filepath{manager-notify.rkt} what it tells systemd (@secref["systemd"];
@filepath{os/sd-notify.rkt} is the notify socket). A loader is @filepath{worker/loader.rkt} (run by
@filepath{worker/loader-main.rkt}); @filepath{os/fork.rkt} forks a worker from it and checks what a
fork cannot share (@filepath{os/runtime-fds.rkt} finds and probes the runtime's own
descriptors, which a forked process replaces); @filepath{os/child-process.rkt} is the manager's handle on a worker,
spawned or forked (the subreaper, the pidfd, memory read from @filepath{/proc}).

@subsection[#:tag "memory"]{What each process holds}

Every Racket process holds Racket's own runtime (the floor a process that loads only
@racketmodname[racket/base] pays) plus every module it loads, so the pool's processes load
only what they use: @exec{raco fastcgi serve} first replaces raco's process (which has
loaded the @exec{raco} commands of every installed collection) with a fresh
@exec{racket .../cli-run.rkt serve ...}: the same process and pid, so a pid file, systemd's
@tt{LISTEN_PID} and the parent that waits for it see no difference. The manager then loads
neither the application nor web-server, and neither it nor a raw app's loader and workers
load @racketmodname[racket/contract], the @racketmodname[json] and @racketmodname[xml]
collections or @racketmodname[racket/lazy-require]: the server writes its JSON and its
status page itself, and @racketmodname[fastcgi] checks its arguments as the contracts in
this manual say, without the contract system.

The app, and for a servlet web-server, is loaded once per generation, by the
generation's loader, and the workers forked from it share what it loaded
(@secref["preload"]): what a worker holds of its own is what it allocates once forked
(its servlet and sessions, its connections and requests, what the app keeps per
process) and the pages of the loaded image it writes to. A worker that loads the app
itself (@DFlag{no-preload}, or an app that leaves at load what a fork cannot share) holds
all of it alone; a servlet worker then loads web-server. @filepath{bench/memory.rkt}
(part of @exec{make bench}) measures each process's proportional set size beside php-fpm's
and the C responder's; @filepath{bench/RESULTS.md} has the figures.

@subsection[#:tag "preload"]{Preloading: workers forked from one loaded app}

By default, @exec{raco fastcgi serve} loads the app once per generation (at start, and
again at each reload) in a @deftech{loader}: a process, named @tt{fastcgi-loader} in
@exec{ps -o comm} and @exec{top}, that loads the app's module and, for a servlet,
web-server and the server's own servlet modules; then makes its heap static: a full
collection, after which every live object moves to Chez Scheme's static generation, which
is never collected again, so that no collection ever copies those objects and their pages
stay shared, copy-on-write, with every process forked afterwards. The manager then asks
it, over its control connection, to fork each of the generation's workers (named
@tt{fastcgi-worker}): at start, to replace a worker that died, to replace one that is
recycled (@DFlag{max-requests}, @DFlag{max-memory}), and when @DFlag{pm} @tt{dynamic} or
@tt{ondemand} adds one. A forked worker has the app loaded already; it makes only what
each worker makes for itself (its servlet and continuation manager, its log files, its
sockets). The log says when a generation has loaded:

@verbatim|{2026-11-27T11:17:34 info [16641] fastcgi: generation 1 loaded once by loader 16643 (a heap of 110 MiB, shared): forking its workers}|

The workers share the loaded image: a page stays shared until a process writes to it
(a module-level value that a worker changes costs that worker a copy of its page), and
what a worker allocates once forked is its own. For @filepath{examples/guess.rkt}, a
servlet, a forked worker's private memory was about 12 MiB after a few requests, where
a worker that loads the app itself holds about 190 MiB of its own; @filepath{bench/RESULTS.md}
has the figures of @exec{make bench}.

@bold{Generations share a base.} A reload loads the app again, in a new loader, and the
old generation's workers live on while they drain their sessions: each generation would
hold a whole image (the runtime, the server's modules, web-server, the app). So at the
first reload the manager starts the pool's @deftech{base} (@tt{fastcgi-base}): a process
that loads the runtime, the worker's modules and, when the first generation's app was a
servlet, web-server and the server's servlet modules, never the app; makes its heap static;
and forks every later loader (a reload's, or one that replaces a dead loader), which then
loads only the app on top. Generations after the first share the base's pages and differ
only by their app. The reload that starts the base waits for it (about a second); if the
base cannot start, finds what a fork cannot share, or dies soon after it started, loaders
load everything themselves, as the first one did; one that dies after serving a while is
replaced. The status gives its pid (@tt{base_pid}).

@bold{After the fork, each worker is a process of its own.} The runtime's @tt{epoll} set
and its wake-up pipe, which the fork leaves shared with the loader and the other workers,
are replaced by fresh ones; the pseudo-random generator (the current one,
@racket[current-pseudo-random-generator]) is reseeded from @filepath{/dev/urandom}, so
that two workers never draw the same @racket[random] sequence; the worker opens its own
control connection to the manager and starts its own heartbeat, event loop and log files,
and its log lines carry its own pid. The fork goes through an intermediate process that
exits at once, so that the worker becomes the manager's child (the manager is a child
subreaper, @tt{PR_SET_CHILD_SUBREAPER}), in a process group of its own; the manager
watches it through a pidfd and collects its exit status. The manager supervises a forked
worker exactly as any other: its exit or SIGKILL, recycling, @DFlag{max-memory}, the
heartbeat and the watchdog, reloads, the session drain, the status (where its
@tt{forked} is @tt{true}). A forked worker's command line, as @exec{ps -o args} shows
it, is its loader's (a fork copies it); its name is @tt{fastcgi-worker}. A worker that
loads the app itself is named @tt{racket}, with @tt{-N fastcgi-worker} on its command line.

@bold{What the fork copies.} Everything the app made while it loaded is copied into every
worker, which then has its own copy:
@itemlist[
 @item{Module-level state (a counter, a cache, a list of posts): each worker starts with
       the value it had in the loader at the fork, and then changes only its own copy, as
       the requests it serves change it (per worker, as always: @secref["continuations"]).}
 @item{Green threads the app starts at load (a @racket[thread] at module level) run in
       every worker, and in the loader too: a thread started at load that writes a line
       to the log each minute writes it once from the loader and once from each worker.
       Start per-process work lazily, on a worker's first request (a promise the handler
       forces), not at load.}
 @item{A pseudo-random generator that the app makes itself at load
       (@racket[make-pseudo-random-generator]) is copied as it is, and only the current
       one is reseeded: every worker would draw the same sequence from it. Make it, or
       seed it, on the first request.}
]

@bold{What a fork cannot share.} Once the app has loaded, the loader checks what it
holds: descriptors besides 0, 1 and 2, its own control connection and the runtime's own
(a file, a socket or a pipe the app opened at load: a database connection made at module
level), OS threads besides the main one (places, futures, or the runtime's own thread
that waits for subprocesses, once one has run), and child processes. When it finds any,
it does not fork: the manager logs one warning line, such as

@verbatim|{2026-11-27T11:18:09 warning [16948] fastcgi: generation 1: loading the app left what a fork cannot share (descriptor 7 open on /srv/app/data.log): each worker loads the app itself}|

and starts that generation's workers as processes of their own, each loading the app, as
with @DFlag{no-preload}; the status shows @tt{preload} @tt{unsafe}. Each generation's
loader checks again: after a reload of an app that opens such things on its first
request instead, the workers are forked.

@bold{A runtime that is not as a fork expects.} A fork rests on what Racket does not
document: the runtime's own epoll set and wake-up pipe, which a forked process replaces
with fresh ones. A loader finds them before it loads the app (exactly one epoll
descriptor, the one where the runtime registers what it is asked to watch; exactly one
pipe of which it holds a read end and a write end, the one from which the runtime takes a
byte written to it). Where they are not so, on a Racket that does otherwise, it neither
loads nor forks, even with @DFlag{preload}: the manager logs one line naming the Racket
version, such as

@verbatim|{2026-11-28T08:13:06 warning [11585] fastcgi: generation 1: Racket 8.18: forking from a loaded image: the runtime's epoll set and wake-up pipe: 2 epoll descriptors (6, 9), expected 1: each worker loads the app itself}|

and the workers load the app themselves, as above (the status shows @tt{preload}
@tt{unsafe}).

@bold{The options.} @DFlag{preload} forks all the same, and logs what it found
(@tt{generation 1: @literal{--preload}: forking all the same, though loading the app
left what a fork cannot share: ...}): the loader and every worker then share those
descriptors (one file offset, one connection: queries that several workers send on one
database connection at once get mixed up), the workers have none of the loader's other
OS threads (a fork copies only the thread that forks), and its child processes stay its
own. Use it only for what is harmless to share (a file opened for appending and flushed
at load, say: a port's unwritten buffer is copied into every worker too).
@DFlag{no-preload} never preloads: each worker loads the app itself (the status shows
@tt{preload} @tt{off}).
@DFlag{single-process} and @DFlag{check} load the app in their one process, and so does
@exec{raco fastcgi dev}. A manager that cannot make itself the subreaper (the kernel
refuses) logs @tt{cannot become the subreaper of the workers: each worker loads the app
itself} and runs as with @DFlag{no-preload}.

@bold{The loader's life.} A loader serves no request: it holds the listening socket as
fd 0, which the workers it forks inherit, and never accepts on it.
@itemlist[
 @item{A loader that cannot load the app (it raises, it provides no handler, it calls
       @racket[exit], it is killed while it loads) fails the start as a worker that
       cannot load it does (@secref["fail-fast"]: @exec{serve} exits with status 1), or
       the reload
       (@exec{raco fastcgi ctl reload} exits 1; the old generation goes on serving:
       @secref["signals"]). One that has not loaded it within @DFlag{start-timeout}
       seconds is killed, with the same outcome.}
 @item{A loader that dies once it has loaded the app (killed, say) is replaced at once:
       the manager logs @tt{loader 4242 of generation 1 exited (killed by SIGKILL): a new
       one loads it}, counts it in @tt{loader_restarts} and starts a new loader for that
       generation, which loads the app file as it is then. The workers already running
       are not touched, and serving goes on; the workers asked for meanwhile are forked
       once the new loader has loaded. A new loader that cannot load the app (the file
       changed on disk since, say) logs @tt{loader of generation 1: cannot load ...; its
       workers start as processes of their own}, and they do.}
 @item{When 3 loaders of a generation in a row die within 10 seconds of their start,
       the generation's workers are started as processes of their own from then on, each
       loading the app: an error line says so (@tt{...: its workers start as processes of
       their own}), and the status shows @tt{preload} @tt{fallback}. A loader that dies
       after 10 seconds starts the count again.}
 @item{The manager never waits for a fork: it asks, and serves its signals, the status,
       exits and other forks meanwhile; the worker is in the pool from the loader's
       answer on (what it reported before that answer is held and applied then). A
       loader (or the base) that does not answer a fork within 5 seconds is killed: that
       worker (or loader) is started as a process of its own, and a new loader takes the
       killed one's place. A process forked all the same, whose answer comes after the
       deadline, and one that reports but is never answered for (10 seconds), are
       stopped: no process serves on the socket untracked. The status counts them
       (@tt{untracked stopped}, @tt{untracked_stopped}).}
 @item{At a reload, the old generation's loader stays while workers of its generation
       live (they drain their sessions): they go on sharing its image, and it costs nothing
       beyond it; it stops when the last of them has exited. At a stop, the loaders stop
       first (they hold the listening socket too). A loader also stops when the manager
       dies.}
]

@subsubsection[#:tag "preload-memory"]{Reading memory: resident, shared, private}

The status (@secref["status"]) shows three figures for each worker:
@itemlist[
 @item{@tt{memory}: its resident memory (RSS, @tt{VmRSS} of @filepath{/proc/PID/status}),
       every page it maps that is in memory, shared or not;}
 @item{@tt{shared_memory}: the part of it that other processes map too (@tt{Shared_Clean}
       plus @tt{Shared_Dirty} of @filepath{/proc/PID/smaps_rollup}): for a forked worker,
       mostly the loaded image;}
 @item{@tt{private_memory}: resident memory less the shared part, what the worker holds
       alone and its exit would free. @DFlag{max-memory} and @DFlag{max-memory-hard}
       compare this figure, for every worker, forked or not.}
]
A sum of the workers' resident memory counts the shared image once for each worker. What
a pool costs is the sum of each process's proportional set size (PSS, where a page that
k processes share counts 1/k in each), which @filepath{bench/memory.rkt} reports; it is
about the loader's resident memory (@tt{image_memory}) plus each worker's private memory
plus the manager's.

Resident memory is cheap to read, and is read once a second (with @DFlag{max-memory} or
@DFlag{max-memory-hard}, 4 times a second). The shared part is not: the kernel walks every
page to answer @filepath{smaps_rollup} (milliseconds for a servlet worker), so it is read
for each worker at most every 5 seconds; in between, private memory is resident memory
now less the shared part last read. Pages shared at the fork only ever become private, so
this never overstates private memory: memory a worker allocates counts at the next
reading, and pages it stops sharing (those it writes to, those whose other holders have
exited) within 5 seconds.

A page is shared while another process maps it. An old generation's loader lives while
its workers drain after a reload, so they go on sharing its image. A worker forked from a
loader that has since died (killed, and replaced by a new one) shares the old image only
with its fellow workers of that loader: the last of them shares it with no one, and its
private memory is then about its whole resident memory. @DFlag{max-memory} recycles only
a worker that serves, but the hard ceiling applies to a draining worker too.

@subsection[#:tag "pm"]{Process managers}

@itemlist[
 @item{@DFlag{pm} @tt{static} (the default): always @DFlag{workers} processes (default:
       the number of cores).}
 @item{@DFlag{pm} @tt{dynamic}: starts @DFlag{min-spare} workers, and starts more when
       fewer than @DFlag{min-spare} are idle (an idle worker has no request in flight),
       up to @DFlag{max-workers} in all; when more than @DFlag{max-spare} are idle, it
       stops the one idle longest, at most four a second. Each time it wants a worker
       past @DFlag{max-workers}, the status counts it under @tt{max workers reached}.}
 @item{@DFlag{pm} @tt{ondemand}: the manager watches the listening socket; when a
       connection waits and no worker is idle or starting, it starts one, up to
       @DFlag{max-workers}. A worker idle for @DFlag{idle-timeout} seconds is stopped.
       One worker starts at start and at each reload all the same, so that the code is
       known to load before the pool is said to serve (@secref["fail-fast"]) or the
       reload done; with no request, it stops after @DFlag{idle-timeout} like any other.}
]

How many workers: one per core, the default, suits handlers that compute. In the
benchmark (@filepath{bench/RESULTS.md}, 2 cores), a CPU-bound handler served 1.88 times as
many requests a second with 2 workers as with 1. Handlers that do little per request
can do better with fewer workers when the front runs on the same cores. In the same run,
hello world through nginx on those 2 cores answered 20,656
requests a second with @DFlag{workers} @tt{1} and 14,659 with @DFlag{workers} @tt{2}.
Measure your own app behind your own front before choosing.

Workers are stopped gracefully: a worker stops accepting and finishes the requests it
holds for up to @DFlag{graceful-timeout} seconds; the manager kills it (SIGKILL) 2
seconds after that bound. What becomes of its kept connections follows the rule of
@secref["operations"]: a worker that is replaced (a reload, a recycle, scaling down)
hands each to a worker that goes on serving once nothing is live on it, and serves
whatever arrives on it until then, newcomers on a multiplexed connection included; a
worker that stops with the pool answers what arrives on a kept connection and closes the
connection after that answer (a new request on a connection that already has another in
flight, HAProxy's multiplexing, is answered 503), and closes one still idle after the
drain timeout.

Every deadline and interval, in the manager and in the workers, runs on the monotonic
clock: the connection and request timeouts of @secref["limits"], the keepalive idle time,
@DFlag{graceful-timeout}, @DFlag{start-timeout}, @DFlag{session-drain}, the drain of a
closing connection, the memory checks of @DFlag{max-memory}, the refresh of the status,
and the pause after crashes. A step of the wall clock (NTP, a virtual machine resumed,
@exec{date -s}) forward or back fires none of them early and delays none. The wall clock
is read only for a time that is shown, when it is shown: log lines, the HTTP @tt{Date},
and the status page's @tt{start_time}, which is the wall clock now less the uptime (after
a step, the start as the wall clock now reads it). @filepath{tests/clock-step-test.rkt}
steps the wall clock of a running pool an hour forward and two hours back.
Two timers that belong to @racketmodname[web-server] read the wall clock: the ageing of
the default continuation manager (serve/servlet's LRU manager: a session loses one of its
24 life points each 10 minutes) and the HTTP connection timer of @exec{raco fastcgi dev}.
A step forward ages every session by one point at most (the timer fires once, then counts
from the new time); a step back pauses the ageing for the length of the step, while the
sessions' memory bound (@DFlag{servlet-memory}, ours) goes on, on the monotonic clock.

@subsection[#:tag "recycle"]{Replacing workers}

@itemlist[
 @item{@bold{A worker that dies} (a crash, SIGKILL, the out-of-memory killer) is replaced
       at once; the requests it held are lost with it, and no other. A worker that dies
       less than 10 seconds after it started, or before it was ready, counts as a crash:
       from the second crash in a row the manager waits before the next start, 0.1 s and
       then twice as long each time, up to 30 s, and logs an error line with the pause
       (@tt{next start in 0.4 s}). A worker that lived longer resets the count, and so
       does a worker started after the last crash once it has lived 10 seconds.}
 @item{@bold{Recycling}: a worker that has taken @DFlag{max-requests} requests (handed to the app), or
       whose private memory (@secref["preload-memory"]) passes @DFlag{max-memory}, is
       replaced gracefully: the manager starts a fresh worker first (forked from the
       generation's loader, @secref["preload"]), and only when that one is ready does the
       old one drain and exit. The old worker goes on serving meanwhile, so the limits are
       soft by the time a new worker takes to start (to load the app, for one that is not
       forked). Workers waiting to be recycled are replaced one at a time: the next
       replacement starts once no other worker of the pool is starting, so workers that
       grow alike and pass @DFlag{max-memory} together (or reach @DFlag{max-requests}
       together) are not all replaced at the same moment, and the others serve on
       meanwhile. With
       @DFlag{max-requests-jitter} @nonterm{n}, each worker draws its own limit when it
       starts, uniformly between @DFlag{max-requests} and @DFlag{max-requests} plus
       @nonterm{n} (from the kernel's random source: workers started in the same
       millisecond draw apart), as gunicorn's @tt{max_requests_jitter} does: the workers
       of a pool, or of a reload's generation, all start together and would otherwise all
       be replaced together.
       A replacement draws again. The status shows each worker's limit
       (@tt{max_requests}).}
 @item{@bold{Past the hard ceiling}: a worker whose private memory passes
       @DFlag{max-memory-hard} (by default twice @DFlag{max-memory}; with neither, no
       ceiling) is not waited for, since a handler that allocates without bound would go
       on growing while its worker drains behind it. The manager logs a warning such as
       @tt{stopping worker 4242 at once (SIGKILL in 1 s): memory 612 MiB over the hard
       ceiling of 600 MiB (2 x --max-memory)}, starts a replacement, and sends the worker
       SIGTERM, so that the requests it holds that can finish within a second do; then
       SIGKILL. What is still in flight is lost with it (nginx answers 502). It counts in
       the status's @tt{recycled}. The ceiling applies to a draining worker too. With
       either option, the manager reads the workers' resident memory 4 times a second,
       else once a second, and their shared part every 5 seconds
       (@secref["preload-memory"]).}
 @item{@bold{A worker that is not ready} within @DFlag{start-timeout} seconds is killed
       (and counts as a crash); so is a loader that has not loaded the app by then
       (@secref["preload"]).}
 @item{@bold{A worker that falls silent}: once ready, every worker sends the manager a line
       each second from a Racket thread of its own. That thread stops exactly when the
       worker cannot serve: the process is frozen or stopped (SIGSTOP), or its whole VM
       is held by a foreign call made without @racket[#:blocking? #t] (no Racket thread
       runs until the call returns, the accepting ones included). After 3 seconds without
       a line the worker shows as @tt{late} on the status (its state, and
       @tt{late_workers}). With @DFlag{request-timeout}, the manager kills it with SIGKILL
       once its oldest request (which each worker reports when it changes) has run past
       the request timeout plus 4 seconds while the worker was silent for 3 seconds or more,
       or once it has been silent for the request timeout plus 4 seconds (it froze before
       it could report the request: its last line came before the request began). So a
       request on a frozen worker, and every request on its connections, is settled (an
       answer from the front, or a closed connection) within the request timeout plus
       about 4.3 seconds. The 4 seconds outlast a worker's longest silence that is not a
       fault, a major collection: 1.5 seconds for a worker holding 1.4 GiB here
       (@filepath{bench/OPTIMISATIONS.md}); a worker holding several GiB may need a longer
       @DFlag{request-timeout}. Without @DFlag{request-timeout} it is killed after 60 plus
       10 seconds of silence. The manager logs @tt{worker 1234 sent nothing for 5 s
       (frozen, stopped, or blocked in a foreign call): killing it (its oldest request has
       run 5 s; --request-timeout 1)}, counts it under @tt{unresponsive_kills} and starts
       its replacement at once. The requests on its connections fail with it (the front sees
       the connection close; nginx answers 502); connections still waiting in the listen
       queue are accepted by the other workers or by the replacement, so none waits
       without bound.}
 @item{@bold{A handler that hangs}: with @DFlag{request-timeout}, the handler's thread
       gets a break, the front gets 503, and the worker goes on (@secref["limits"]). A
       handler that ignores the break (breaks disabled, a foreign call) has its request
       ended 5 s later, still with a 503 when nothing of its answer had left; if its
       thread is still running 10 s after that, the worker cannot get it back and asks to
       be replaced, as for @DFlag{max-requests}.}
 @item{@bold{A handler that allocates without bound, or calls @racket[exit]}: its
       request ends and the worker goes on (@secref["runaway"]).}
]

@subsection[#:tag "runaway"]{Runaway handlers: memory and exit}

A handler that runs away ends its own request, not the process that serves it.

@bold{Memory.} With @DFlag{request-memory} (the @racket[#:request-memory] limit; under
@exec{raco fastcgi serve}, @DFlag{max-memory} sets it to the same size when it is not
given: one request may hold the worker's whole share, and a runaway one is ended alone
instead of taking the worker, and every request on it, past the hard ceiling), each
handler runs in a thread of its own under a custodian of its own, limited with
@racket[custodian-limit-memory]. Racket charges that custodian with the memory its
threads (the handler's, and those it starts) reach and the rest of the process does not,
and shuts it down when a major collection finds it over the limit: its threads are killed
wherever they are, and the request is answered 500 (or, when some of its answer has left,
ended with application status 1, a truncated answer). One warning is logged, such as
@tt{request 1 from unix GET /leak: over --request-memory 50 MiB: ended}; the other requests
and the worker go on. Notes:
@itemlist[
 @item{What a handler adds to something the process keeps (a cache, a session, a global)
       is the process's, not the request's: it is not counted, and @DFlag{max-memory} and
       the hard ceiling are the bound for that.}
 @item{The limit is checked at major collections, and Racket starts one only when the
       heap has about doubled since the last: a handler that allocates fast would hold
       twice the limit and more before it is ended. So, with a limit, a thread of the
       worker reads the heap's size every 10 ms while it grows, and down to every 160 ms while it
       does not (a read costs nanoseconds), and starts a major
       collection whenever the heap has grown by an eighth of the limit (16 MiB at least)
       since the last one: a handler is ended within about that of its limit, plus what it
       allocates between two looks, whatever its rate. A handler that allocated 400 MiB a second under @DFlag{max-memory}
       @tt{300m} was ended with its worker's private memory at 350-368 MiB, the requests
       beside it answered (it reached 985 MiB before, past the default hard ceiling of
       600 MiB). An app whose live memory grows fast pays a major collection per eighth
       of the limit it grows by.}
 @item{A killed thread gives back nothing it held. A lock of the application's own that it
       held stays taken, as after @racket[kill-thread] (prefer kill-safe abstractions). A
       handler killed in the middle of a send has its connection closed, since a record
       may be half written; the front then answers 502.}
 @item{Threads that a handler starts stay under its custodian, and its limit, after the
       request has ended.}
 @item{The cost: each request gets a custodian and two threads (one waits for the
       handler's), runs in a thread of its own rather than in the thread that reads its
       connection (@secref["apps"]), and every major collection also accounts for the
       memory of the custodians. Without the limit none of this is made.}
]

@bold{exit.} A call of @racket[exit] in a handler (in the thread that runs it: a raw
handler, a servlet, with or without a memory limit) ends that request as a raised
exception would (@secref["servlets"]): a 500 page when nothing of its answer has left,
else @wire{END_REQUEST} with application status 1, and a warning such as
@tt{request 1 from unix GET /exit: handler called exit: request ended}. The process goes
on serving, as under @racketmodname[web-server]'s servlet dispatcher. In a thread that a
handler started (at any time, during its request or after), @racket[exit] ends that
thread only, with a warning such as @tt{request 1 from unix GET /jobs: a thread its handler
started called exit: that thread ended}; under the servlet dispatcher too, such threads
inherit the exit handler, and the process goes on. Elsewhere (while the application
loads, in a thread started then) @racket[exit] does what it always does: the process
exits, and the manager replaces the worker. With preloading, the app loads in the
generation's loader, and a thread started at load runs there too: a loader that exits
while it loads has not loaded the app, and one that exits later is replaced
(@secref["preload"] says what follows either way).

@subsection[#:tag "fail-fast"]{Fail fast, fail loud}

A server that cannot work says so at once, in one line, and exits; it does not leave a
socket that accepts connections and never answers.

@itemlist[
 @item{@bold{Before it listens}, @exec{raco fastcgi serve} opens the @DFlag{access-log},
       @DFlag{slow-log} and @DFlag{pid-file} files for appending and closes them again (a
       file that was not there is removed). One that cannot be opened ends the command
       with exit status 1 and one line naming the option, such as
       @tt{raco-fastcgi: --access-log /var/log/app/a.log: cannot open it for writing: No
       such file or directory}. An address it cannot listen on ends it the same way
       (@tt{cannot bind 127.0.0.1:9000: Address already in use}).}
 @item{@bold{Until a worker has been ready once}, a worker that cannot start ends the
       manager: the app raises while it loads or provides no handler, a log file cannot be
       opened, or @DFlag{start-timeout} passes; so does a generation's loader that cannot
       load the app (@secref["preload"]). The worker or the loader tells the manager why
       over its report socket; the manager logs one line, such as @tt{fatal [1234]
       fastcgi: cannot start: cannot load /srv/app.rkt: app: no database}, kills the
       other workers that were starting and the loader, removes the socket file, the pid
       file and the status file, and exits with status 1, as soon as the loader or the
       first worker fails (the time it takes to load the app). With @DFlag{pm}
       @tt{ondemand} too: one worker starts at start for this.}
 @item{@bold{After a good start}, workers that die are replaced with the pause of
       @secref["recycle"] and the manager lives on (a database down for a while must not
       stop the pool). The manager's log line names the reason a worker gave
       (@tt{worker 1240 exited unexpectedly (exit status 3) after 0.3 s: cannot load
       ...}), and the status shows @tt{start_failures} (workers in a row that died before
       they were ready or soon after) and @tt{last_start_error}.}
]

@DFlag{check} does what a start would do without serving: the options are parsed and
their values checked, the log and pid files are opened as above, the listen address is
parsed and, for a unix socket, its folder must exist and @DFlag{socket-owner} and
@DFlag{socket-group} must name a known user and group; the app is loaded in this process
as a worker loads it, with the same limits and servlet settings. Whether the app leaves
at load what a fork cannot share is not checked (@secref["preload"]): the start's log
says so. It prints
@tt{raco fastcgi serve: configuration ok: /srv/app.rkt loads (raw handler; roles
(responder)), listen unix:/run/app.sock} and exits 0, or prints the one line that a start
would and exits 1. It does not bind the address: a running server holds it (checking a
new configuration before a reload is the point), and a check must not leave a socket file
behind. An app whose module starts something when it loads (a thread, a connection) does
so during the check too.

@subsection[#:tag "signals"]{Signals and reload}

@itemlist[
 @item{@bold{SIGTERM} or @bold{SIGINT} to the manager: it closes its listening socket
       (removing the unix socket file), the loaders stop (@secref["preload"]), every
       worker drains as above, and the manager
       exits with status 0 once they are gone, removing its pid file. A second SIGINT
       (Ctrl-C twice) kills the workers at once.}
 @item{@bold{SIGHUP}: a zero-downtime reload. The manager starts a new generation:
       its loader loads the app file afresh (so code changes take effect) and forks its
       workers (@secref["preload"]; without preloading, each new worker loads the file
       itself); when every one of them is ready, the old generation drains and exits, and
       its loader stops. The listening socket stays open throughout. If the new code does
       not load (the new loader fails, or a new worker dies before it is ready), the
       reload fails: the new generation is stopped, the old one goes on
       serving, the status counts @tt{reload failures} and shows why in
       @tt{last_reload_error}. Reloads run one at a time: a SIGHUP that comes while one is
       under way starts another reload once that one is done or has failed (several such
       SIGHUPs make one), so the code on disk at the last SIGHUP is what serves in the
       end. With @DFlag{canary}, a reload goes through a canary first:
       @secref["canary"].}
 @item{@bold{SIGUSR1}: reopen the log files (for logrotate). The manager passes it on to
       every worker as SIGHUP, which workers take as ``reopen your log files''.}
]

Racket turns SIGINT, SIGTERM and SIGHUP into breaks of the main thread, but not when the
process was started with them ignored or blocked, and has no way to catch SIGUSR1, whose
default action ends the process. The manager therefore takes all four itself, through the
FFI: before it starts any other OS thread, it blocks them in its signal mask with
@tt{sigprocmask} (threads created later inherit the mask) and reads them from a
@tt{signalfd}, which a green thread waits on like any file descriptor; what it inherited
does not matter (@secref["where"]). Its workers start with an empty mask and the default
dispositions, and take SIGHUP, SIGTERM and SIGINT as Racket does.

For scripts and systemd units, @exec{raco fastcgi ctl} does the same by pid file:

@commandline{raco fastcgi ctl status|reload|stop|stacks --pid-file FILE [--timeout SECS] [--json] [--canary SECS]}

@itemlist[
 @item{@exec{status} prints the pool's status (text, or JSON with @DFlag{json}) from
       @filepath{FILE.status.json}, which the manager rewrites while anything changes
       (and at least once a second), writing the pid file again too if it was removed.}
 @item{@exec{reload} sends SIGHUP and waits until the new generation serves (exit status
       0) or the reload failed (exit status 1, with the reason on stderr). It waits for
       the reload that answers its own SIGHUP, which is the one after the reload under
       way, if there was one: the manager publishes how many reloads it was asked for
       (@tt{reload_asks}) and how many of them the last finished reload answers
       (@tt{reload_settled}). On failure it prints, for example, @tt{raco fastcgi ctl:
       reload failed: cannot load /srv/app.rkt: app: broken; generation 2 goes on
       serving} (the loader's failure), or @tt{raco fastcgi ctl: reload failed: a worker
       of generation 3 died before it was ready: cannot load /srv/app.rkt: app: broken;
       generation 2 goes on serving} (a worker's, without preloading). Two @exec{ctl reload}
       run at the same moment may both be answered by the same reload.}
 @item{@exec{reload --canary} @nonterm{secs} asks for this one reload through a canary
       on trial for @nonterm{secs} seconds (@secref["canary"]), on the manager's control
       socket rather than by SIGHUP (so it must run as the pool's user); it waits as
       @exec{reload} does, and a rollback is a failure (exit status 1, the line on stderr).}
 @item{@exec{stacks} prints what every running request does now (text, or JSON with
       @DFlag{json}): @secref["stacks"].}
 @item{Before it sends a signal, @exec{reload} and @exec{stop} check that the process
       runs @tt{fastcgi}: a pid file written inside a container holds the manager's pid in
       the container's PID namespace (1, say), which outside it names another process
       (@secref["where"]). They refuse with @tt{raco fastcgi ctl: process 1 (from FILE) is
       not a raco fastcgi manager (it runs /sbin/init): a pid file written in another PID
       namespace (a container) holds a pid of that namespace; run ctl inside it}.}
 @item{@exec{stop} sends SIGTERM and waits until the manager has exited (status 0), or
       @DFlag{timeout} seconds (default 60; status 1).}
]

The @filepath{deploy/systemd} folder of the repository holds a service unit that uses
them, and a socket-activation example (a @tt{.socket} unit whose socket the manager
receives as fd 3 and hands to its workers).

@subsection[#:tag "systemd"]{Under systemd}

When @tt{NOTIFY_SOCKET} is set in its environment, as systemd sets it for a
@tt{Type=notify} service, the manager speaks systemd's notify protocol (sd_notify(3))
itself, without libsystemd: datagrams on an @tt{AF_UNIX} socket to the path the variable
names (a leading @litchar["@"] names one in the abstract namespace). The units in
@filepath{deploy/systemd} use @tt{Type=notify}, @tt{NotifyAccess=main} and
@tt{WatchdogSec=30s}. It sends:

@itemlist[
 @item{@tt{READY=1} once every worker of the first generation is ready, the point from
       which a worker that dies no longer ends the manager (@secref["fail-fast"]); with
       @DFlag{pm} @tt{ondemand}, the one it starts at start. @exec{systemctl start} returns then, and the
       units ordered after this one start when the pool serves.}
 @item{@tt{RELOADING=1} with @tt{MONOTONIC_USEC} (@tt{CLOCK_MONOTONIC}, read with
       @tt{clock_gettime}) when a reload starts (SIGHUP or @exec{raco fastcgi ctl
       reload}), and @tt{READY=1} when the new generation serves, or when the reload
       failed and the old generation goes on serving, which the status line then says.
       @tt{Type=notify-reload}, where systemd sends the SIGHUP itself, needs systemd 253;
       Debian 12 has 252, so the units keep @tt{ExecReload=raco fastcgi ctl reload}.}
 @item{@tt{STOPPING=1} when a graceful stop begins (@secref["signals"]).}
 @item{@tt{STATUS=} lines, which @exec{systemctl status} shows, such as @tt{4 workers (3
       idle, 1 busy), 1520 requests served, generation 2}, followed by the starting, late
       and stopping workers, a reload under way, the last reload's failure and a stop in
       progress; sent again when the line changes, at most about once a second.}
 @item{@tt{WATCHDOG=1} at half of @tt{WATCHDOG_USEC} (systemd's @tt{WatchdogSec=}),
       when @tt{WATCHDOG_PID} is unset or is the manager's pid, while the pool is
       healthy. When every worker is @tt{late} (@secref["recycle"]: frozen, stopped,
       blocked in a foreign call) the manager withholds it, logs @tt{every worker is late:
       the pool is stuck; systemd's watchdog is not fed} and says so in the status line;
       a frozen manager sends nothing either. Either way systemd kills the service and,
       with @tt{Restart=on-failure}, starts it again. A pool with one worker still
       answering is the manager's to mend: it kills and replaces the silent ones itself.}
]

The manager reads the three variables (@tt{NOTIFY_SOCKET}, @tt{WATCHDOG_USEC},
@tt{WATCHDOG_PID}) and removes them from the environment before it starts any worker, and
its socket is close-on-exec: no worker, nor a program a handler starts, can speak for the
service. A datagram that cannot be sent (systemd gone, its queue full) is dropped, never
waited for, and logged once (@tt{cannot notify systemd at /run/systemd/notify: ...}) until
one is sent again; an address that is neither an absolute path nor @litchar["@"]@tt{name}
is logged once and ignored. Without @tt{NOTIFY_SOCKET} nothing of this happens.
@DFlag{single-process} (no manager) notifies too, with the same unit: @tt{READY=1} with
@tt{STATUS=serving unix:/run/app.sock, single process} once the app is loaded and the
socket serves, @tt{WATCHDOG=1} at half of @tt{WATCHDOG_USEC} from a thread of its own
(which a process frozen whole stops: systemd then restarts it), and @tt{STOPPING=1} at a
graceful stop; it removes the variables from its environment at start, as the manager
does. There is no reload to announce: its SIGHUP reopens the log files.

@subsection[#:tag "spawned"]{Spawned by the web server}

lighttpd (@tt{bin-path}) and Apache's @tt{mod_fcgid} can start the application
themselves, with a listening unix socket as its fd 0. @exec{raco fastcgi serve app.rkt},
given no @DFlag{listen}, finds that socket, and the manager runs its pool on it with the
same options as anywhere else; the status shows @tt{listen: fd:0}. When the web server
stops it (SIGTERM), the manager stops its workers and exits. Such a server often runs
several copies itself (lighttpd's @tt{max-procs}), so @DFlag{workers} @tt{1} (or
@DFlag{single-process}) may suit it better than the default.

@subsection[#:tag "where"]{Where it runs}

@bold{Racket versions.} @exec{make test} runs the whole suite on Debian 12's Racket 8.7,
then the unit tests and the nginx integration tests on the newest Racket Debian ships
(sid's, 8.18), in a chroot that @filepath{tools/racket-chroot.sh} makes with
@exec{debootstrap} and keeps for the next run; @exec{make test-racket} runs the same on
bookworm-backports' 8.14 and trixie's 8.16. The web-server modules the server builds on
are byte-identical from 8.7 to 8.18.

@bold{What it inherits.} A process inherits across @tt{exec} its ignored signals (under
@exec{nohup}, SIGHUP; a non-interactive shell's background job, SIGINT and SIGQUIT), its
blocked signal mask (some supervisors hand one down) and every descriptor without
close-on-exec (whatever the shell held). None of this changes what the server does:
@itemlist[
 @item{The manager takes SIGHUP, SIGINT, SIGTERM and SIGUSR1, @DFlag{single-process}
       SIGHUP, SIGINT and SIGTERM, and @exec{raco fastcgi dev} SIGHUP, SIGINT and SIGTERM
       (each of which stops it): it blocks them and reads them from a @tt{signalfd}
       (@secref["signals"]), which works whatever their inherited disposition and mask,
       sets their dispositions to the default ones (so that no worker inherits an ignored
       SIGHUP) and unblocks every other signal. It logs what it found, such as
       @tt{started with SIGHUP ignored: the manager handles them all the same}.}
 @item{Every program the server starts (workers, loaders, and the programs a handler or
       an app starts with @racket[subprocess], @racket[system] or @racket[process]) gets
       descriptors 0, 1 and 2 and nothing else; a worker gets the listening socket as its
       fd 0. Racket 8.12 and later pass every inherited descriptor that lacks
       close-on-exec to a subprocess by default, where 8.7 passed none: the server sets
       @racket[current-subprocess-keep-file-descriptors] to @racket['()] in the manager,
       the loaders, the workers and the dev front, so both behave as 8.7. A handler that
       means to pass a descriptor to a program can @racket[parameterize] it.}
 @item{The manager is the subreaper of its descendants (with preloading, the default), or
       PID 1 in a container: a program a handler starts that leaves a process behind (a
       daemonizing tool, @tt{sh -c 'job &'}) makes that process the manager's child when
       its parent exits. The manager reaps every such process once it exits, at most a
       quarter of a second later, and counts them: @tt{orphans reaped} in the status
       (@tt{orphans_reaped}, a counter in the metrics). @DFlag{single-process} reaps
       nothing of the kind: it cannot tell an orphan from a process its app started and
       will wait for. As PID 1, run the manager, or give the container an init
       (@exec{docker run --init}).}
]

@bold{What it takes from Racket's insides.} The server relies on a few things Racket and
web-server do not document: web-server's unchecked request, header and response
procedures (the @tt{private} submodules of @tt{web-server/http/request-structs} and
@tt{response-structs}), its request reader for form bodies, Chez Scheme's
@tt{make-bytevector}, @tt{$object-address} (the zero-copy send) and
@tt{heap-reserve-ratio}, Racket's @tt{parameterization-key}, and, for preloading, the
runtime's own epoll set and wake-up pipe. Each is checked once, when its module loads (an
arity, a value built and read back, a probe: a few bytes over a socket pair, a byte
through the wake-up pipe). Where one is not as expected, the server logs one warning
naming the Racket version, such as @tt{fastcgi: Racket 9.0: web-server's unchecked
request constructor: takes 9 arguments, expected 8: using the contracted one}, and takes
the documented or portable way (the contracted procedure, a copying send, zeroed buffers,
per-worker loading instead of forking), or refuses what it cannot do right (a form body it
cannot read as web-server does: 400; a web-server whose request struct has another number
of fields: at load). On 8.7 and 8.18 every check holds and no such line appears.

@bold{Containers.} @filepath{deploy/container/Dockerfile} runs @exec{raco fastcgi serve}
as the container's PID 1 on Debian's @tt{racket} package. As PID 1 the kernel hands it
only the signals it handles: it handles SIGTERM (@exec{docker stop}: a graceful stop, exit
status 0), SIGINT (the same), SIGHUP and SIGUSR1, and it reaps every orphan of the
container, so no @exec{--init} is needed. Run @exec{raco fastcgi ctl} inside the
container (@exec{docker exec NAME raco fastcgi ctl reload --pid-file /run/fastcgi.pid}):
the pid file holds the pid the manager has in the container. No container engine runs
where the tests run: @filepath{tests/container-test.rkt} runs the Dockerfile's command as
PID 1 of a PID namespace of its own (@exec{unshare --pid --fork --mount-proc}).

@subsection[#:tag "status"]{Status and ping}

With @DFlag{status-path} @tt{/status}, a request whose path (the @wire{REQUEST_URI} up
to any @litchar{?}, or @wire{SCRIPT_NAME} when there is no @wire{REQUEST_URI}) is
@tt{/status} is answered by the worker that receives it, with the status it asks the
manager for over the control socket, and never reaches the app. The query string picks the format: nothing (text),
@tt{?json}, @tt{?openmetrics} (OpenMetrics 1.0, content type
@tt{application/openmetrics-text; version=1.0.0}, which Prometheus scrapes), @tt{?prometheus}
(the same series in the older Prometheus text format 0.0.4, where a counter's family is
named with its @tt{_total}: what @exec{promtool check metrics} and older scrapers read), or
@tt{?html} (a page that refreshes itself every 2 seconds). With @DFlag{ping-path} @tt{/ping}, that path answers
@tt{pong}. Expose both only to the people who should see them (in nginx, a
@tt{location = /status} with @tt{allow}/@tt{deny}).

The JSON object has these fields (the text and HTML formats show the same):
@tt{pool} (the app file's name), @tt{pm}, @tt{listen}, @tt{master_pid},
@tt{start_time} (Unix seconds: the wall clock now less the uptime), @tt{uptime} (seconds), @tt{generation} (1, plus one per
reload), @tt{preload} (how the serving generation's workers start, @secref["preload"]:
@tt{off} with @DFlag{no-preload}, @tt{loading} while its loader loads the app,
@tt{forked} from its loader, @tt{unsafe} when loading the app left what a fork cannot
share, @tt{fallback} when its loader failed or kept dying: in the last two, each worker
loads the app itself), @tt{loader_pid} (the serving generation's loader while it loads or
forks; @tt{null} otherwise),
@tt{image_memory} (the loader's resident memory in bytes: the image its workers share;
@tt{null} when no loader runs), @tt{loader_restarts} (loaders started again after one
died), @tt{base_pid} (the pool's base once it serves, @secref["preload"]; @tt{null} before
the first reload and without one), @tt{accepted_connections}, @tt{requests}, @tt{listen_queue} (connections waiting
in the accept queue: TCP only, read from the socket's @tt{TCP_INFO}; @tt{null} for a unix
socket), @tt{active_workers} (with a request in flight), @tt{idle_workers},
@tt{total_workers} (starting and draining included), @tt{late_workers} and
@tt{unresponsive_kills} (workers that stopped reporting, and those killed for it:
@secref["recycle"]), @tt{max_active_workers} (since
start, sampled 4 times a second), @tt{max_workers_reached}, @tt{slow_requests},
@tt{shed_requests} (answered 503 at once because a worker was overloaded:
@secref["shedding"]), @tt{log_dropped} (log lines dropped because their log was not being
read: @secref["log-stall"]), @tt{restarts} (workers started again after an unexpected exit), @tt{recycled},
@tt{reloads}, @tt{reload_failures}, @tt{reload_asks} (SIGHUPs received),
@tt{reload_settled} (how many of those the last finished reload answers),
@tt{last_reload_error} (why the last reload failed; @tt{null} when it worked),
@tt{start_failures} and @tt{last_start_error} (@secref["fail-fast"]; 0 and @tt{null} again
once a worker started after the last failure has lived 10 seconds), and @tt{workers}: one object per worker process with
@tt{pid}, @tt{id} (its number in the pool, from 1 up, which its continuation ids carry:
@secref["continuations"]; in the JSON only), @tt{state} (@tt{starting}, @tt{idle}, @tt{busy}, @tt{draining}, or @tt{late}:
silent for 3 seconds or more, see @secref["recycle"]),
@tt{generation}, @tt{requests}, @tt{active}, @tt{connections}, @tt{shed},
@tt{queue_delay} (milliseconds of CPU work its running handlers have ahead, as
@secref["shedding"] estimates it), @tt{memory} (resident bytes), @tt{private_memory} (resident
bytes less the shared ones: what @DFlag{max-memory} compares), @tt{shared_memory}
(resident bytes it shares with other processes, read every 5 seconds;
@secref["preload-memory"]), @tt{forked} (@tt{true} when its loader forked it; in the
JSON only), @tt{max_requests} (the
limit it drew, @secref["recycle"]; @tt{null} without @DFlag{max-requests}),
@tt{oldest_request} (seconds its oldest request under way has run, as of its last report,
which the watchdog times from: @secref["recycle"]; @tt{null} with none; in the JSON only),
@tt{start_time} and @tt{uptime}. A worker's counters are as fresh as its last
report (0.1 s).

The request metrics, on the pool and on each worker: @tt{request_duration_seconds}
(from @wire{BEGIN_REQUEST} to the end of the answer), @tt{queue_time_seconds} (how long a
request waited before a worker took it, for the requests whose front passed the time:
@secref["queue-time"]) and @tt{response_size_bytes} (the CGI output written to
@wire{FCGI_STDOUT}, head included), each a histogram with fixed buckets:
@tt{buckets} (a list of @tt{[bound, count]} pairs, the counts cumulative, the last bound
@tt{"+Inf"}), @tt{count} and @tt{sum}. The bounds are 1, 2.5, 5, 10, 25, 50, 100, 250
and 500 milliseconds and 1, 2.5, 5 and 10 seconds for the times, and 256 bytes, 1, 4, 16,
64 and 256 KiB, 1, 4 and 16 MiB for the sizes. @tt{responses} counts the answers by
status class (@tt{1xx} to @tt{5xx}: the status the app answered, from a raw handler's
@tt{Status:} header, 200 when it has none; the server's own 413, 503 and so on too). The
pool's are those of its workers and of the workers gone before (exited, recycled,
replaced): they only grow.

In OpenMetrics each pool value is a family (@tt{fastcgi_requests_total},
@tt{fastcgi_request_duration_seconds_bucket}, @tt{fastcgi_responses_total{class="5xx"}},
@tt{fastcgi_image_memory_bytes}, @tt{fastcgi_loader_restarts_total} ...), labelled with
@tt{pool}; the per-worker series are families of their own
(@tt{fastcgi_worker_requests_total}, @tt{fastcgi_worker_memory_bytes},
@tt{fastcgi_worker_private_memory_bytes}, @tt{fastcgi_worker_shared_memory_bytes}, @tt{fastcgi_worker_max_requests},
@tt{fastcgi_worker_request_duration_seconds}, @tt{fastcgi_worker_responses_total} ...),
labelled also with @tt{pid} and @tt{generation}, so that a sum over workers never counts
twice. A worker's series end with it; the pool's totals go on. The exposition ends with
@tt{# EOF}. @exec{promtool check metrics} (which reads the older Prometheus text format)
parses it, and reports only that the counters' samples (@tt{fastcgi_requests_total}) have
no help text: in that format a counter's family is named with its @tt{_total}, in
OpenMetrics without it.

The HTML page draws the request durations as bars, one per bucket, with the requests in
each.

@(image status-png #:scale 0.6)

The HTML page of a pool of two, as headless Chromium renders it.

@subsection[#:tag "canary"]{Canary reloads}

@commandline{raco fastcgi serve app.rkt --canary SECS [--canary-requests N] [--canary-max-errors POINTS]}
@commandline{raco fastcgi ctl reload --canary SECS --pid-file FILE}

With @DFlag{canary} (every reload) or @exec{ctl reload --canary} (one reload), the new
generation first starts one worker beside the old generation, which goes on serving.
The canary takes its share of new connections (the kernel hands each accepted connection
to one of the workers) and of kept ones. Its trial starts once it is ready, and ends once
it has lasted @nonterm{secs} seconds and given @DFlag{canary-requests} answers (default
20), or at 3 x @nonterm{secs} whatever it gave. Its answers over the trial are then
compared with those of the old generation over the same window, by status class (what
each worker reports, as on the status page):

@itemlist[
 @item{@bold{Rolled back} when the canary died during its trial, or its heartbeat
       stopped (it is late, as the watchdog sees it: frozen, or held in a foreign call;
       the ping path is the server's own answer, so the heartbeat is the canary's health
       check), or its share of 5xx answers is over the old generation's by more than
       @DFlag{canary-max-errors} percentage points (default 1). The canary retires (its live continuation sessions
       drain as an old generation's do), the generation's loader stops, the old generation
       serves on, and the reload fails with one line, logged and shown as the status's
       @tt{last_reload_error}, in systemd's @tt{STATUS=}, and by @exec{ctl reload} with exit
       status 1: @tt{canary rolled back: 1773 of 10591 answers 5xx against 0 of 22237}, or
       @tt{canary rolled back: it died during its trial, after 0 answers (0 5xx)}. The
       status counts @tt{canary_rollbacks}.}
 @item{@bold{Rolled forward} otherwise: the rest of the generation starts, and the reload
       ends as any does, once all of it is ready (@tt{canary_forwards}).}
]

While a trial runs, the status shows it under @tt{canary} (generation, the canary's pid,
seconds, and the answers and 5xx answers of the canary and of the old generation so far).
Nothing is lost either way: the old generation never stops serving during the trial, and
the canary's kept connections go to its siblings when it retires, as at any reload. What
a canary that dies holds when it dies is lost, as with any worker that dies. A new worker
that dies before it is ready fails the reload as without a canary.

@subsection[#:tag "stacks"]{Live stacks of running requests}

@exec{raco fastcgi ctl stacks --pid-file FILE}, and the status path with @tt{?stacks}
(@tt{?stacks&json} for JSON), show every request running in the pool now: its worker
(pid, id, generation, state), its request id, method and URI, where it came from, its age,
and its handler's current Racket stack, innermost frame first (at most 30), each a
procedure name with its source location where Racket has them. The stacks are taken while
the requests run, without stopping them or their workers: the manager asks every worker
over its control connection, and each reads its handler threads' continuation marks. A
request blocked in a call to @racket[sync], say, shows the function that called it:

@verbatim|{
worker 4242 (id 3, generation 1, ready): 1 request running
  request 1 GET /report?month=11 from unix, running for 12.4 s
    wait-for-report at /srv/app/report.rkt:41
    render-report at /srv/app/report.rkt:88
    ...
worker 4243 (id 4, generation 1, ready): no request running
worker 4250 (id 5, generation 1, ready): did not answer within 1 s (stopped, or busy in a foreign call)
}|

The answer comes once every worker has answered, or after a second: a worker that has not
answered by then (stopped, frozen, or held by a foreign call, which Racket cannot
interrupt) is listed as such (@tt{"answered": false} in JSON). In a forked worker, Racket
keeps the source location of each frame but not its procedure's name (the loaded image is
made static, @secref["preload-memory"]); the name is then read from the source at that
location, where the file is there to read. A single process (@DFlag{single-process})
answers @tt{?stacks} from itself.

What a stack may reveal: the names and source paths of the app's procedures, and of each
running request its URI with its query string and its peer. Only those who can already see
what the pool does see it: @exec{ctl stacks} asks the manager's control socket, which takes
connections from the pool's user only (it must run as that user), and finds it in
@filepath{FILE.status.json}, readable where the pid file is; @tt{?stacks} is the status
path's, which the front should open to operators only (@secref["status"]).

@subsection[#:tag "logs"]{Access and slow logs}

@DFlag{access-log} @nonterm{file} writes one line per answered request (including those
answered 413, 431, 503 and so on before a handler ran):

@verbatim|{TIME CLIENT "METHOD URI" STATUS BYTES DURATION PID QUEUE
2026-11-20T23:07:39.691Z 127.0.0.1 "GET /a?b=1" 200 58 0.84 12345 3.10}|

@tt{TIME} is the UTC time the request ended, with milliseconds; @tt{CLIENT} the
@wire{REMOTE_ADDR} param (the front's own address when the param is absent); @tt{METHOD}
and @tt{URI} the @wire{REQUEST_METHOD} and @wire{REQUEST_URI} params; @tt{STATUS} the
status of the answer (from its @tt{Status:} header, 200 when it has none, @tt{-} when
the request ended before any output); @tt{BYTES} the bytes written on STDOUT, CGI headers
included; @tt{DURATION} milliseconds from @wire{BEGIN_REQUEST} to the end, with two
decimals; @tt{PID} the worker's; @tt{QUEUE} the request's queue time in milliseconds, with
two decimals (@secref["queue-time"]; @tt{-} when the front passed no usable time). A
missing value is @tt{-}. Every byte outside printable
ASCII, the backslash and the double quote are written as @litchar{\x} and two hex
digits, so a line is one line and its quoted field cannot be closed early.

All workers append to the same file (opened with @tt{O_APPEND}); each writes whole lines
only, gathered for at most 0.2 s, so lines never interleave but may be out of time order
by that much. @tt{-} writes to standard output.

@DFlag{slow-log} @nonterm{file} records every request whose handler has run longer than
@DFlag{slow-threshold} seconds (default 5), once, while it still runs, with the handler
thread's stack at that moment:

@verbatim|{2026-11-20T23:20:01.500Z pid 12345 request 1 from unix "GET /report" running for 5.2 s (threshold 5 s)
    loop at /srv/app.rkt:42
    ...}|

Errors and events go to standard error (@secref["logging"]); SIGUSR1 reopens the access
and slow logs.

@subsubsection[#:tag "log-stall"]{When a log is not read}

Writing a log never holds up a request, and a log that cannot be written does not make a
process grow. In every process (the manager and each worker), the lines of standard
error, of the access log and of the slow log go into a buffer in memory, one for each log
and of at most 1 MiB, and a thread of their own writes them out: only that thread waits
when the reader is slow (standard error or @tt{--access-log -} on a pipe that nobody
reads, a terminal that is paused). A line that comes while its buffer is full is
dropped and counted. The status shows the lines dropped so far, in the manager and the
workers together, as @tt{log_dropped}; and once the log is written again, a line says
how many were dropped: in standard error itself, or, for the access and slow logs, on
standard error:

@verbatim|{2026-11-20T23:10:02 warning [1573] fastcgi: log: 5120 lines dropped while the log was not being read
2026-11-20T23:10:02 warning [1573] fastcgi: log to standard output: 812 lines dropped while the log was not being read}|

A write that fails (a full disk, a closed pipe) loses the lines it carried; it is
logged at most once a second, with how many more writes failed since the last such line:

@verbatim|{2026-11-20T23:11:45 error [1573] fastcgi: cannot write /var/log/app/access.log: error writing to stream port; system error: No space left on device; errno=28 (14 more failed writes since the last such line)}|

@subsection[#:tag "queue-time"]{Queue time}

A request's queue time is how long it waited between the front receiving it and a worker
taking it (in the listen queue, in the front's own queue): the signal an autoscaler or a
load balancer wants, and one a slow app hides. The front passes the time as the param
@wire{HTTP_X_REQUEST_START}; the worker subtracts it from the time it received
@wire{BEGIN_REQUEST}. The value is @litchar{t=} (or nothing) and then Unix time as seconds
with a fraction (@tt{t=1700000000.123}), or as an integer of seconds, milliseconds,
microseconds or nanoseconds (told apart by its size). The lines, in the shipped configs
(@secref["deploy-nginx"], @secref["deploy-haproxy"], @filepath{deploy/apache/}):

@verbatim|{# nginx (when nginx passes the request on; milliseconds)
fastcgi_param HTTP_X_REQUEST_START "t=${msec}";
# HAProxy 2.6, in the fcgi-app section (when it hands the request on, after its own queue)
set-param HTTP_X_REQUEST_START t=%[date(0,ms)]
# Apache, with mod_headers (when Apache received it; microseconds)
RequestHeader set X-Request-Start "%t"}|

This compares two wall clocks, the front's and the worker's: on one machine they are the
same clock; across machines their offset is part of every queue time, so keep them in
step (NTP). A time up to a second ahead counts as no wait; one further ahead, one before
the year 2000, or a value that is not one of the forms above is ignored: the request has
no queue time, and is served as usual.

A client can send an @tt{X-Request-Start} header of its own, which reaches the worker as
the same param when the front passes none: so set the line in the front. What a client
can do with it is bounded: a request that claims to be old only gets itself the 503
below, and one value moves one request in the histogram.

The queue time goes into the @tt{queue_time_seconds} histogram of the status
(@secref["status"]) and at the end of the access log's line (@secref["logs"]). With
@DFlag{max-queue-delay} @nonterm{secs} (@secref["shedding"]), a request that has already
waited longer than @nonterm{secs} is answered 503 at once, before its handler runs, and
counted in @tt{shed_requests}: its client has likely given up, and the work would only
delay the requests behind it.

@; ---------------------------------------------------------------------------------------
@include-section["deploy.scrbl"]

@; ---------------------------------------------------------------------------------------
@section[#:tag "api"]{The library API}

@defmodule[fastcgi]

@subsection[#:tag "serving"]{Serving}

@defproc[(serve/fastcgi
          [start (-> request? response?)]
          [#:roles roles (non-empty-listof (or/c 'responder 'authorizer)) '(responder)]
          [#:listen listen (or/c string? #f) #f]
          [#:port port (or/c #f (integer-in 0 65535)) #f]
          [#:listen-ip listen-ip string? "127.0.0.1"]
          [#:limits limits limits? default-limits]
          [#:allowed-clients allowed-clients (or/c #f string?)
                             (getenv "FCGI_WEB_SERVER_ADDRS")]
          [#:socket-mode socket-mode (integer-in 0 #,(octal "#o7777")) #,(octal "#o660")]
          [#:socket-owner socket-owner (or/c #f string? exact-nonnegative-integer?) #f]
          [#:socket-group socket-group (or/c #f string? exact-nonnegative-integer?) #f]
          [#:backlog backlog exact-positive-integer? 1024]
          [#:on-ready on-ready (-> string? any) void]
          [#:manager manager any/c #f]
          [#:continuation-timeout continuation-timeout (>/c 0) 14400]
          [#:servlet-memory servlet-memory exact-positive-integer? (* 128 1024 1024)])
         (->* () (#:timeout (>=/c 0)) void?)]{

Serves the servlet @racket[start] (@secref["servlets"]) in the given @racket[roles]
(requests in any other role get @wire{FCGI_UNKNOWN_ROLE}), and returns at once a procedure that stops the server. The server runs in threads of its
own; a program that has nothing else to do must keep its main thread alive, for example
with @racket[(sync never-evt)].

The address to listen on is, in this order: @racket[listen] when it is a string
(@secref["addresses"]); else, when @racket[port] is a number, @racket[listen-ip] and
@racket[port] (an IPv6 @racket[listen-ip], one containing @litchar{:}, is put in
brackets; port 0 takes a free port); else an inherited listening socket, fd 0 or a
systemd socket. When there is none, or the address is invalid or cannot be bound,
@racket[exn:fail:fastcgi:transport] is raised.

@racket[limits] sets the server's limits (@secref["limits"]). @racket[allowed-clients]
restricts TCP clients (@secref["security"]); the default is read from the environment
when @racket[serve/fastcgi] is called, and @racket[#f] allows every client.
@racket[socket-mode], @racket[socket-owner] and @racket[socket-group] apply to a unix
socket file: a string is a user or group name, an integer a uid or gid, and @racket[#f]
leaves the owner or group as created. @racket[backlog] is the listen backlog. These four
defaults are also those of @exec{raco fastcgi serve}: both take them from one place in the
source, @filepath{fastcgi/private/transport/listener-options.rkt}.

The servlet may capture continuations (@secref["continuations"]): they are kept in
@racket[manager], a @racketmodname[web-server/managers/manager] manager, or when it is
@racket[#f] in @racket[serve/servlet]'s default manager with the given
@racket[continuation-timeout] (seconds) and @racket[servlet-memory] (bytes).

@racket[on-ready] is called in the calling thread, before @racket[serve/fastcgi]
returns, with the address the server accepts connections on, for example
@racket["127.0.0.1:9000"] (with the port actually bound when @racket[port] was 0),
@racket["unix:/run/app.sock"] (the path made absolute) or @racket["fd:0"].

The stop procedure, called as @racket[(stop)] or @racket[(stop #:timeout secs)] (default
30), stops gracefully: it closes the listening socket (and removes the unix socket file
when it is still the one the server created), closes idle connections, and waits until
the connections still serving requests end, for at most @racket[secs] seconds. A request
whose params complete while the server is stopping is served when nothing else is live
on its connection (a front such as nginx may have sent it on a kept connection just as
the stop began), and answered 503 when another request is live there (a multiplexing
front); a connection is closed when its last request ends. Connections still open when the time is up are cut;
their requests are aborted (@racket[fastcgi-request-abort-evt]), but handler threads are
not killed. Calling the stop procedure again does nothing.

The listening socket and the connections belong to the custodian that was current when
@racket[serve/fastcgi] was called: shutting that custodian down closes them at once (and
removes the unix socket file the server created), as it does Racket's own ports.

@racketblock[
(define stop (serve/fastcgi start #:listen "unix:/run/app.sock"))
(code:comment "later: finish the requests in flight (at most 30 s) and close")
(stop #:timeout 30)
]}

@defproc[(serve/fastcgi-raw
          [handler (-> fastcgi-request? any)]
          [#:roles roles (non-empty-listof (or/c 'responder 'authorizer 'filter))
                   '(responder)]
          [#:listen listen (or/c string? #f) #f]
          [#:port port (or/c #f (integer-in 0 65535)) #f]
          [#:listen-ip listen-ip string? "127.0.0.1"]
          [#:limits limits limits? default-limits]
          [#:allowed-clients allowed-clients (or/c #f string?)
                             (getenv "FCGI_WEB_SERVER_ADDRS")]
          [#:socket-mode socket-mode (integer-in 0 #,(octal "#o7777")) #,(octal "#o660")]
          [#:socket-owner socket-owner (or/c #f string? exact-nonnegative-integer?) #f]
          [#:socket-group socket-group (or/c #f string? exact-nonnegative-integer?) #f]
          [#:backlog backlog exact-positive-integer? 1024]
          [#:on-ready on-ready (-> string? any) void])
         (->* () (#:timeout (>=/c 0)) void?)]{

Like @racket[serve/fastcgi], but serves the raw handler @racket[handler]
(@secref["raw"]) in the roles @racket[roles]. Requests in other roles are answered
@wire{FCGI_UNKNOWN_ROLE}.}

@subsection[#:tag "addresses"]{Listen addresses}

An address given to @racket[#:listen] or @DFlag{listen} is one of:

@itemlist[
 @item{@tt{unix:@italic{path}} --- a unix socket at @italic{path}, made absolute
       relative to the current directory; at most 107 bytes. See below.}
 @item{@tt{@italic{host}:@italic{port}} --- TCP, where @italic{host} is a numeric IPv4
       address, @tt{localhost} (127.0.0.1), or @tt{*} or nothing (every IPv4 address,
       0.0.0.0). Host names other than @tt{localhost} are not accepted.}
 @item{@tt{[@italic{ipv6}]:@italic{port}} --- TCP on a numeric IPv6 address, such as
       @tt{[::1]:9000}. On @tt{[::]} the socket also accepts IPv4 connections.}
 @item{@tt{fd:@italic{n}} --- the listening socket already open as file descriptor
       @italic{n}; an error if it is not a listening socket.}
]

TCP connections are accepted with @tt{TCP_NODELAY} set.

@bold{Unix sockets.} The socket file is created with mode @octal{0600} or stricter and
then changed to the requested mode (default @octal{0660}) and, when asked, owner and
group, so it never exists with a looser mode than requested. If the path already exists:
when it is not a socket, the server does not start; when it is a socket that a live
server accepts connections on, the server does not start (``another server is listening
on'' the address); when it is a stale socket that refuses connections, it is removed and
replaced (logged at level @racket['info]). On stop, the socket file is removed if it is
still the file this server created.

@bold{Inherited sockets.} With no address, the server uses file descriptor 0 when it is
a listening socket: the convention (@wire{FCGI_LISTENSOCK_FILENO}) by which a web server
or @tt{spawn-fcgi} starts an application with the listening socket as its standard
input. Otherwise, when the environment variable @tt{LISTEN_PID} is this process's id and
@tt{LISTEN_FDS} is a positive number (systemd socket activation), it uses file descriptor
3; the variables @tt{LISTEN_PID}, @tt{LISTEN_FDS} and @tt{LISTEN_FDNAMES} are then
removed from the environment, and when more than one descriptor was passed, only fd 3 is
used and a warning is logged.

@subsection[#:tag "limits-api"]{Limits}

@defproc[(make-limits
          [#:max-params-bytes max-params-bytes exact-positive-integer? (* 128 1024)]
          [#:max-params-pairs max-params-pairs exact-positive-integer? 1000]
          [#:max-body max-body exact-nonnegative-integer? (* 64 1024 1024)]
          [#:max-requests-per-connection max-requests-per-connection
                                         (integer-in 1 65535) 100]
          [#:max-concurrent max-concurrent exact-positive-integer? 1000]
          [#:max-connections max-connections exact-positive-integer? 1024]
          [#:stdin-buffer stdin-buffer exact-positive-integer? (* 256 1024)]
          [#:connection-buffer connection-buffer exact-positive-integer? (* 1024 1024)]
          [#:first-byte-timeout first-byte-timeout (>/c 0) 10]
          [#:idle-timeout idle-timeout (>/c 0) 120]
          [#:read-timeout read-timeout (>/c 0) 30]
          [#:write-timeout write-timeout (>/c 0) 30]
          [#:request-timeout request-timeout (or/c #f (>/c 0)) #f]
          [#:request-memory request-memory (or/c #f exact-positive-integer?) #f]
          [#:max-queue-delay max-queue-delay (or/c #f (>/c 0)) #f]
          [#:drain-timeout drain-timeout (>/c 0) 2])
         limits?]{

Returns a limits value for @racket[serve/fastcgi] and @racket[serve/fastcgi-raw]. Sizes
are in bytes and times in seconds. Each field, its default and what a peer gets when it
is reached are described in @secref["limits"].}

@defproc[(limits? [v any/c]) boolean?]{
Returns @racket[#t] if @racket[v] is a value made by @racket[make-limits].}

@defthing[default-limits limits?]{
The value of @racket[(make-limits)].}

@subsection[#:tag "requests"]{Raw requests}

@defproc[(fastcgi-request? [v any/c]) boolean?]{
Returns @racket[#t] if @racket[v] is a FastCGI request as given to a raw handler or
held by @racket[current-fastcgi-request].}

@deftogether[(
@defproc[(fastcgi-request-id [r fastcgi-request?]) (integer-in 1 65535)]
@defproc[(fastcgi-request-role [r fastcgi-request?])
         (or/c 'responder 'authorizer 'filter)]
@defproc[(fastcgi-request-keep-conn? [r fastcgi-request?]) boolean?]
@defproc[(fastcgi-request-params [r fastcgi-request?]) (listof (cons/c bytes? bytes?))]
@defproc[(fastcgi-request-stdin [r fastcgi-request?]) input-port?]
@defproc[(fastcgi-request-data [r fastcgi-request?]) (or/c input-port? #f)]
@defproc[(fastcgi-request-stdout [r fastcgi-request?]) output-port?]
@defproc[(fastcgi-request-stderr [r fastcgi-request?]) output-port?]
@defproc[(fastcgi-request-abort-evt [r fastcgi-request?]) evt?]
@defproc[(fastcgi-request-peer [r fastcgi-request?]) string?]
)]{
The parts of a request:

@itemlist[
 @item{@racket[fastcgi-request-id]: the request id the front chose, unique among the
       live requests of its connection.}
 @item{@racket[fastcgi-request-role]: the role from @wire{BEGIN_REQUEST}.}
 @item{@racket[fastcgi-request-keep-conn?]: whether the front set @wire{FCGI_KEEP_CONN};
       when it did not, the connection is closed once this request ends.}
 @item{@racket[fastcgi-request-params]: every param as a pair of name and value, in the
       order received; a name sent twice appears twice. The byte strings are immutable.
       The server checks the params when they arrive and makes this list on the first
       call (later calls return the same list); a name or value equal to the one at the
       same place in the last list made on the same connection is the same byte string.
       Until then @racket[fastcgi-param] looks a name up in place, so a handler that reads
       only a few params never pays for the whole list.}
 @item{@racket[fastcgi-request-stdin]: the body (@wire{FCGI_STDIN}), delivered as it
       arrives. After the request has been aborted, reading raises
       @racket[exn:fail:fastcgi:aborted]. When the body went over
       @racket[#:max-body] or over its @wire{CONTENT_LENGTH}, the bytes before the
       record that went over can be read, and the read that reaches that point raises
       @racket[exn:fail:fastcgi:body]. In the Authorizer role the port is at end-of-file
       at once.}
 @item{@racket[fastcgi-request-data]: the @wire{FCGI_DATA} stream in the Filter role,
       under the same rules with @wire{FCGI_DATA_LENGTH} in place of
       @wire{CONTENT_LENGTH}; @racket[#f] in the other roles.}
 @item{@racket[fastcgi-request-stdout]: the output (@wire{FCGI_STDOUT}). Writes are
       buffered and sent in records of up to 65528 bytes; @racket[flush-output] sends
       what is buffered. A write of 65528 bytes or more is not copied into the buffer:
       what is buffered leaves first, then the records' headers and pieces of the
       written string leave together, up to 16 records (about 1 MiB) in one
       @tt{sendmsg}; another request's records never come between a header and its
       piece. Racket's port layer hands the
       port a copy of a mutable byte string; an immutable one (such as a literal, or the
       result of @racket[bytes->immutable-bytes] on an answer built once) is sent with no
       copy at all. Writing after the request has ended or been aborted raises
       @racket[exn:fail:fastcgi:aborted].}
 @item{@racket[fastcgi-request-stderr]: @wire{FCGI_STDERR}; each write is sent at once.
       The handler's @racket[current-error-port] writes to the same stream: it is one
       port shared by all requests, which sends what a thread writes to the request whose
       handler the thread runs or was started by (and to the process's standard error in
       a thread that no handler started).}
 @item{@racket[fastcgi-request-abort-evt]: a synchronizable event that becomes ready
       when the request has ended, whether by the handler's return, by an
       @wire{ABORT_REQUEST}, by a limit or timeout, or because the connection was lost
       or cut. Its synchronization result is the event itself. A long-running handler
       can poll it or @racket[sync] on it to stop work nobody will receive.}
 @item{@racket[fastcgi-request-peer]: the address of the front's end of the connection:
       an IP address in text form, or @racket["unix"] for a unix socket. It is not the
       HTTP client's address, which fronts send in @wire{REMOTE_ADDR}.}
]}

@defproc[(fastcgi-param [r fastcgi-request?]
                        [name (or/c bytes? string?)]
                        [default any/c #f])
         any]{
Returns the value, as bytes, of the param @racket[name] (a string is encoded as UTF-8),
or @racket[default] when the request has no such param. When the name was sent more than
once, the first value is returned.

@racketblock[(fastcgi-param r "REQUEST_METHOD") (code:comment "e.g. #\"GET\"")]}

@defparam[current-fastcgi-request r (or/c fastcgi-request? #f)]{
While a servlet served by @racket[serve/fastcgi] or @exec{raco fastcgi} runs, the raw
request it is answering; @racket[#f] elsewhere, including in raw handlers, which receive
the request as their argument. It is bound with @racket[parameterize] around the
servlet's call (which includes writing its response): a thread the servlet starts holds
it too, and nothing of it stays in the thread that ran the servlet, which goes on to serve
other requests. A continuation resumed by a later request (@racketidfont{send/suspend}
and its family) sees that later request, even inside a @racket[parameterize] of the
servlet's own that the continuation captured.}

@defproc[(response/authorized
          [#:variables variables (listof (cons/c (or/c symbol? string?) string?)) '()])
         response?]{
Returns the response with which an Authorizer grants access: status 200, no body, no
MIME type, and for each pair in @racket[variables] a header
@tt{Variable-@italic{name}: @italic{value}}, which asks the front to pass the param
@italic{name} to the next stage. A servlet answers Authorizer requests when it is
served with @racket['authorizer] among its roles (@racket[#:roles] of
@racket[serve/fastcgi], or @racketidfont{fastcgi-roles} in an application file); inside
it, @racket[(fastcgi-request-role (current-fastcgi-request))] tells the role.}

@subsection[#:tag "logging"]{Logging}

@defthing[fastcgi-logger logger?]{
The logger, with topic @racket['fastcgi], to which the server reports. Its parent is the
logger that was current when the library was instantiated. Log lines are:

@itemlist[
 @item{at level @racket['info]: the listening address, start and stop, and the
       manager's events (workers started, ready, stopped, recycled; reloads). Requests
       are not logged here: @exec{raco fastcgi serve} writes them to its access log
       (@secref["logs"]);}
 @item{at level @racket['warning]: requests answered before their handler ran (431, 413,
       400, 503, @wire{FCGI_OVERLOADED}, @wire{FCGI_UNKNOWN_ROLE}), requests ended by the
       flow rule or the request timeout, protocol errors, timeouts that close a
       connection, and refused clients. Requests refused @wire{FCGI_OVERLOADED} or
       @wire{FCGI_UNKNOWN_ROLE}, and requests shed (@secref["shedding"]), which a peer
       can make by the thousand a second, get at most one line a second for each of
       the three, saying how many more there were
       since the last one (@tt{request 101 from unix: over 100 live requests on one
       connection: OVERLOADED; 4899 more refused so since the last such line}). The
       other lines that follow from what a peer sent (requests answered 400, 413, 431 or
       503 before their handler ran, bodies over their limit, requests ended by the
       connection buffer or because their handler fell behind on a multiplexed
       connection, protocol errors, unparsable @wire{REQUEST_URI}s
       and request bodies in the servlet adapter, refused clients) are written in full
       for the first 10 of each kind in a second; the rest of that second are counted,
       and the next line of the kind written says how many were not
       (@tt{request 1 from unix: CONTENT_LENGTH is not a number: answered 400 (1990
       more like it not written)}). A flood of bad requests, each about 50 bytes, thus
       writes at most 10 lines a second of each kind, and none is lost uncounted;}
 @item{at level @racket['error]: exceptions raised by handlers, with the request's
       @wire{REQUEST_URI}, except @racket[exn:fail:fastcgi:body] and the break sent
       by the request timeout, whose causes are already logged as warnings.}
]

Every value that comes from a peer, and every exception message, is escaped before it
goes into a log line: each byte outside the printable ASCII range 32--126, and the
backslash, is written as @litchar{\x} followed by two lowercase hexadecimal digits. A
log line is therefore always a single line of ASCII.

@exec{raco fastcgi serve} and @exec{raco fastcgi dev} print log lines to the standard
error port, one per line: the UTC time, the level, the pid of the process in brackets
(manager and workers share the port), and the message, to which Racket adds the topic as
a prefix (@litchar{fastcgi: }). The topic @racket['fastcgi] is printed at the level of
@DFlag{log-level}; every other topic (the application's own loggers) at
@racket['warning] and above, and their messages are escaped in the same way when
printed, so an application that logs untrusted text cannot split or forge a line either.
Each event is printed once: the commands load the server
and the application under a logger of their own, so Racket's default standard-error
receiver does not print it a second time. The lines are printed by a thread of their
own through a bounded buffer, so a standard error that nobody reads holds up nothing
and lines are dropped and counted instead (@secref["log-stall"]). For example:

@verbatim|{2026-11-20T23:08:06 warning [1571] fastcgi: worker 1573 exited unexpectedly (killed by SIGKILL) after 5.9 s}|

A program that calls @racket[serve/fastcgi] itself receives the lines with a log
receiver:

@racketblock[
(define receiver (make-log-receiver fastcgi-logger 'info 'fastcgi))
]}

@subsection[#:tag "exns"]{Exceptions}

@defstruct*[(exn:fail:fastcgi exn:fail) ()]{
Raised by @racketmodname[fastcgi/client] for connection failures, timeouts and
unexpected answers, and the parent of the following three structures.}

@defstruct*[(exn:fail:fastcgi:protocol exn:fail:fastcgi) ()]{
Raised for bytes that break the FastCGI protocol, such as a record with a version other
than 1, and by @racket[parse-cgi-response] for malformed CGI output. In the server, a
protocol error closes the connection (@secref["protocol"]) and is not raised to
handlers.}

@defstruct*[(exn:fail:fastcgi:aborted exn:fail:fastcgi) ()]{
Raised by reads from the body ports and writes to the output ports of a request that has
ended or been aborted. A handler that raises it (by not catching it) ends without an
error line in the log and without an answer.}

@defstruct*[(exn:fail:fastcgi:body exn:fail:fastcgi) ()]{
Raised by a read from a body port that reaches the point where the body went over
@racket[#:max-body] or over its declared length. A handler that does not catch it is
answered 413.}

@defstruct*[(exn:fail:fastcgi:transport exn:fail) ()]{
Raised by @racket[serve/fastcgi] and @racket[serve/fastcgi-raw] when there is no address
to listen on, the address is invalid, or the socket cannot be created, bound or
listened on. It is a subtype of @racket[exn:fail], not of @racket[exn:fail:fastcgi].}

@; ---------------------------------------------------------------------------------------
@subsection[#:tag "client"]{The client}

@defmodule[fastcgi/client]

A FastCGI client that connects to an application, over a unix socket or TCP, and sends
requests to it. Many requests can be in flight on one connection: each is sent by a
thread of its own, one record at a time, and the answers are matched to requests by id.
@exec{raco fastcgi request} and @exec{raco fastcgi dev} are built on it; it works
with any FastCGI application. Errors are raised as @racket[exn:fail:fastcgi], which is
provided by @racketmodname[fastcgi].

@defproc[(fastcgi-connect [address string?]
                          [#:timeout timeout (and/c real? positive?) 10])
         fcgi-client?]{
Connects to @racket[address]: @tt{unix:@italic{path}}, an absolute @italic{path}
(starting with @litchar{/}), @tt{@italic{host}:@italic{port}} (a host name or address),
or @tt{[@italic{ipv6}]:@italic{port}}, with a port from 1 to 65535. Raises
@racket[exn:fail:fastcgi] when the address is malformed, the connection fails, or it is
not made within @racket[timeout] seconds.}

@defproc[(fcgi-client? [v any/c]) boolean?]{
Returns @racket[#t] if @racket[v] is a connection made by @racket[fastcgi-connect].}

@defproc[(fcgi-client-close [c fcgi-client?]) void?]{
Closes the connection. Calls and @racket[fastcgi-get-values] still waiting for an answer
raise @racket[exn:fail:fastcgi]. A connection is also closed, with the same effect, when
the application closes it or sends bytes that are not valid FastCGI.}

@deftogether[(
@defproc[(fastcgi-call
          [c fcgi-client?]
          [#:params params (or/c (listof (cons/c (or/c string? bytes?) (or/c string? bytes?)))
                                 (hash/c (or/c string? bytes?) (or/c string? bytes?)))]
          [#:stdin stdin (or/c bytes? input-port?) #""]
          [#:data data (or/c #f (or/c bytes? input-port?)) #f]
          [#:role role (or/c 'responder 'authorizer 'filter (integer-in 0 65535))
                  'responder]
          [#:keep-conn? keep-conn? any/c #t]
          [#:timeout timeout (and/c real? positive?) 30]
          [#:id id (or/c #f (integer-in 1 65535)) #f])
         any]
@defproc[(fastcgi-call-evt
          [c fcgi-client?]
          [#:params params (or/c (listof (cons/c (or/c string? bytes?) (or/c string? bytes?)))
                                 (hash/c (or/c string? bytes?) (or/c string? bytes?)))]
          [#:stdin stdin (or/c bytes? input-port?) #""]
          [#:data data (or/c #f (or/c bytes? input-port?)) #f]
          [#:role role (or/c 'responder 'authorizer 'filter (integer-in 0 65535))
                  'responder]
          [#:keep-conn? keep-conn? any/c #t]
          [#:timeout timeout (and/c real? positive?) 30]
          [#:id id (or/c #f (integer-in 1 65535)) #f])
         any]
)]{
@racket[fastcgi-call-evt] starts one request on @racket[c] and returns a synchronizable
event whose synchronization result is the @racket[fcgi-reply]; @racket[fastcgi-call]
starts the request and waits for that result.

The request is sent as @wire{BEGIN_REQUEST} with @racket[role] (a number sends that
role number as is) and the @wire{FCGI_KEEP_CONN} flag when @racket[keep-conn?] is true,
then the @racket[params] (a hash is sent in name order), then @racket[stdin] as the
@wire{FCGI_STDIN} stream, then, when @racket[data] is given or @racket[role] is
@racket['filter], @racket[data] (or nothing) as the @wire{FCGI_DATA} stream. An input
port is read one record (65528 bytes) at a time, never whole. The request id is
@racket[id], or else the lowest id not in flight on @racket[c].

Synchronizing on the event raises @racket[exn:fail:fastcgi] when no
@wire{END_REQUEST} has arrived within @racket[timeout] seconds of the start (the
request is not aborted), when the connection closes first, or when sending failed (the
request is then aborted). Starting a request raises @racket[exn:fail:fastcgi] when
@racket[c] is closed or the id is already in flight.}

@defstruct*[fcgi-reply ([id (integer-in 1 65535)]
                        [stdout bytes?]
                        [stderr bytes?]
                        [app-status exact-nonnegative-integer?]
                        [protocol-status (or/c 'request-complete 'cant-mpx-conn
                                               'overloaded 'unknown-role byte?)])
            #:transparent]{
The answer to one request: all of its @wire{FCGI_STDOUT} and @wire{FCGI_STDERR} bytes,
and the application status and protocol status of its @wire{END_REQUEST}; a protocol
status this library does not name is left as its number.}

@defproc[(fastcgi-get-values [c fcgi-client?]
                             [names (listof string?)]
                             [#:timeout timeout (and/c real? positive?) 10])
         (listof (cons/c string? string?))]{
Sends @wire{FCGI_GET_VALUES} for @racket[names] and returns the pairs of the
application's @wire{FCGI_GET_VALUES_RESULT}, which holds the names it knows. Raises
@racket[exn:fail:fastcgi] when the application answers @wire{FCGI_UNKNOWN_TYPE}, or
when no answer arrives within @racket[timeout] seconds.

@racketblock[
(fastcgi-get-values c '("FCGI_MAX_CONNS" "FCGI_MAX_REQS" "FCGI_MPXS_CONNS"))
]}

@defproc[(fastcgi-abort [c fcgi-client?] [id (integer-in 1 65535)]) void?]{
Sends @wire{FCGI_ABORT_REQUEST} for the request @racket[id] when it is in flight on
@racket[c], and does nothing otherwise. The call still ends when the application sends
the request's @wire{END_REQUEST}.}

@defproc[(fastcgi-send-raw [c fcgi-client?] [bs bytes?]) void?]{
Writes @racket[bs] to the connection as they are, for testing how an application
handles malformed input.}

@defproc[(parse-cgi-response [bs bytes?])
         (values (integer-in 100 999) (listof (cons/c string? string?)) bytes?)]{
Splits CGI output into a status, the header lines and the body. The header lines run to
the first empty line; lines may end with CR LF or LF, and every header is kept, in
order, @tt{Status} included. The status is taken from the @tt{Status} header, else 302
when there is a @tt{Location} header, else 200. Raises
@racket[exn:fail:fastcgi:protocol] for a malformed header line or @tt{Status} value.}

@defproc[(fastcgi-request
          [address string?]
          [#:method method string? "GET"]
          [#:uri uri string? "/"]
          [#:headers headers (listof (cons/c string? string?)) '()]
          [#:body body (or/c bytes? input-port?) #""]
          [#:content-length content-length (or/c #f exact-nonnegative-integer?) #f]
          [#:params-extra params-extra
                          (listof (cons/c (or/c string? bytes?) (or/c string? bytes?)))
                          '()]
          [#:timeout timeout (and/c real? positive?) 30])
         (values (integer-in 100 999) (listof (cons/c string? string?)) bytes?)]{
Sends one HTTP-like request the way a front such as nginx would: connects to
@racket[address], sends a Responder request without @wire{FCGI_KEEP_CONN}, closes the
connection, and returns the answer as @racket[parse-cgi-response] does. A port
@racket[body] needs @racket[content-length]. Raises @racket[exn:fail:fastcgi] when the
protocol status is not @wire{FCGI_REQUEST_COMPLETE}.

The params sent are @wire{GATEWAY_INTERFACE} (@tt{CGI/1.1}), @wire{SERVER_SOFTWARE}
(@tt{racket-fastcgi}), @wire{SERVER_PROTOCOL} (@tt{HTTP/1.1}), @wire{REQUEST_SCHEME}
(@tt{http}), @wire{REQUEST_METHOD}, @wire{REQUEST_URI} (@racket[uri]),
@wire{DOCUMENT_URI} and @wire{PATH_INFO} (the path of @racket[uri], percent-decoded),
@wire{SCRIPT_NAME} (empty), @wire{QUERY_STRING}, @wire{SERVER_NAME} and
@wire{SERVER_PORT} (from a @tt{Host} header, else @tt{localhost} and @tt{80}),
@wire{SERVER_ADDR} and @wire{REMOTE_ADDR} (@tt{127.0.0.1}), @wire{REMOTE_PORT}
(@tt{0}); when the body is not empty, @wire{CONTENT_LENGTH} and @wire{CONTENT_TYPE}
(from a @tt{Content-Type} header, else @tt{application/x-www-form-urlencoded}); and
@wire{HTTP_@italic{NAME}} for every other header, its name upper-cased with hyphens
turned into underscores. Each pair of @racket[params-extra] replaces the param of the
same name, or is added at the end.}

@; ---------------------------------------------------------------------------------------
@section[#:tag "limits"]{Limits}

Every limit is a field of @racket[make-limits]. The table gives each field's default and
what the peer gets when the limit is reached. A status such as 431 is sent to the front
as a plain-text CGI answer (@tt{Status: 431 Request Header Fields Too Large}, with a
@tt{Content-Type} and @tt{Content-Length}) followed by @wire{END_REQUEST}; the handler is
not run.

@(define (row . cells) cells)
@tabular[
 #:style 'boxed
 #:sep (hspace 2)
 #:row-properties '(bottom-border ())
 (list
  (row @bold{Field} @bold{Default} @bold{When reached})
  (row @racket[#:max-params-bytes] @elem{128 KiB}
       @elem{431: the params of one request are larger, in total, than this many bytes.})
  (row @racket[#:max-params-pairs] @elem{1000}
       @elem{431: one request has more params than this.})
  (row @racket[#:max-body] @elem{64 MiB}
       @elem{413: before the handler runs when @wire{CONTENT_LENGTH} is larger; when the
             body itself grows past the limit (or past its @wire{CONTENT_LENGTH}), the
             handler's read raises @racket[exn:fail:fastcgi:body] and an uncaught one is
             answered 413; a handler that has not started by then (its body came whole
             before it ran, the usual case behind nginx) is not run, and the answer is
             413. Also @racket[#:max-request-body-length] for servlets.})
  (row @racket[#:max-requests-per-connection] @elem{100}
       @elem{@wire{END_REQUEST} with protocol status @wire{FCGI_OVERLOADED} for a
             @wire{BEGIN_REQUEST} while this many requests are live on its connection.
             Reported as @wire{FCGI_MAX_REQS} when it is below @racket[#:max-concurrent].})
  (row @racket[#:max-concurrent] @elem{1000}
       @elem{503: a request whose params complete while this many handlers run in the
             process. Reported as @wire{FCGI_MAX_REQS} when it is below
             @racket[#:max-requests-per-connection].})
  (row @racket[#:max-connections] @elem{1024}
       @elem{Up to 64 connections more are accepted at a time only to be refused: the
             first @wire{BEGIN_REQUEST} on each is answered 503 with @wire{END_REQUEST}
             at once, then the connection is closed (other records on it are skipped;
             the exchange is bounded by @racket[#:first-byte-timeout] plus
             @racket[#:drain-timeout]). Past those, new connections wait in the listen
             backlog. Reported as @wire{FCGI_MAX_CONNS}.})
  (row @racket[#:stdin-buffer] @elem{256 KiB}
       @elem{Body bytes queued for one handler and not yet read. What happens when it is
             full is the flow rule (@secref["flow"]).})
  (row @racket[#:connection-buffer] @elem{1 MiB}
       @elem{On a connection that has carried two live requests at once (multiplexing):
             the input held for all its live requests together, that is params not yet
             complete and body bytes their handlers have not read. A @wire{PARAMS} record
             that would go past it ends its request with @wire{END_REQUEST}
             @wire{FCGI_OVERLOADED} (no handler runs); a @wire{STDIN} or @wire{DATA}
             record, as the flow rule ends a request whose buffer overflows. A
             connection with one request at a time is bounded by
             @racket[#:max-params-bytes] and @racket[#:stdin-buffer] alone.})
  (row @racket[#:first-byte-timeout] @elem{10 s}
       @elem{The connection is closed when its first whole record has not arrived within
             this time after it is accepted (bytes trickling in do not extend it, nor
             does a handover: see below the table).})
  (row @racket[#:idle-timeout] @elem{120 s}
       @elem{A connection with no live request is closed after this long without a new
             one.})
  (row @racket[#:read-timeout] @elem{30 s}
       @elem{The connection is closed when a record is incomplete, or a live request's
             params or body streams have not ended, and no byte arrives for this long.
             Also the flow rule's wait for a handler that reads nothing.})
  (row @racket[#:write-timeout] @elem{30 s}
       @elem{When one write to the front blocks this long (the front does not read),
             the connection is closed and its live requests are aborted.})
  (row @racket[#:request-timeout] @elem{@racket[#f] (none)}
       @elem{503: a handler still running this long after its request's
             @wire{BEGIN_REQUEST} gets a break (@racket[break-thread]); a handler that
             does not catch it is answered 503 if nothing has been sent yet. A handler
             that is still running 5 s after the break has its request ended with
             @wire{END_REQUEST} (application status 1), and its later writes fail.})
  (row @racket[#:request-memory] @elem{@racket[#f] (none)}
       @elem{500: a handler whose threads hold more than this many bytes that the rest of
             the process does not reach is killed at the next major collection that sees
             it; if some of its answer had left, its request ends with
             @wire{END_REQUEST} (application status 1). Each handler then runs in a
             thread of its own, under a custodian of its own (@secref["runaway"]).})
  (row @racket[#:max-queue-delay] @elem{@racket[#f] (off)}
       @elem{503 at once: a request whose params complete while the handlers running
             have more than this much CPU work ahead of it, estimated as their number
             times the recent CPU time per request (@secref["shedding"]). 1 s is a
             good value to start from. Also a request whose front says it has already
             waited longer than this (@secref["queue-time"]).})
  (row @racket[#:drain-timeout] @elem{2 s}
       @elem{When the server closes a connection gracefully, it half-closes it and reads
             and discards what the front still sends, for at most this long, before
             closing it.}))]

Other answers given before a handler runs:

@itemlist[
 @item{400 when the params are malformed (a name or value length that runs past the end
       of the params) or @wire{CONTENT_LENGTH} is not empty and not a number of 1 to 18
       digits.}
 @item{503 when the server is stopping.}
 @item{@wire{END_REQUEST} with @wire{FCGI_UNKNOWN_ROLE} for a role the handler does not
       take; if that request did not set @wire{FCGI_KEEP_CONN}, the connection is then
       closed.}
]

A connection that is closed because of a timeout is closed at once: its live requests
are aborted and get no @wire{END_REQUEST}. Answers and closes are logged at level
@racket['warning] (@secref["logging"]).

A handover keeps deadlines. A kept connection that a retiring worker hands to another
(a reload, a recycle: @secref["operations"]) takes its deadline with it: the first-byte,
idle or read deadline it was waiting for, with the time that deadline had left, which the
worker that adopts it enforces as it stands, even when its own limits differ (after a
reload that changed them). So a connection that never sends a byte is closed at its
first-byte deadline, counted from its accept, however often workers recycle. It takes a
slot of the adopting worker's @racket[#:max-connections] (one that has none free closes
it); it has no live request, since a connection is handed over only between requests.

@subsection[#:tag "shedding"]{Overload: shedding load}

A server that takes every request when more arrive than it can run only makes every
request slow: Racket shares the CPU among the handlers in short slices, so with a
hundred compute-bound handlers each one finishes a hundred times later than alone, and
the front's own timeouts start to fail requests that were nearly done. These limits keep
the work a worker admits bounded, and answer the excess with a fast 503. The first is
off by default; turn it on (1 s is a good value to start from) where overload is a risk:

@itemlist[
 @item{@racket[#:max-queue-delay] (@DFlag{max-queue-delay} @nonterm{secs}, off by
       default; 1 s is a good value to start from): ten times a
       second the worker measures what a request costs: the CPU time its handler's
       thread used, over the requests that finished, plus the rest of the process's CPU
       (reading, writing, threads a handler starts) over the requests that arrived, each
       request counted alike and the older ones less. So the CPU spent reading a burst is
       spread over the burst, not charged to the few of it that finish first; until 20
       requests have finished, the ones missing count as free, but the handlers' part is
       never below what the running handlers have used so far: the first requests of a
       fresh worker are its dearest, and a few of them do not make it shed a burst. Once
       a running handler has been at it longer than the
       limit, the process is behind: the cost is then stretched by the share of a core
       the process gets (other processes take the rest; counted as at least a quarter). A request whose params complete while the handlers running times that
       cost, the work ahead of it, is over the limit gets 503 without running.
       It is a concurrency limit that follows what requests cost: with 20 ms handlers
       about 50 run at once; with handlers that wait on a database, little CPU each,
       many more. At least one request is always admitted. Under a steady overload the
       served requests keep a latency near the limit (more when other processes take
       the CPU), and once the load drops requests are served again at once.}
 @item{@racket[#:max-concurrent]: a fixed cap on handlers running, whatever they cost.}
 @item{@racket[#:max-connections]: past it, up to 64 more connections are answered 503.}
]

The estimate counts every running handler as computing: an app with many handlers that
mostly wait (on a database, say) and also cost a lot of CPU each may be shed before the
CPU is really the limit; raise the limit or turn it off (@tt{off}) for such an app.
The rest of the process's CPU is all of it that the handlers did not use: under
@racket[serve/fastcgi] in a program whose own threads also compute (a background job, a
client of the server in the same process), their CPU is charged to the requests too.

With it on, handler threads run in a thread group of their own, and Racket shares the CPU between
that group as a whole and each other thread: however many handlers compute, the threads
that read requests still get their turn at once, so a request to be shed is read and
answered in milliseconds rather than after the queue it is refused from.

A shed request is answered @tt{Status: 503 Service Unavailable} with
@wire{END_REQUEST}, in about the time a hello-world request takes, and the connection
stays open. The log gets at most one warning line a second for all of them
(@tt{overloaded: answered 503 (1187 ms of CPU work ahead (90 handlers running x 3.3 ms
a request x 4.0 for its share of a core), over the 1000 ms allowed (max-queue-delay)); 412
more shed since the last such line}: the work ahead is the handlers running, times what a
request has recently cost in CPU, times how much slower than that the process runs when
it gets only part of a core), and the status page counts
them (@tt{shed_requests}, and per worker @tt{shed} and @tt{queue_delay}). Behind nginx,
the 503 reaches the client as it is (@tt{fastcgi_next_upstream} does not retry a 503
unless told @tt{http_503}; with several app hosts, telling it so sends the request to a
less loaded one). The figures of an overload run are in
@filepath{tests/reliability/RESULTS.md}.

@; ---------------------------------------------------------------------------------------
@section[#:tag "protocol"]{Protocol coverage}

The server implements FastCGI 1.0.

@bold{Record types.} The server reads @wire{FCGI_BEGIN_REQUEST},
@wire{FCGI_ABORT_REQUEST}, @wire{FCGI_PARAMS}, @wire{FCGI_STDIN}, @wire{FCGI_DATA} and
@wire{FCGI_GET_VALUES}, and writes @wire{FCGI_STDOUT}, @wire{FCGI_STDERR},
@wire{FCGI_END_REQUEST}, @wire{FCGI_GET_VALUES_RESULT} and @wire{FCGI_UNKNOWN_TYPE}.
A record with request id 0 is a management record: one of any type but
@wire{FCGI_GET_VALUES} (an unknown type, or one such as @wire{FCGI_STDOUT} that only an
application sends) is answered @wire{FCGI_UNKNOWN_TYPE}, as libfcgi does;
@wire{FCGI_BEGIN_REQUEST} with id 0 is a protocol error. With another request id, a
record of an unknown type, or of a type the server does not read, is ignored. Output records
are padded to a multiple of 8 bytes. The last @wire{FCGI_STDOUT} record, the empty
record that ends the stream and the @wire{FCGI_END_REQUEST} leave in one write.

@bold{Roles.} Responder, Authorizer and Filter, as described in @secref["raw"].
Servlets take the Responder role only.

@bold{Multiplexing.} A connection can carry many live requests at once, up to
@racket[#:max-requests-per-connection]; each runs its own handler thread (the first
request on a connection may have run in the reading thread, which then hands reading to a
thread of the connection's own within about 20 ms: see @secref["apps"]). Records of
different requests never interleave inside one record.

@bold{Keeping connections.} When a request's @wire{BEGIN_REQUEST} does not set
@wire{FCGI_KEEP_CONN}, the connection is closed once that request has ended: at once
when the request's input had all arrived before its handler ran and nothing the front
sent waits unread (the usual case: nginx without @tt{fastcgi_keep_conn}), else
gracefully (see @racket[#:drain-timeout]), since closing a TCP connection with unread
input resets it, and the front could lose the end of its answer. When it does, the
connection stays
open for further requests, subject to @racket[#:idle-timeout].

@bold{@wire{FCGI_GET_VALUES}.} Sent with request id 0, it is answered with those of the
following names that were asked for, each at most once; other names are left out.
@wire{FCGI_GET_VALUES} records with another request id are ignored.

@tabular[
 #:style 'boxed
 #:sep (hspace 2)
 #:row-properties '(bottom-border ())
 (list
  (list @bold{Name} @bold{Value})
  (list @wire{FCGI_MAX_CONNS} @elem{@racket[#:max-connections] (default 1024)})
  (list @wire{FCGI_MAX_REQS} @elem{the smaller of @racket[#:max-concurrent] and
                                 @racket[#:max-requests-per-connection] (default 100):
                                 what one connection may carry at once, which is how
                                 HAProxy reads it})
  (list @wire{FCGI_MPXS_CONNS} @elem{@tt{1}}))]

@bold{@wire{FCGI_ABORT_REQUEST}.} The request ends at once: the server sends the empty
@wire{FCGI_STDOUT} record (when some output was already sent) and an
@wire{END_REQUEST} with application status 1 and protocol status
@wire{FCGI_REQUEST_COMPLETE}. The handler thread is not killed:
@racket[fastcgi-request-abort-evt] becomes ready, its body reads and output writes raise
@racket[exn:fail:fastcgi:aborted], and nothing more it writes is sent. An
@wire{ABORT_REQUEST} for an id that is not live is ignored.

@bold{Protocol errors.} The connection is closed, its live requests are aborted and a
warning is logged on any of:

@itemlist[
 @item{a record whose version is not 1;}
 @item{an @wire{FCGI_PARAMS}, @wire{FCGI_STDIN}, @wire{FCGI_DATA} or
       @wire{FCGI_ABORT_REQUEST} record before the first @wire{FCGI_BEGIN_REQUEST} on
       the connection;}
 @item{an @wire{FCGI_BEGIN_REQUEST} with request id 0, with a body that is not 8 bytes
       long, or for an id that is already live;}
 @item{an @wire{FCGI_STDIN} or @wire{FCGI_DATA} record for a request whose params have
       not ended;}
 @item{a malformed @wire{FCGI_GET_VALUES}.}
]

Records for request ids that are not live (for example, the rest of a request that was
already answered) are skipped.

@subsection[#:tag "flow"]{The body flow rule}

Each request has its own body buffer of @racket[#:stdin-buffer] bytes, and one reader per
connection decodes the records and feeds the buffers.

@itemlist[
 @item{While a request is the only live request on its connection, a full buffer pauses
       the reader until the handler reads. The front's writes then block, so a large
       upload streams through the buffer instead of piling up in memory.}
 @item{When other requests are live on the same connection, the reader never waits for
       one handler: a request whose buffer overflows is ended at once with an
       @wire{END_REQUEST} (application status 1, no answer of its own), and the other
       requests go on. So is one whose body would take what the connection's live
       requests hold past @racket[#:connection-buffer]. What an ended request had queued
       is dropped with it, even while its handler runs on (its reads fail).}
 @item{A handler that reads nothing of a pending body for @racket[#:read-timeout]
       seconds has its request ended in the same way. (The reader receives nothing
       from the front meanwhile, so the connection's own @racket[#:read-timeout] can
       close the connection first; its requests are then aborted.)}
]

@; ---------------------------------------------------------------------------------------
@section[#:tag "security"]{Security notes}

@bold{Allowed clients.} @racket[#:allowed-clients] and @DFlag{allowed-clients} take a list
of IPv4 and IPv6 addresses and CIDR blocks (@tt{10.0.0.0/8}, @tt{::1}), separated by
commas or whitespace; the default is the environment variable
@tt{FCGI_WEB_SERVER_ADDRS}, the variable the FastCGI specification names for this. An
IPv4-mapped IPv6 address (@tt{::ffff:10.0.0.1}) matches as the IPv4 address it maps.
Invalid entries are ignored with a warning, and a list with no valid entry denies every
TCP client. A TCP connection from an address not on the list is closed at once and logged.
The list does not apply to unix socket connections, whose access is controlled by the
socket file's mode, owner and group. Without a list, every client that can reach the
socket is served; the @racket[#:port] form of @racket[serve/fastcgi] listens on
127.0.0.1 by default.

@bold{Unix socket modes.} The socket file never exists with a mode looser than the one
asked for (default @octal{0660}: owner and group only), and an existing file that is not
a socket, or a socket a live server is using, is never removed (@secref["addresses"]).

@bold{Limits.} Every size and count has a bounded default, and so has every wait
except a handler's own running time, which @racket[#:request-timeout] bounds only when
it is set (@secref["limits"]). The input a process holds for requests whose handlers
have not read it is at most about @racket[#:max-connections] times the larger of
@racket[#:connection-buffer] and @racket[#:max-params-bytes] plus
@racket[#:stdin-buffer], plus a read buffer of at most two records (128 KiB) a
connection: about 1 GiB with the defaults, whatever a peer sends, however many requests
it multiplexes on a connection. (This is what the limits allow, worked out from them,
not a measurement.)
Lengths read from the wire are checked against the bytes actually present before
anything is allocated. For servlets, @racketmodname[web-server]'s form and multipart
limits apply as well (@secref["servlets"]).

@bold{Log escaping and volume.} Values from peers are escaped in log lines
(@secref["logging"]), so a request cannot forge or split log lines. Nor can a peer fill
the disk with them: the lines its input causes are written for the first 10 of each kind
a second (one a second for @wire{FCGI_OVERLOADED}, @wire{FCGI_UNKNOWN_ROLE} and shed
requests), and the rest are counted in the next line written. Exception messages are
logged, not sent to the front.

@bold{Response headers.} CR, LF and NUL in a servlet's status message and headers are
replaced by spaces, and hop-by-hop headers are dropped (@secref["servlets"]).

@subsection[#:tag "operations"]{What the server promises an operator}

@bold{No request lost on a reload, a recycle or a stop.} A front that keeps connections
(nginx with @tt{upstream @"{" keepalive N; @"}"} and @tt{fastcgi_keep_conn on}, HAProxy's
@tt{fcgi-app}) sends the next request on an idle kept connection whenever it likes, with
nothing to say beforehand. A worker that closes such a connection can therefore meet a
request the front has just sent on it: the front sees the connection close under it, and
retries elsewhere only requests that are idempotent (nginx never retries a POST it has
sent: the client gets a 502). No close of an idle kept connection is free of that race,
so the server keeps this rule:
@itemlist[
 @item{A worker that is replaced (a SIGHUP reload, @DFlag{max-requests},
       @DFlag{max-memory}, the process manager's scaling down) never closes a kept
       connection. Once a connection has no request live on it, the worker sends the
       socket itself to a worker that goes on serving (the manager names them: the new
       generation's on a reload, the others on a recycle), with the bytes of a record it
       had begun to read and what its deadline had left (@secref["limits"]: a handover
       keeps deadlines), over a unix socket (@tt{SCM_RIGHTS}); whatever the front sends
       meanwhile waits in the socket for the new owner, which serves it with the pool's
       current code. The worker stops when it has none left (or at
       @DFlag{graceful-timeout}, when a front never leaves one idle). The log says how
       many it handed over; one that no worker takes (none left) is closed as below.}
 @item{A worker that stops with the pool (SIGTERM, @exec{ctl stop}) has no one to hand
       its connections to. A kept connection is closed right after its next answer, so
       that the front reads the end of the connection with the answer and does not use it
       again; one that stays idle is closed after the drain timeout (2 s; the limits'
       @racket[#:drain-timeout]). Only a
       connection that stayed idle that whole time can still meet a request at the moment
       it closes, which a front under load has none of. Requests that come after the
       listening socket closed are refused at connect (nginx: 502, with @tt{connect()
       failed} in its log), as with any stopped server: put a second pool or host behind
       the front for stops without downtime.}
]
Requests in flight always finish (within @DFlag{graceful-timeout}). The tests
@filepath{tests/integration/lossless-test.rkt} (in @exec{make test}: reloads, recycles
by @DFlag{max-requests} and @DFlag{max-memory}, and a stop, under a load of GETs and POSTs
with bodies through the published nginx and HAProxy files; reloads and recycles through
Apache's @filepath{proxy-fcgi-tcp.conf}, whose @tt{enablereuse=on} keeps connections too)
and the @tt{reload-post},
@tt{recycle-post} and @tt{stop-post} scenarios of @exec{make reliability} check it.

@bold{Nothing leaks to subprocesses.} A program that a handler starts (with Racket's
@racket[subprocess] or @tt{system}, or through a C library) inherits none of the
server's descriptors: the listening socket, accepted connections, the manager's control
socket, the workers' private sockets and the access and slow logs are close-on-exec, and
so is every descriptor a worker holds once its app is loaded (Racket's own among them).
Racket's @racket[subprocess] closes all but the standard three in the child anyway;
@tt{system} through the FFI and C libraries do not. The listening socket a
process inherits as fd 0 (from the manager, or from a web server that spawned it) is
moved to a close-on-exec descriptor at start and @filepath{/dev/null} takes fd 0's
place, so a program given the worker's standard input reads nothing; a systemd socket
(fd 3) is made close-on-exec. A program that outlives the pool (a daemon started by a
handler) therefore never keeps its port: the pool can be started again on the same
address at once. A generation's loader (@secref["preload"]) does the same before it
loads the app: a program the app starts at module level gets @filepath{/dev/null} as its
standard input; the workers it forks get the socket back on fd 0 and move it in turn.

@bold{Routine cleanup cannot break a running pool.} Nothing the manager and its workers
need at run time is kept in a temporary folder, so cleaning @filepath{/tmp} or
@filepath{/var/tmp} (@tt{systemd-tmpfiles}, @tt{tmpreaper}, @tt{rm -rf /tmp/*}) under a
running pool breaks neither a reload nor a worker started to replace one. The manager's
control socket and each worker's relay socket (@secref["continuations"]) are Linux
abstract unix sockets, which have a name and no file; since such a name has no
permissions, each end checks the other's user with @tt{SO_PEERCRED}: a connection from a
process of another user is closed at once (and logged, at most one line a second), and a
name held by another user's process is never connected to. The names are unique to each
manager, and a relay socket's name carries a MAC of the worker's number under a key only
the pool knows, so no other user can take it first. Stateless servlets' secret (the
@DFlag{secret-file}'s, read by the manager at start and at each reload, or one it makes at
start) and that key reach each worker over its control connection: never in a file, on a
command line or in the environment. A worker answering @DFlag{status-path} asks the
manager for the status over the same socket. Beyond the paths it is given (a unix
socket of @DFlag{listen}, @DFlag{pid-file} and @filepath{FILE.status.json} beside it),
the manager keeps no file; it writes the pid and status files again if they are removed.
A listening socket's file cannot be made again (a new file would be a new socket, not the
one the workers accept on): put it where nothing cleans, such as @filepath{/run}.

@bold{The other faults}, each described where its option is:
@itemlist[
 @item{A step of the wall clock, forward or back, fires no deadline early and delays
       none: every deadline and interval runs on the monotonic clock (@secref["pm"]).}
 @item{A request that allocates without bound ends alone under @DFlag{request-memory}
       (by default @DFlag{max-memory}'s size), however fast it allocates: within about an
       eighth of the limit past it (a handler allocating 400 MiB a second under
       @DFlag{max-memory} @tt{300m} left its worker at 350-368 MiB of private memory,
       under the 600 MiB hard ceiling, the requests beside it answered);
       a worker whose private memory (what it does not share with other processes:
       @secref["preload-memory"]) passes @DFlag{max-memory-hard} is replaced without
       waiting; @racket[exit]
       in a handler ends its request only, and in a thread a handler started, that thread
       only (@secref["runaway"], @secref["recycle"]).}
 @item{A worker that is frozen, stopped or blocked in a foreign call is seen as
       @tt{late} within seconds and, with @DFlag{request-timeout}, replaced so that its
       requests are settled within the request timeout plus about 4.3 seconds (60 plus 10
       seconds of silence without it) (@secref["recycle"]).}
 @item{Reloads run one at a time, the last one asked serves in the end, and @exec{ctl
       reload} reports its own reload's outcome (@secref["signals"]).}
 @item{A start that cannot work exits non-zero within seconds with one line, and leaves no
       socket behind; @DFlag{check} validates without serving (@secref["fail-fast"]).}
 @item{A generation's loader that dies is replaced and serving goes on; an app that
       leaves at load what a fork cannot share (an open file, a socket) is loaded by each
       worker instead, with one warning line (@secref["preload"]).}
 @item{A log that is not read, or cannot be written, never holds up serving: its lines
       are dropped and counted, errors logged at most once a second (@secref["log-stall"]).}
]

@bold{Params are not environment variables.} Params are never put into the process's
environment, so a @wire{HTTP_PROXY} param (from a client's @tt{Proxy} header) cannot set
the @tt{HTTP_PROXY} variable that HTTP client libraries read: the ``httpoxy'' problem
does not apply. A servlet sees it only as a @tt{Proxy} header.

@bold{Repeated params.} A front can send the same param name twice.
@racket[fastcgi-param], and the server's own checks of @wire{CONTENT_LENGTH}, use the
first value. @racket[fastcgi-request-params] and the headers of the servlet's
@racket[request] keep both, in order. This is also what happens to one header sent
under two spellings: @tt{X-Forwarded-For} and @tt{X_Forwarded-For} both reach the
application as @wire{HTTP_X_FORWARDED_FOR} (a front that keeps the hyphen sends
@wire{HTTP_X_FORWARDED-FOR}, which the servlet adapter also names
@tt{X-Forwarded-For}), so the servlet sees two @tt{X-Forwarded-For} headers in the order
the front sent them and @racket[headers-assq*] returns the first. An application that
trusts such a header should take it only from a front that sets it itself.

@section[#:tag "inside"]{Inside the server}

For whoever changes the server. The modules of @filepath{fastcgi/private/} are in folders
by layer, lowest first; a module requires only modules of its own folder and of the
folders before it (@filepath{fastcgi/private/layers.rktd} gives the order, and a test
checks every module against it). The README's @italic{Layout} section lists every module
of each folder.

@(define-runtime-path layers-file "../private/layers.rktd")
@(itemlist
  (for/list ([l (in-list (call-with-input-file layers-file read))])
    (item (filepath (string-append (car l) "/")) ": " (cadr l) ".")))

The modules a request passes through, in order (in @filepath{engine/} unless a folder is
named):

@itemlist[#:style 'ordered
 @item{@filepath{server.rkt} accepts (@filepath{transport/listener.rkt}) and makes the connection:
       @filepath{wire.rkt}'s @tt{conn}, whose I/O is @filepath{io.rkt}'s record of actions
       (receive, send, send records, readable and writable events, shut down, close), one
       implementation over the socket's descriptor (@filepath{transport/socket-io.rkt}) and one over
       ports, so that no code asks which it has.}
 @item{@filepath{connection.rkt} serves it: the event loop (@filepath{os/poller.rkt}) runs its
       reader when the socket is readable. Exactly one party reads a connection at a
       time; who it is (parked in the loop, the loop, an inline handler, a thread of its
       own, taken over, ended) and every hand-over is the state machine of
       @filepath{owner.rkt}, whose header holds the table of transitions.}
 @item{The reader reads into the decoder's space (@filepath{protocol/protocol-decoder.rkt}; records
       per @filepath{protocol/protocol-record.rkt}, name-value pairs per
       @filepath{protocol/protocol-pairs.rkt}: the codec knows no sockets) and gives each record
       to @filepath{dispatch.rkt}: @wire{BEGIN_REQUEST} makes a request
       (@filepath{request.rkt}). A request's fields are written only by
       @filepath{request-state.rkt}, whose table of transitions moves it from
       @tt{params} to @tt{stdin} (an Authorizer straight to @tt{running}), to @tt{data} (a
       Filter's), to @tt{running}, and from any of them to @tt{done}; the others call
       those transitions by name. What a request sends is @filepath{request-output.rkt}'s
       own record, and a connection's read deadline is set only by @filepath{wire.rkt}, by
       what the connection waits for (a first record, the rest of one, the next request,
       the peer's end), or for a connection handed over (@filepath{os/handover.rkt}) by
       what it waited for with the time that had left. @wire{PARAMS} are checked
       and the request is admitted or refused before any handler runs, @wire{STDIN} and
       @wire{DATA} go to the handler under the body flow rule (@secref["flow"]). The
       connection layer answers in FastCGI terms; a refusal is a reason, and
       @filepath{protocol/cgi.rkt}, which makes every CGI answer the server itself sends, turns it
       into a status and a page.}
 @item{@filepath{handler-run.rkt} runs the handler, in the reader's own thread when the
       request is alone on its connection and its input has all arrived, else in a thread
       of its own: a servlet through @filepath{servlet/web.rkt} (with @filepath{servlet/servlet.rkt} and
       @filepath{servlet/sessions.rkt} for continuations) or a raw handler.}
 @item{What the handler writes is buffered and cut into @wire{STDOUT} records by
       @filepath{request-output.rkt}, and leaves with @wire{END_REQUEST} through
       @filepath{wire.rkt}'s one writer per connection and @filepath{io.rkt}.}
 @item{@filepath{handler-run.rkt}'s @tt{retire!} frees the request's id and keeps or closes
       the connection. Every deadline (first byte, idle, read, write, request, drain) is
       a field of the connection or request that the server's one timer
       (@filepath{timer.rkt}, on the monotonic clock of @filepath{util/clock.rkt}) sweeps.}
]

Settings are structs whose defaults are stated once: a listener's in
@filepath{transport/listener-options.rkt}, the limits in @filepath{util/limits.rkt}, @exec{serve}'s in
@filepath{worker/config.rkt}, which is also the one place the configuration is written for a
worker and read back.

The processes of a pool (@exec{raco fastcgi serve}, preloading; @secref["preload-memory"]),
as @exec{ps} shows them by name:

@verbatim{
raco fastcgi serve        the manager: a child subreaper, never loads the app
├─ fastcgi-base           the runtime and the server's libraries, its heap static, no app
├─ fastcgi-loader         one per generation, forked from the base: the app loaded once
├─ fastcgi-worker         forked from its generation's loader: accepts and serves
└─ ...                    (a program a handler starts, and its orphans: reaped)
}

The manager tracks each of them from the instant it starts it, or the fork that makes it
is answered, until it sees it exit; its state moves only as the tables of
@filepath{manager/lifecycle.rkt} say, the one module that writes them (a worker: starting,
ready, draining; a loader or the base: waiting, forking, loading, ready, unsafe, gone,
off), and a test checks them pair by pair.

Each of them talks to the manager over a connection of its own to the manager's control
socket (@filepath{worker/control.rkt}), in one-line messages that are each written once, in
@filepath{worker/lines.rkt}, from which both ends print and read them (a test holds every
line exactly); a worker's and a loader's end is @filepath{worker/manager-link.rkt}, the
manager's @filepath{manager/manager-reports.rkt}. Named fields (@tt{stat}'s) let either
end know more of them than the other. The messages, by who sends them:

@(define (forms channel) (apply itemlist (for/list ([f (in-list (message-forms channel))]) (item (tt f)))))
@itemlist[
 @item{First on each connection: @forms['greeting]}
 @item{A worker's, after its @tt{hello}: @forms['worker]}
 @item{A loader's or the base's: @forms['loader]}
 @item{The manager's (the keys first, on every connection): @forms['manager]}
]
