/*
 * fcgi-trampoline: a CGI program that forwards its one request to a FastCGI application
 * and relays the answer, for hosts that run CGI programs but not FastCGI ones.
 *
 *   CGI environment (all of environ)  -> FastCGI PARAMS
 *   stdin (CONTENT_LENGTH bytes)      -> FastCGI STDIN, streamed in records of 65528 bytes
 *   FastCGI STDOUT                    -> stdout: the CGI header block checked, then the
 *                                        body streamed as it arrives
 *   FastCGI STDERR                    -> stderr (the web server's error log)
 *
 * One Responder request, id 1, without KEEP_CONN, to FASTCGI_CONNECT (unix:/path,
 * IPv4:PORT or [IPv6]:PORT; default DEFAULT_CONNECT). Only libc.
 *
 * The application is treated as hostile: record lengths and padding are consumed as a
 * stream through a small state machine and never used to size a buffer, the header block
 * is bounded, and every wait (connect, each read, each write, on every descriptor) has a
 * deadline. Failures give a clean CGI answer while no header has been sent (see the exit
 * codes below and README.md); after that, the body just stops and the exit status says why.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef DEFAULT_CONNECT
#define DEFAULT_CONNECT "unix:/run/fastcgi/app.sock"
#endif
#ifndef CONNECT_TIMEOUT
#define CONNECT_TIMEOUT 5   /* seconds to establish the connection */
#endif
#ifndef IO_TIMEOUT
#define IO_TIMEOUT 30       /* seconds any one read or write may wait; below Apache's Timeout (60) */
#endif

/* Exit statuses (documented in README.md). */
enum {
    XC_OK = 0,           /* the application's answer was relayed whole */
    XC_CONFIG = 1,       /* bad FASTCGI_CONNECT or FASTCGI_TIMEOUT, out of memory: 500 */
    XC_UNAVAILABLE = 2,  /* cannot connect (refused, no socket, timeout): 503 */
    XC_BAD_RESPONSE = 3, /* malformed FastCGI or CGI header, or EOF before END_REQUEST: 502 */
    XC_TIMEOUT = 4,      /* the application stopped making progress: 504 */
    XC_CLIENT = 5,       /* reading stdin or writing stdout failed (client or server gone) */
    XC_BAD_REQUEST = 6   /* CONTENT_LENGTH is not a number: 400 */
};

/* FastCGI wire numbers. */
enum {
    FCGI_BEGIN_REQUEST = 1, FCGI_END_REQUEST = 3, FCGI_PARAMS = 4, FCGI_STDIN = 5,
    FCGI_STDOUT = 6, FCGI_STDERR = 7, FCGI_RESPONDER = 1,
    FCGI_CANT_MPX_CONN = 1, FCGI_OVERLOADED = 2
};

#define RECORD_MAX 65528     /* largest content that keeps 8-byte alignment without padding */
#define READ_SIZE 65536      /* one read from the application */
#define HEADER_MAX 65536     /* the CGI header block, at most */
#define DOWN_CAP (READ_SIZE + 2 * HEADER_MAX + 16)  /* normalising adds at most a CR per line */
#define STALL_MS 1000        /* see relay(): how long a stalemate lasts before the body is dropped */

static int io_ms = IO_TIMEOUT * 1000;
static int connect_ms = CONNECT_TIMEOUT * 1000;
static int headers_sent = 0;          /* the header block reached stdout: no more error pages */
static int saved_flags[3] = {-1, -1, -1};   /* fd flags before O_NONBLOCK, restored at exit */

/* ---- Exit paths ---------------------------------------------------------------------- */

/* restore_fds: give fds 0-2 back their blocking mode; the open file descriptions may be
 * shared with whoever started us (a shell pipeline), so O_NONBLOCK must not leak. */
static void restore_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (saved_flags[fd] != -1)
            fcntl(fd, F_SETFL, saved_flags[fd]);
}

