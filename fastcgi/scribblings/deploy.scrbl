#lang scribble/manual
@(require scribble/core)

@(define (wire . s) (apply tt s))
@(define (conf . s) (nested #:style 'code-inset (apply verbatim s)))

@title[#:tag "deploy"]{Deployment}

The repository's @filepath{deploy/} folder holds a configuration for each front. Every
one is run by a test of the suite exactly as published: the test reads the file from
@filepath{deploy/}, replaces its placeholders (@tt["@SOCKET@"], @tt["@LISTEN@"], ...,
listed at the top of each file) and starts the real front with it, then sends requests
through. The excerpts below show the parts that matter; the files have the rest and a
@filepath{README.md} each.

@section[#:tag "deploy-nginx"]{nginx}

Files: @filepath{deploy/nginx/racket-app.conf} (unix socket),
@filepath{racket-app-tcp.conf} (TCP), @filepath{racket-app-prefix.conf} (mounted under
@tt{/app/}), for nginx's @tt{http} block; test:
@filepath{tests/integration/deploy-nginx-test.rkt}.

@conf|{
upstream racket_app {
    server unix:/run/racket-app/app.sock;
    keepalive 16;
}
server {
    listen 80;
    client_max_body_size 64m;
    location / {
        include fastcgi_params;
        fastcgi_pass racket_app;
        fastcgi_keep_conn on;
        fastcgi_request_buffering off;
    }
}
}|

nginx reuses a connection to the app only with both @tt{keepalive} in the
@tt{upstream}, which keeps idle connections in a cache, and @tt{fastcgi_keep_conn on},
which sets @wire{FCGI_KEEP_CONN} so that the app keeps the connection after its answer.
With either one missing, every request opens and closes a connection; the test checks
that five requests in a row travel on one connection. @tt{client_max_body_size} matches
the app's default @DFlag{max-body}; @tt{fastcgi_request_buffering off} hands the body to
the app as it arrives.

Mounted under a prefix, @tt{fastcgi_split_path_info ^(/app)(/.*)$} makes
@wire{SCRIPT_NAME} @tt{/app} and @wire{PATH_INFO} the rest (with
@tt{fastcgi_param PATH_INFO $fastcgi_path_info}). A servlet's request URI is still the
whole path, from @wire{REQUEST_URI}: its routes include the prefix, or it strips
@wire{SCRIPT_NAME}. A path the regular expression does not match, such as one with an
encoded newline (@tt{%0a}, the request shape behind php-fpm's CVE-2019-11043), leaves
@wire{PATH_INFO} empty and @wire{SCRIPT_NAME} the whole path; an application must not
take @wire{PATH_INFO} as set. The test sends that request shape with long query strings
and gets ordinary 404 answers, and the app keeps serving.

The app's socket has mode @tt{0660}: run the app as nginx's user, or give the socket
nginx's group with @DFlag{socket-group}.

@section[#:tag "deploy-haproxy"]{HAProxy}

File: @filepath{deploy/haproxy/haproxy.cfg} (HAProxy 2.1 or later; tested with 2.6);
test: @filepath{tests/integration/haproxy-test.rkt}, which runs HAProxy chrooted into a
temporary directory as the @tt{haproxy} user and group.

@conf|{
global
    chroot /var/lib/haproxy
    user haproxy
    group haproxy

backend racket
    use-fcgi-app racket-app
    http-reuse always
    server app1 unix@/run/app.sock proto fcgi maxconn 100

fcgi-app racket-app
    docroot /srv/racket-app
    index index.rkt
    path-info ^(/app)(/.*)?$
    option keep-conn
    #option mpxs-conns
    #option max-reqs 100
}|

HAProxy chroots after reading its configuration, so the socket lives inside the chroot
and the server line names it from inside (@tt{/run/app.sock} is
@filepath{/var/lib/haproxy/run/app.sock}). Serve the app with
@DFlag{socket-group} @tt{haproxy}: the socket is then @tt{0660 root:haproxy}, open to
HAProxy's group only.

@tt{option keep-conn} keeps FastCGI connections open between requests; @tt{maxconn}
on the server line caps the requests in flight to the app (more wait in HAProxy's queue),
below the app's @DFlag{max-concurrent}.

Multiplexing is off in the published file. With @tt{option mpxs-conns} and
@tt{max-reqs 100}, HAProxy sends several requests at once on one FastCGI connection, which
the server multiplexes (@tt{http-reuse always} lets requests from different client
connections share it; 100 is what one connection takes, @DFlag{max-requests-per-connection},
which the server also reports as @wire{FCGI_MAX_REQS}). But HAProxy 2.6.12, Debian 12's,
multiplexing under load answers a share of requests with its own 500 (termination state
@tt{IH}) before the app sees them: its trace says it failed to encode the request's
@wire{FCGI_PARAMS} (HAProxy's issue 2568 reports the same symptom against 2.9.7, closed
as fixed). Measured with
@exec{racket tools/haproxy-mpx-check.rkt} (wrk, 10 seconds a run): at 24 client
connections, 300 of 221,972 requests; at 64, 2,723 of 248,202; none without the two lines
(@filepath{deploy/haproxy/README.md}). With a HAProxy that has the fix (the tool's rows
with the lines show none), uncomment them: the test runs the file with them too and finds
12 concurrent requests from 12 client connections on 2 FastCGI connections, up to 6 at
once on one.

@tt{docroot} is required by HAProxy and becomes @wire{DOCUMENT_ROOT}; the app does not
read it. @tt{path-info} gives @wire{SCRIPT_NAME} and @wire{PATH_INFO}; with it set,
HAProxy answers a path that decodes to a newline or NUL itself, without the app.

@section[#:tag "deploy-lighttpd"]{lighttpd}

File: @filepath{deploy/lighttpd/lighttpd.conf} (tested with lighttpd 1.4.69); test:
@filepath{tests/integration/lighttpd-test.rkt}.

@conf|{
fastcgi.server = (
    "/app" => ((
        "socket"      => "/run/lighttpd/app.sock",
        "bin-path"    => "/usr/bin/raco fastcgi serve /srv/app/app.rkt --workers 1",
        "min-procs"   => 1,
        "max-procs"   => 2,
        "check-local" => "disable",
    )),
)
$HTTP["url"] =~ "^/private/" {
    fastcgi.server = (
        "/private/" => ((
            "socket"      => "/run/racket-auth/auth.sock",
            "mode"        => "authorizer",
            "docroot"     => "/var/www/html",
            "check-local" => "disable",
        )),
    )
}
}|

With @tt{bin-path}, lighttpd spawns the app: it creates the socket (@tt{app.sock-0},
@tt{app.sock-1}, one per process), listens on it and starts the command with the socket
as file descriptor 0; @exec{raco fastcgi serve} without @DFlag{listen} detects it.
lighttpd 1.4.69 reads @tt{min-procs}: with the values above it started one process, and
@tt{max-procs} when @tt{min-procs} is left out. Each process here is a manager with one
worker; with @tt{max-procs 1} and @DFlag{workers} @italic{N} instead, the manager runs
the workers and replaces one that dies.

Under @tt{/private/}, each request first goes to an Authorizer (here
@filepath{examples/authorizer.rkt}, on its own socket). Its 200 lets lighttpd serve the
file from @tt{docroot}; any other answer goes to the client. The test checks a request
without a token (401 and the Authorizer's @tt{WWW-Authenticate}), with a wrong token
(403) and with a valid one (the file).

@section[#:tag "deploy-cluster"]{Several machines}

Files: @filepath{deploy/cluster/haproxy.cfg} (round robin) and
@filepath{deploy/cluster/haproxy-sticky.cfg} (sessions pinned by a cookie), with a
@filepath{README.md}; tests: @filepath{tests/integration/cluster-test.rkt} and
@filepath{tests/integration/cluster-servlet-test.rkt} (both need root).

@conf|{
defaults
    timeout connect 1s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout

backend racket
    use-fcgi-app racket-app
    balance roundrobin
    option httpchk GET /ping
    http-check expect status 200
    default-server proto fcgi check inter 500ms fall 2 rise 2 maxconn 100
    server app1 10.0.0.11:9000
    server app2 10.0.0.12:9000
    server app3 10.0.0.13:9000
}|

Each machine runs @exec{raco fastcgi serve app.rkt --listen ADDRESS:9000 --ping-path /ping
--allowed-clients LB-ADDRESS}; the machines share nothing, so data belongs in a database.
HAProxy's health check is a FastCGI request for @tt{/ping}; a request whose host fails is
retried on another one. @tt{empty-response} and @tt{response-timeout} replay a request
the app may have started, which suits GET and HEAD; with non-idempotent POSTs keep
@tt{retry-on conn-failure} only.

Start the apps before HAProxy, or expect 503s at first: the checks HAProxy makes before an
app listens fail, two failures take that host out, and with every host out HAProxy
answers 503 itself (@tt{NOSRV} in its log) until two checks in a row pass
(@tt{inter 500ms rise 2}). The test starts HAProxy once the apps answer, and its load once
answers through HAProxy have come from all three hosts.

@subsection[#:tag "deploy-cluster-sessions"]{Servlet sessions across machines}

A servlet's sessions (@secref["continuations"]) take one of two ways.

@bold{Stateful servlets: sticky sessions.} A continuation captured by
@racketidfont{send/suspend} and its family lives in one worker of one machine; the workers
of a machine pass each other's URLs on, but machines do not. @filepath{haproxy-sticky.cfg}
is @filepath{haproxy.cfg} with a cookie that pins each client to the machine that answered
its first request:

@conf|{
backend racket
    balance roundrobin
    cookie SRV insert indirect nocache httponly
    server app1 10.0.0.11:9000 cookie app1
    server app2 10.0.0.12:9000 cookie app2
    server app3 10.0.0.13:9000 cookie app3
}|

HAProxy sets and strips the cookie itself; the app never sees it. When the pinned machine
is down, the request goes to another one (the health checks take the machine out within
about a second, and @tt{option redispatch 1} sends a retry elsewhere before that), which
does not know the continuation and answers the servlet's expiration page (status 200),
never a 5xx; HAProxy then pins the client to that machine.

@bold{Stateless servlets: any machine, one secret.} A stateless servlet's continuation
travels in its URL, signed under the secret of @DFlag{secret-file}. Give every machine the
same file and any machine resumes any URL; the round-robin @filepath{haproxy.cfg} serves
them with no stickiness:

@conf|{
head -c 32 /dev/urandom | base64 > /etc/racket-app/secret   # once; copy to every machine
chown app:app /etc/racket-app/secret && chmod 0600 /etc/racket-app/secret
raco fastcgi serve app.rkt --listen 10.0.0.11:9000 --ping-path /ping \
     --allowed-clients 10.0.0.1 --secret-file /etc/racket-app/secret
}|

The secret is in no URL and no log line. A machine with another secret (or none: then each
manager makes its own) answers the others' URLs 400 without deserializing them. Every
machine also needs the app at the same absolute path (a serialized continuation names its
module by path) and in the same version. @racketmodname[web-server]'s default stuffer keeps
a continuation whose URL would pass 2048 bytes even when gzipped in a file under the home
folder of the machine that made it, which the others do not have: keep such state small,
or give the servlet a stuffer without that stage, such as
@racket[(stuffer-chain serialize-stuffer gzip-stuffer base64-stuffer)].

A machine that vanishes without closing its connections (power, cable) is slower to leave
than one whose apps stop: a request HAProxy has just sent it on an idle connection waits
for @tt{timeout server} (30 s in both files) before @tt{retry-on response-timeout} sends it
elsewhere.

@subsection[#:tag "deploy-cluster-tests"]{The tests}

@filepath{cluster-test.rkt} makes three hosts and a load balancer as network namespaces,
with addresses in a /24 that exists only inside them. Under a load of four clients, it
stops one host's app with SIGTERM and takes the host's link down: every answer is still a
200. It then brings the link up and restarts the app, and the host receives requests
again.

@filepath{cluster-servlet-test.rkt} makes four hosts the same way (in another /24). Each
of three serves a stateful counter servlet behind @filepath{haproxy-sticky.cfg} and the same
counter as a stateless servlet, with one @DFlag{secret-file}, behind @filepath{haproxy.cfg}
(@DFlag{workers} 2 each); the fourth serves the stateless one with another secret. Every
step of six interleaved stateful sessions is answered 200 by the host that pinned it, with
the session's state; the steps of each stateless session are answered by several hosts,
the state carried in the URL; the odd host answers the others' URLs 400, and they answer
its URLs 400. Then the apps of the host pinned by a session stop and its link goes down:
that session's next step is the expiration page (200) from another host, other sessions
go on, new ones start on the remaining hosts, and stateless sessions go on there. No URL,
page or log holds the secret, and no answer of the run is a 5xx.

@include-section["deploy-apache.scrbl"]
