/* A minimal epoll FastCGI responder: the ceiling for any FastCGI backend on this machine.
 *
 *   responder unix:/path/to.sock      or      responder 127.0.0.1:9000
 *
 * One thread, non-blocking sockets, libc only. Connections are kept when the front sets
 * FCGI_KEEP_CONN and closed after the answer otherwise. Every answer is built whole in the
 * connection's output buffer and leaves in one write() (the rest waits for EPOLLOUT when
 * the kernel takes less). One request at a time per connection: nginx and HAProxy (without
 * mpxs-conns) never multiplex. Routes, on REQUEST_URI without its query:
 *   /1m, /16m   1 MiB or 16 MiB of 'x' with a Content-Length (the bench's large responses)
 *   /upload     reads the whole body and answers its length
 *   anything    "Hello, World!\n" as text/plain
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

enum { BEGIN_REQUEST = 1, ABORT_REQUEST = 2, END_REQUEST = 3, PARAMS = 4, STDIN = 5,
       STDOUT = 6, GET_VALUES = 9, GET_VALUES_RESULT = 10, UNKNOWN_TYPE = 11 };
enum { ROUTE_HELLO, ROUTE_1M, ROUTE_16M, ROUTE_UPLOAD };
#define MAX_PARAMS (1 << 20)
#define MAX_RECORD_BODY 65528 /* a multiple of 8 below 65535: no padding needed */

struct buf { unsigned char *p; size_t off, len, cap; };

struct conn {
    int fd;
    struct buf in, out, params;
    int id, keep, route, closing, want_out;
    unsigned long long body;
};

static int epfd;
static const char hello[] =
    "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nHello, World!\n";
static unsigned char *large_1m, *large_16m;
static size_t large_1m_len, large_16m_len;

static void die(const char *what) { perror(what); exit(1); }

static void reserve(struct buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + extra) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) die("realloc");
    b->cap = cap;
}

static void append(struct buf *b, const void *data, size_t n) {
    reserve(b, n);
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void record_header(struct buf *b, int type, int id, size_t clen) {
    unsigned char h[8] = { 1, (unsigned char)type, (unsigned char)(id >> 8), (unsigned char)id,
                           (unsigned char)(clen >> 8), (unsigned char)clen, 0, 0 };
    append(b, h, 8);
}

static void stdout_records(struct conn *c, const unsigned char *data, size_t n) {
    reserve(&c->out, n + 8 * (n / MAX_RECORD_BODY + 1));
    while (n > 0) {
        size_t k = n < MAX_RECORD_BODY ? n : MAX_RECORD_BODY;
        record_header(&c->out, STDOUT, c->id, k);
        append(&c->out, data, k);
        data += k;
        n -= k;
    }
}

static void end_request(struct conn *c, int protocol_status) {
    unsigned char body[8] = { 0, 0, 0, 0, (unsigned char)protocol_status, 0, 0, 0 };
    record_header(&c->out, STDOUT, c->id, 0);
    record_header(&c->out, END_REQUEST, c->id, 8);
    append(&c->out, body, 8);
    if (!c->keep) c->closing = 1;
    c->id = 0;
}

static void answer(struct conn *c) {
    char text[160];
    switch (c->route) {
    case ROUTE_1M: stdout_records(c, large_1m, large_1m_len); break;
    case ROUTE_16M: stdout_records(c, large_16m, large_16m_len); break;
    case ROUTE_UPLOAD: {
        int n = snprintf(text, sizeof text,
                         "Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nlength=%llu\n", c->body);
        stdout_records(c, (unsigned char *)text, (size_t)n);
        break;
    }
    default: stdout_records(c, (const unsigned char *)hello, sizeof hello - 1);
    }
    end_request(c, 0);
}

/* read_length: a FastCGI name or value length, 1 or 4 bytes; -1 past the end */
static long read_length(const unsigned char *p, size_t len, size_t *i) {
    if (*i >= len) return -1;
    if (p[*i] < 128) return p[(*i)++];
    if (*i + 4 > len) return -1;
    long n = ((long)(p[*i] & 0x7f) << 24) | (p[*i + 1] << 16) | (p[*i + 2] << 8) | p[*i + 3];
    *i += 4;
    return n;
}

/* route_of: the route named by REQUEST_URI in the complete params */
static int route_of(const struct buf *params) {
    size_t i = 0;
    while (i < params->len) {
        long nl = read_length(params->p, params->len, &i);
        long vl = read_length(params->p, params->len, &i);
        if (nl < 0 || vl < 0 || i + nl + vl > params->len) break;
        const char *name = (const char *)params->p + i, *value = name + nl;
        i += nl + vl;
        if (nl == 11 && memcmp(name, "REQUEST_URI", 11) == 0) {
            size_t path = 0;
            while (path < (size_t)vl && value[path] != '?') path++;
            if (path == 3 && memcmp(value, "/1m", 3) == 0) return ROUTE_1M;
            if (path == 4 && memcmp(value, "/16m", 4) == 0) return ROUTE_16M;
            if (path == 7 && memcmp(value, "/upload", 7) == 0) return ROUTE_UPLOAD;
            return ROUTE_HELLO;
        }
    }
    return ROUTE_HELLO;
}

static void get_values_result(struct conn *c) {
    static const unsigned char pairs[] =
        "\x0e\x04" "FCGI_MAX_CONNS" "4096"
        "\x0d\x01" "FCGI_MAX_REQS" "1"
        "\x0f\x01" "FCGI_MPXS_CONNS" "0";
    record_header(&c->out, GET_VALUES_RESULT, 0, sizeof pairs - 1);
    append(&c->out, pairs, sizeof pairs - 1);
}

/* handle: one complete record; returns -1 when the connection must be dropped */
static int handle(struct conn *c, int type, int id, const unsigned char *body, size_t n) {
    switch (type) {
    case BEGIN_REQUEST:
        if (n < 8) return -1;
        c->id = id;
        c->keep = body[2] & 1;
        c->params.len = 0;
        c->body = 0;
        if (((body[0] << 8) | body[1]) != 1) end_request(c, 3); /* FCGI_UNKNOWN_ROLE */
        return 0;
    case PARAMS:
        if (id != c->id) return 0;
        if (n == 0) { c->route = route_of(&c->params); return 0; }
        if (c->params.len + n > MAX_PARAMS) return -1;
        append(&c->params, body, n);
        return 0;
    case STDIN:
        if (id != c->id) return 0;
        if (n == 0) answer(c); else c->body += n;
        return 0;
    case ABORT_REQUEST:
        if (id == c->id) end_request(c, 0);
        return 0;
    case GET_VALUES:
        get_values_result(c);
        return 0;
    default: {
        unsigned char unknown[8] = { (unsigned char)type, 0, 0, 0, 0, 0, 0, 0 };
        record_header(&c->out, UNKNOWN_TYPE, 0, 8);
        append(&c->out, unknown, 8);
        return 0;
    }
    }
}

static void drop(struct conn *c) {
    close(c->fd); /* also removes it from the epoll set */
    free(c->in.p);
    free(c->out.p);
    free(c->params.p);
    free(c);
}

/* flush: one write of everything pending; EPOLLOUT while some is left */
static int flush(struct conn *c) {
    if (c->out.len > c->out.off) {
        ssize_t w = write(c->fd, c->out.p + c->out.off, c->out.len - c->out.off);
        if (w < 0 && errno != EAGAIN && errno != EINTR) return -1;
        if (w > 0) c->out.off += (size_t)w;
    }
    int pending = c->out.len > c->out.off;
    if (!pending) c->out.off = c->out.len = 0;
    if (!pending && c->closing) return -1;
    if (pending != c->want_out) {
        struct epoll_event ev = { .events = EPOLLIN | (pending ? EPOLLOUT : 0), .data.ptr = c };
        if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) return -1;
        c->want_out = pending;
    }
    return 0;
}