static void finish(int code)
{
    restore_fds();
    _exit(code);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* wait_fd: poll one fd for events; 1 when ready, 0 on timeout, -1 on error. */
static int wait_fd(int fd, short events, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int64_t left = deadline - now_ms();
        if (left < 0)
            left = 0;
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* write_all: write n bytes, each wait bounded by timeout_ms; 0, or -1 with errno set
 * (ETIMEDOUT on timeout). Sockets get MSG_NOSIGNAL as well as the ignored SIGPIPE. */
static int write_all(int fd, const void *buf, size_t n, int timeout_ms, int is_socket)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = is_socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_fd(fd, POLLOUT, timeout_ms);
            if (r == 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            if (r < 0)
                return -1;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w == 0)
                errno = EIO;
            return -1;
        }
    }
    return 0;
}

/* log_msg: one line on stderr, "fcgi-trampoline: ...", control characters shown as '?'
 * so that nothing from the request or the application can forge log lines. */
static void log_msg(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n = snprintf(line, sizeof line, "fcgi-trampoline: ");
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
    line[len++] = '\n';
    (void)write_all(2, line, len, io_ms, 0);
}

/* fail: answer with a CGI error page if no header was sent yet, log why, exit with code.
 * Once the header block is out, the status cannot change: the body stops short and the
 * exit status (and the log line) tell the server. */
static void fail(int status, const char *reason, int code, const char *fmt, ...)
{
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (!headers_sent) {
        char page[256];
        int n = snprintf(page, sizeof page,
                         "Status: %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%d %s\n",
                         status, reason, status, reason);
        log_msg("%s (answered %d)", detail, status);
        (void)write_all(1, page, (size_t)n, io_ms, 0);
    } else {
        log_msg("%s (response cut short)", detail);
    }
    finish(code);
}

/* ---- Configuration ------------------------------------------------------------------- */

struct target {
    struct sockaddr_storage addr;
    socklen_t len;
    int tcp;
};

/* parse_port: a decimal port 1..65535 with nothing after it, or -1. */
static int parse_port(const char *s)
{
    long v = 0;
    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
        if (v > 65535)
            return -1;
    }
    return v == 0 ? -1 : (int)v;
}

/* parse_target: unix:/path, A.B.C.D:PORT or [IPv6]:PORT (literals only: no DNS, which
 * could hang); 0 on success. */
static int parse_target(const char *s, struct target *t)
{
    memset(t, 0, sizeof *t);
    if (strncmp(s, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&t->addr;
        const char *path = s + 5;
        size_t n = strlen(path);
        if (n == 0 || n >= sizeof un->sun_path)
            return -1;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, path, n + 1);
        t->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
        return 0;
    }
    char host[INET6_ADDRSTRLEN + 1];
    const char *port;
    size_t hn;
    int v6 = s[0] == '[';
    if (v6) {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return -1;
        hn = (size_t)(end - s - 1);
        if (hn >= sizeof host)
            return -1;
        memcpy(host, s + 1, hn);
        port = end + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return -1;
        hn = (size_t)(colon - s);
        if (hn >= sizeof host)
            return -1;
        memcpy(host, s, hn);
        port = colon + 1;
    }
    host[hn] = '\0';
    int p = parse_port(port);
    if (p < 0)
        return -1;
    t->tcp = 1;
    if (v6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&t->addr;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
            return -1;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)p);
        t->len = sizeof *in6;
    } else {
        struct sockaddr_in *in4 = (struct sockaddr_in *)&t->addr;
        if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
            return -1;
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)p);
        t->len = sizeof *in4;
    }
    return 0;
}

/* parse_timeout: FASTCGI_TIMEOUT, seconds (fractions allowed), 0 < s <= 86400; ms or -1. */
static int parse_timeout(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v <= 0 || v > 86400)
        return -1;
    int ms = (int)(v * 1000);
    return ms < 1 ? 1 : ms;
}

/* parse_length: CONTENT_LENGTH, plain decimal digits (empty or unset is 0); 0 or -1. */
static int parse_length(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    *out = 0;
    if (!s || *s == '\0')
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* ---- Connecting ---------------------------------------------------------------------- */

/* connect_app: a non-blocking connected socket, or a 503 (exit) on failure. */
static int connect_app(const struct target *t, const char *name)
{
    int s = socket(t->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail(503, "Service Unavailable", XC_UNAVAILABLE, "socket for %s: %s", name, strerror(errno));
    if (connect(s, (const struct sockaddr *)&t->addr, t->len) < 0) {
        /* A unix socket whose backlog is full answers EAGAIN (not EINPROGRESS): the
         * application is overloaded, a 503 like a refusal. */
        if (errno != EINPROGRESS && errno != EINTR)
            fail(503, "Service Unavailable", XC_UNAVAILABLE, "connect %s: %s", name, strerror(errno));
        int r = wait_fd(s, POLLOUT, connect_ms);
        if (r == 0)
            fail(503, "Service Unavailable", XC_UNAVAILABLE, "connect %s: timed out after %d ms",
                 name, connect_ms);
        int err = 0;
        socklen_t elen = sizeof err;
        if (r < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
            err = errno;
        if (err)
            fail(503, "Service Unavailable", XC_UNAVAILABLE, "connect %s: %s", name, strerror(err));
    }
    if (t->tcp) {
        /* The request goes out in a few writes; Nagle would hold the last small one back
         * until the application's delayed ACK (up to 40 ms). */
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return s;
}

/* ---- Encoding the request ------------------------------------------------------------ */

/* put_record: header, content and zero padding to 8-byte alignment at dst; bytes written. */
static size_t put_record(unsigned char *dst, int type, const unsigned char *content, size_t len)
{
    size_t pad = (8 - len % 8) % 8;
    dst[0] = 1;
    dst[1] = (unsigned char)type;
    dst[2] = 0;
    dst[3] = 1;                       /* request id 1 */
    dst[4] = (unsigned char)(len >> 8);
    dst[5] = (unsigned char)(len & 0xff);
    dst[6] = (unsigned char)pad;
    dst[7] = 0;
    if (len)
        memmove(dst + 8, content, len);
    memset(dst + 8 + len, 0, pad);
    return 8 + len + pad;
}

/* put_length: a pair length in 1 byte (< 128) or 4 bytes with the top bit set. */
static size_t put_length(unsigned char *dst, size_t n)
{
    if (n < 128) {
        dst[0] = (unsigned char)n;
        return 1;
    }
    dst[0] = (unsigned char)((n >> 24) | 0x80);
    dst[1] = (unsigned char)(n >> 16);
    dst[2] = (unsigned char)(n >> 8);
    dst[3] = (unsigned char)n;
    return 4;
}

/* encode_request: BEGIN_REQUEST and the PARAMS stream from environ (pairs straddle
 * records freely), plus the empty STDIN record when there is no body; *len is set.
 * The environment is bounded by the kernel (ARG_MAX), so holding it encoded is too. */
static unsigned char *encode_request(char **env, int no_body, size_t *len)
{
    size_t total = 0;
    for (char **e = env; *e; e++)
        total += strlen(*e) + 8;
    unsigned char *pairs = malloc(total + 1);
    if (!pairs)
        fail(500, "Internal Server Error", XC_CONFIG, "out of memory encoding %zu bytes of params", total);
    size_t plen = 0;
    for (char **e = env; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            continue;
        size_t nn = (size_t)(eq - *e), vn = strlen(eq + 1);
        if (nn > INT32_MAX || vn > INT32_MAX)
            continue;
        plen += put_length(pairs + plen, nn);
        plen += put_length(pairs + plen, vn);
        memcpy(pairs + plen, *e, nn);
        plen += nn;
        memcpy(pairs + plen, eq + 1, vn);
        plen += vn;
    }
    size_t records = plen / RECORD_MAX + 1;
    unsigned char *out = malloc(16 + plen + records * 16 + 16);
    if (!out)
        fail(500, "Internal Server Error", XC_CONFIG, "out of memory encoding %zu bytes of params", plen);
    unsigned char begin[8] = {0, FCGI_RESPONDER, 0 /* no KEEP_CONN */, 0, 0, 0, 0, 0};
    size_t o = put_record(out, FCGI_BEGIN_REQUEST, begin, sizeof begin);
    for (size_t off = 0; off < plen; off += RECORD_MAX) {
        size_t n = plen - off < RECORD_MAX ? plen - off : RECORD_MAX;
        o += put_record(out + o, FCGI_PARAMS, pairs + off, n);
    }
    o += put_record(out + o, FCGI_PARAMS, NULL, 0);
    if (no_body)
        o += put_record(out + o, FCGI_STDIN, NULL, 0);
    free(pairs);
    *len = o;
    return out;
}

/* ---- Decoding the response ----------------------------------------------------------- */

struct response {
    /* record state machine */
    unsigned char hdr[8];
    size_t hlen;
    int type, id;
    size_t content_left, pad_left;
    unsigned char end_body[8];
    size_t end_len;
    int ended;                        /* END_REQUEST for id 1 seen */
    int protocol_status;
    /* CGI header block, until its blank line */
    unsigned char head[HEADER_MAX];
    size_t head_len;
    int head_done;
    /* bytes for stdout */
    unsigned char down[DOWN_CAP];
    size_t down_len, down_off;
};

static void bad_response(const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    fail(502, "Bad Gateway", XC_BAD_RESPONSE, "bad response from the application: %s", detail);
}

static int is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* check_header_line: "Name: value" with a token name and no control characters in the
 * value but tab; a Status value must start with a code 100-599. */
static void check_header_line(const unsigned char *line, size_t n)
{
    size_t i = 0;
    while (i < n && is_token_char(line[i]))
        i++;
    if (i == 0 || i >= n || line[i] != ':')
        bad_response("CGI header line is not \"Name: value\"");
    for (size_t j = i + 1; j < n; j++)
        if ((line[j] < 0x20 && line[j] != '\t') || line[j] == 0x7f)
            bad_response("control character in a CGI header value");
    if (i == 6 && strncasecmp((const char *)line, "Status", 6) == 0) {
        size_t j = i + 1;
        while (j < n && (line[j] == ' ' || line[j] == '\t'))
            j++;
        if (j + 3 > n || line[j] < '1' || line[j] > '5' || line[j + 1] < '0' || line[j + 1] > '9' ||
            line[j + 2] < '0' || line[j + 2] > '9' || (j + 3 < n && line[j + 3] != ' '))
            bad_response("Status header without a code 100-599");
    }
}

/* emit_head: the header block head[0..end) (its blank line excluded) checked and written
 * to down with CRLF line ends, then the blank line. */
static void emit_head(struct response *r, size_t end)
{
    size_t start = 0, lines = 0;
    while (start < end) {
        const unsigned char *nl = memchr(r->head + start, '\n', end - start);
        size_t stop = nl ? (size_t)(nl - r->head) : end;
        size_t n = stop - start;
        if (n > 0 && r->head[start + n - 1] == '\r')
            n--;
        check_header_line(r->head + start, n);
        memcpy(r->down + r->down_len, r->head + start, n);
        r->down_len += n;
        r->down[r->down_len++] = '\r';
        r->down[r->down_len++] = '\n';
        lines++;
        start = stop + 1;
    }
    if (lines == 0)
        bad_response("no CGI header before the body");
    r->down[r->down_len++] = '\r';
    r->down[r->down_len++] = '\n';
    r->head_done = 1;
}

/* stdout_bytes: STDOUT content; while the header block is open it is collected (bounded),
 * and once its blank line is found the block is checked and the rest is body. */
static void stdout_bytes(struct response *r, const unsigned char *p, size_t n)
{
    if (r->head_done) {
        memcpy(r->down + r->down_len, p, n);
        r->down_len += n;
        return;
    }
    size_t room = HEADER_MAX - r->head_len;
    size_t take = n < room ? n : room;
    size_t scan = r->head_len >= 2 ? r->head_len - 2 : 0;
    memcpy(r->head + r->head_len, p, take);
    r->head_len += take;
    /* the blank line: "\n\n" or "\n\r\n", or the block opening with one */
    for (size_t i = scan; i < r->head_len; i++) {
        size_t blank = 0;
        if (r->head[i] == '\n' && i + 1 < r->head_len && r->head[i + 1] == '\n')
            blank = i + 2;
        else if (r->head[i] == '\n' && i + 2 < r->head_len && r->head[i + 1] == '\r' &&
                 r->head[i + 2] == '\n')
            blank = i + 3;
        else if (i == 0 && (r->head[0] == '\n' || (r->head_len > 1 && r->head[0] == '\r' && r->head[1] == '\n')))
            bad_response("no CGI header before the body");
        if (blank) {
            size_t body = r->head_len - blank;
            emit_head(r, i + 1);
            memcpy(r->down + r->down_len, r->head + blank, body);
            r->down_len += body;
            if (take < n) {
                memcpy(r->down + r->down_len, p + take, n - take);
                r->down_len += n - take;
            }
            return;
        }
    }
    if (r->head_len == HEADER_MAX)
        bad_response("CGI header block longer than %d bytes", HEADER_MAX);
}

static void record_start(struct response *r)
{
    if (r->hdr[0] != 1)
        bad_response("record version %d", r->hdr[0]);
    r->type = r->hdr[1];
    r->id = (r->hdr[2] << 8) | r->hdr[3];
    r->content_left = ((size_t)r->hdr[4] << 8) | r->hdr[5];
    r->pad_left = r->hdr[6];
    r->end_len = 0;
    if (r->id != 1)
        return;   /* management records and other ids are skipped */
    if (r->type != FCGI_STDOUT && r->type != FCGI_STDERR && r->type != FCGI_END_REQUEST)
        bad_response("unexpected record type %d", r->type);
    if (r->type == FCGI_END_REQUEST && r->content_left < 8)
        bad_response("END_REQUEST with %zu content bytes", r->content_left);
}

static void record_content(struct response *r, const unsigned char *p, size_t n)
{
    if (r->id != 1)
        return;
    if (r->type == FCGI_STDOUT) {
        stdout_bytes(r, p, n);
    } else if (r->type == FCGI_STDERR) {
        (void)write_all(2, p, n, io_ms, 0);   /* a broken error log must not fail the request */
    } else {
        size_t k = r->end_len < 8 ? 8 - r->end_len : 0;
        if (k > n)
            k = n;
        memcpy(r->end_body + r->end_len, p, k);
        r->end_len += k;
    }
}

static void record_end(struct response *r)
{
    if (r->id == 1 && r->type == FCGI_END_REQUEST) {
        r->ended = 1;
        r->protocol_status = r->end_body[4];
    }
    r->hlen = 0;
}

/* feed: parse n bytes from the application; stops after END_REQUEST (anything after it
 * is ignored, as the connection is not kept). */
static void feed(struct response *r, const unsigned char *p, size_t n)
{
    while (n > 0 && !r->ended) {
        size_t k;
        if (r->hlen < 8) {
            k = 8 - r->hlen < n ? 8 - r->hlen : n;
            memcpy(r->hdr + r->hlen, p, k);
            r->hlen += k;
            if (r->hlen == 8)
                record_start(r);
        } else if (r->content_left > 0) {
            k = r->content_left < n ? r->content_left : n;
            record_content(r, p, k);
            r->content_left -= k;
        } else {
            k = r->pad_left < n ? r->pad_left : n;
            r->pad_left -= k;
        }
        p += k;
        n -= k;
        if (r->hlen == 8 && r->content_left == 0 && r->pad_left == 0)
            record_end(r);
    }
}

/* ---- The relay ----------------------------------------------------------------------- */

/* make_nonblocking: O_NONBLOCK on a pipe or socket (descriptions private to a CGI run),
 * remembering the old flags; terminals and files are left alone (they do not block long). */
static void make_nonblocking(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (fl & O_NONBLOCK))
        return;
    if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
        saved_flags[fd] = fl;
}

static struct response resp;
static unsigned char up_buf[8 + RECORD_MAX + 8];
static unsigned char in_buf[READ_SIZE];

/* The relay state: what is still to go to the application, and where the body stands. */
static const unsigned char *up;         /* bytes for the application: up[up_off..up_len) */
static size_t up_off, up_len;
static uint64_t stdin_left;             /* body bytes not yet read from fd 0 */
static int stdin_open;                  /* body bytes remain to be read */
static int stdin_closed;                /* the empty STDIN record is queued or sent */
static int up_dead;                     /* no more bytes go to the application */

/* stop_sending: the application gets nothing more; the rest of the body is read and
 * thrown away. Closing our write side lets an application that still waits for its body
 * see the connection end instead of waiting for its own timeout. */
static void stop_sending(int sock, const char *why)
{
    if (!up_dead && stdin_open)
        log_msg("%s: the rest of the request body (%llu bytes) is discarded", why,
                (unsigned long long)stdin_left);
    up_dead = 1;
    shutdown(sock, SHUT_WR);
}

/* relay: the poll loop, until END_REQUEST has arrived and its bytes are all on stdout.
 * Reads from the application only when stdout has taken everything before (so memory is
 * bounded), and reads stdin only when the previous STDIN record has gone out. */
static void relay(int sock, const char *name)
{
    int64_t last_progress = now_ms();
    int64_t stall_since = 0;
    for (;;) {
        int up_pending = !up_dead && up_off < up_len;
        size_t down_pending = resp.down_len - resp.down_off;
        if (resp.ended && down_pending == 0)
            return;
        if (resp.ended && !up_dead)
            stop_sending(sock, "the application answered before reading its whole body");
        /* after the last body record, the empty one that ends the stream */
        if (!up_pending && !up_dead && !stdin_open && !stdin_closed) {
            up_len = put_record(up_buf, FCGI_STDIN, NULL, 0);
            up = up_buf;
            up_off = 0;
            up_pending = 1;
            stdin_closed = 1;
        }
        /* Apache's mod_cgi writes the whole body before it reads any output. An application
         * that answers (more than the pipes hold) before it has read its body then waits
         * on us, we wait on stdout, and Apache waits on our stdin: a stalemate that only
         * throwing the rest of the body away can end. It is declared after STALL_MS of
         * it, so that a momentarily full pipe under a full-duplex server is not taken for
         * one. */
        int stalled = up_pending && down_pending && stdin_open;
        int64_t now = now_ms();
        if (!stalled)
            stall_since = 0;
        else if (!stall_since)
            stall_since = now;
        int stall_ms = io_ms / 2 < STALL_MS ? io_ms / 2 : STALL_MS;
        if (stalled && now - stall_since >= stall_ms) {
            stop_sending(sock, "stdout and the application are both blocked");
            continue;
        }
        if (now - last_progress >= io_ms) {
            if (down_pending) {
                headers_sent = 1;   /* stdout is stuck: an error page could not get out either */
                fail(504, "Gateway Timeout", XC_CLIENT, "stdout not writable for %d ms", io_ms);
            }
            fail(504, "Gateway Timeout", XC_TIMEOUT, "%s: no progress for %d ms%s", name, io_ms,
                 stdin_open ? " (nor on stdin)" : "");
        }
        int64_t wait = io_ms - (now - last_progress);
        if (stalled && stall_since + stall_ms - now < wait)
            wait = stall_since + stall_ms - now;

        struct pollfd fds[3];
        int nfds = 0, i_sock = -1, i_in = -1, i_out = -1;
        short sock_ev = 0;
        if (!resp.ended && down_pending == 0)
            sock_ev |= POLLIN;
        if (up_pending)
            sock_ev |= POLLOUT;
        if (sock_ev) {
            i_sock = nfds;
            fds[nfds++] = (struct pollfd){.fd = sock, .events = sock_ev};
        }
        if (stdin_open && (up_dead || !up_pending)) {
            i_in = nfds;
            fds[nfds++] = (struct pollfd){.fd = 0, .events = POLLIN};
        }
        if (down_pending) {
            i_out = nfds;
            fds[nfds++] = (struct pollfd){.fd = 1, .events = POLLOUT};
        }
        int r = poll(fds, (nfds_t)nfds, (int)wait);
        if (r < 0 && errno != EINTR)
            fail(502, "Bad Gateway", XC_BAD_RESPONSE, "poll: %s", strerror(errno));
        if (r <= 0)
            continue;

        if (i_out >= 0 && fds[i_out].revents) {
            ssize_t w = write(1, resp.down + resp.down_off, down_pending);
            if (w > 0) {
                last_progress = now_ms();
                resp.down_off += (size_t)w;
                headers_sent = 1;   /* down only fills once the header block is complete */
                if (resp.down_off == resp.down_len)
                    resp.down_off = resp.down_len = 0;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                headers_sent = 1;   /* nobody is left to read an error page */
                fail(502, "Bad Gateway", XC_CLIENT, "writing stdout: %s", strerror(errno));
            }
        }

        if (i_in >= 0 && fds[i_in].revents) {
            unsigned char *dst = up_dead ? in_buf : up_buf + 8;
            size_t want = up_dead ? sizeof in_buf : RECORD_MAX;
            if (stdin_left < want)
                want = (size_t)stdin_left;
            ssize_t n = read(0, dst, want);
            if (n > 0) {
                last_progress = now_ms();
                stdin_left -= (uint64_t)n;
                stdin_open = stdin_left > 0;
                if (!up_dead) {
                    up_len = put_record(up_buf, FCGI_STDIN, up_buf + 8, (size_t)n);
                    up = up_buf;
                    up_off = 0;
                }
            } else if (n == 0) {
                /* The body ended before CONTENT_LENGTH: the server gave up on its client.
                 * The stream is ended; the application sees a short body and decides. */
                log_msg("stdin ended %llu bytes before CONTENT_LENGTH",
                        (unsigned long long)stdin_left);
                stdin_open = 0;
            } else if (errno != EAGAIN && errno != EINTR) {
                fail(400, "Bad Request", XC_CLIENT, "reading stdin: %s", strerror(errno));
            }
        }

        if (i_sock >= 0 && (fds[i_sock].revents & (POLLOUT | POLLERR | POLLHUP)) && up_pending) {
            ssize_t w = send(sock, up + up_off, up_len - up_off, MSG_NOSIGNAL);
            if (w > 0) {
                last_progress = now_ms();
                up_off += (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                /* The application closed its side early (an early answer such as 413):
                 * what it said is still to be read. */
                stop_sending(sock, "the application stopped reading");
            }
        }

        if (i_sock >= 0 && (fds[i_sock].revents & (POLLIN | POLLHUP | POLLERR)) &&
            (sock_ev & POLLIN)) {
            ssize_t n = recv(sock, in_buf, sizeof in_buf, 0);
            if (n > 0) {
                last_progress = now_ms();
                feed(&resp, in_buf, (size_t)n);
                if (resp.ended && !resp.head_done) {
                    if (resp.protocol_status == FCGI_OVERLOADED ||
                        resp.protocol_status == FCGI_CANT_MPX_CONN)
                        fail(503, "Service Unavailable", XC_UNAVAILABLE,
                             "%s refused the request (protocol status %d)", name,
                             resp.protocol_status);
                    bad_response(resp.head_len ? "END_REQUEST inside the CGI header block"
                                               : "END_REQUEST without any output");
                }
            } else if (n == 0) {
                bad_response("connection closed before END_REQUEST");
            } else if (errno != EAGAIN && errno != EINTR) {
                bad_response("reading: %s", strerror(errno));
            }
        }
    }
}

int main(void)
{
    extern char **environ;
    signal(SIGPIPE, SIG_IGN);

    const char *tmo = getenv("FASTCGI_TIMEOUT");
    if (tmo) {
        int ms = parse_timeout(tmo);
        if (ms < 0)
            fail(500, "Internal Server Error", XC_CONFIG,
                 "FASTCGI_TIMEOUT=%s: expected seconds, more than 0 and at most 86400", tmo);
        io_ms = connect_ms = ms;
    }
    const char *name = getenv("FASTCGI_CONNECT");
    if (!name || !*name)
        name = DEFAULT_CONNECT;
    struct target target;
    if (parse_target(name, &target) < 0)
        fail(500, "Internal Server Error", XC_CONFIG,
             "FASTCGI_CONNECT=%s: expected unix:/path, A.B.C.D:PORT or [IPv6]:PORT", name);
    if (parse_length(getenv("CONTENT_LENGTH"), &stdin_left) < 0)
        fail(400, "Bad Request", XC_BAD_REQUEST, "CONTENT_LENGTH is not a number");
    stdin_open = stdin_left > 0;
    stdin_closed = !stdin_open;   /* no body: the empty STDIN record goes with the params */

    make_nonblocking(0);
    make_nonblocking(1);
    make_nonblocking(2);

    int sock = connect_app(&target, name);
    unsigned char *first = encode_request(environ, !stdin_open, &up_len);
    up = first;
    relay(sock, name);
    free(first);
    close(sock);
    finish(XC_OK);
    return XC_OK;
}