/* on_readable: read what is there, handle each complete record, then write once */
static int on_readable(struct conn *c) {
    for (;;) {
        reserve(&c->in, 65536);
        size_t room = c->in.cap - c->in.len;
        ssize_t r = read(c->fd, c->in.p + c->in.len, room);
        if (r == 0) return -1;
        if (r < 0) {
            if (errno == EAGAIN) break;
            if (errno == EINTR) continue;
            return -1;
        }
        c->in.len += (size_t)r;
        while (c->in.len - c->in.off >= 8) {
            const unsigned char *h = c->in.p + c->in.off;
            size_t clen = (h[4] << 8) | h[5], need = 8 + clen + h[6];
            if (c->in.len - c->in.off < need) break;
            if (h[0] != 1 || handle(c, h[1], (h[2] << 8) | h[3], h + 8, clen) < 0) return -1;
            c->in.off += need;
        }
        memmove(c->in.p, c->in.p + c->in.off, c->in.len - c->in.off);
        c->in.len -= c->in.off;
        c->in.off = 0;
        if ((size_t)r < room) break; /* drained: saves the read that would say EAGAIN */
    }
    return flush(c);
}

static int listen_on(const char *addr) {
    int fd;
    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(addr + 5) >= sizeof sa.sun_path) { fprintf(stderr, "path too long\n"); exit(2); }
        strcpy(sa.sun_path, addr + 5);
        unlink(sa.sun_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
        chmod(sa.sun_path, 0660);
    } else {
        char host[64];
        const char *colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= sizeof host) { fprintf(stderr, "bad address\n"); exit(2); }
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = 0;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
        if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) { fprintf(stderr, "bad host\n"); exit(2); }
        int one = 1;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
    }
    if (listen(fd, 4096) < 0) die("listen");
    return fd;
}

static unsigned char *large_answer(size_t n, size_t *len) {
    char head[128];
    int h = snprintf(head, sizeof head,
                     "Status: 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\n\r\n", n);
    unsigned char *p = malloc((size_t)h + n);
    if (!p) die("malloc");
    memcpy(p, head, (size_t)h);
    memset(p + h, 'x', n);
    *len = (size_t)h + n;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: responder unix:/path | HOST:PORT\n"); return 2; }
    signal(SIGPIPE, SIG_IGN);
    large_1m = large_answer(1 << 20, &large_1m_len);
    large_16m = large_answer(16 << 20, &large_16m_len);
    int lfd = listen_on(argv[1]), inet = strncmp(argv[1], "unix:", 5) != 0;
    epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) < 0) die("epoll");
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    int one = 1;
                    if (inet) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    c = calloc(1, sizeof *c);
                    if (!c) die("calloc");
                    c->fd = fd;
                    struct epoll_event cev = { .events = EPOLLIN, .data.ptr = c };
                    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev) < 0) drop(c);
                }
                continue;
            }
            int rc = 0;
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) rc = on_readable(c);
            else if (events[i].events & EPOLLOUT) rc = flush(c);
            if (rc < 0) drop(c);
        }
    }
}
