/* pace PORT PATH RATE CONNS SECONDS [WARMUP]: an open-loop HTTP/1.1 load at a fixed rate,
 * for the latency a backend gives below its peak (BENCH.md: p99 and max at 50% and 90% of
 * peak rate; wrk2 is not packaged).
 *
 * Request k is due at t0 + k / RATE, whatever happened to the ones before it. It leaves on
 * a free keep-alive connection to 127.0.0.1:PORT (CONNS of them, opened first); when none
 * is free it waits for one, and its latency still counts from when it was due, so a
 * stall shows in full (no coordinated omission: a closed-loop client such as wrk stops
 * sending while the server stalls, and the requests it would have sent are never timed).
 * The first WARMUP seconds (default 1) are sent but not counted; then SECONDS are. After
 * the last due time, answers are awaited for up to 5 s; one still missing then counts as
 * an error, as does an answer whose status is not 200, and a connection the server closes
 * (it is opened again).
 *
 * Prints one line:
 *   due N answered N errors N rate R p50 MS p90 MS p99 MS p999 MS max MS
 * where rate is the answered requests per second of the measured part. A connection the
 * server ends with `Connection: close` (nginx does after keepalive_requests, 1000 by
 * default) is opened again after that answer, which is counted as any other.
 * Why not the reliability runs' Go generator (tests/reliability/loadgen), which is open
 * loop too: at these rates it needs more CPU than the machine spares beside nginx and the
 * backend (bench/README.md), where this one makes one send and about one read a request.
 * Loopback only: it connects to 127.0.0.1 and nothing else. Exit status 0 when it ran
 * (errors are in the line), 1 on bad arguments, 2 when it could not connect at all. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
  int fd;
  int busy;            /* a request is out on it */
  double due;          /* when that request was due */
  int counted;         /* whether it is in the measured part */
  char buf[16384];
  int fill;
};

static int port;
static char request[1024];
static int request_len;
static int epfd;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int open_conn(struct conn *c) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return -1;
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) { close(c->fd); c->fd = -1; return -1; }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
  epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &e);
  c->busy = 0;
  c->fill = 0;
  return 0;
}

/* response_length: the length of the whole response at the start of buf[0, n), 0 when it
 * has not all arrived, -1 when it cannot be read. *status gets its status code, *closing 1
 * when the server closes the connection after it. Knows
 * Content-Length and chunked bodies, which is what nginx sends. */
static int response_length(const char *buf, int n, int *status, int *closing) {
  const char *end = memmem(buf, n, "\r\n\r\n", 4);
  if (!end) return n >= (int)sizeof(((struct conn *)0)->buf) ? -1 : 0;
  int head = end - buf + 4;
  if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0) return -1;
  *status = atoi(buf + 9);
  long clen = -1;
  int chunked = 0;
  for (const char *p = buf; p < end;) {
    const char *eol = memmem(p, end + 2 - p, "\r\n", 2);
    if (!eol) break;
    if (eol - p > 15 && strncasecmp(p, "Content-Length:", 15) == 0) clen = atol(p + 15);
    if (eol - p > 18 && strncasecmp(p, "Transfer-Encoding:", 18) == 0 && memmem(p, eol - p, "chunked", 7))
      chunked = 1;
    if (eol - p > 11 && strncasecmp(p, "Connection:", 11) == 0 && memmem(p, eol - p, "close", 5))
      *closing = 1;
    p = eol + 2;
  }
  if (chunked) {
    int i = head;
    for (;;) {
      const char *eol = memmem(buf + i, n - i, "\r\n", 2);
      if (!eol) return 0;
      long size = strtol(buf + i, NULL, 16);
      if (size < 0) return -1;
      i = eol - buf + 2;
      if (size == 0) return n >= i + 2 ? i + 2 : 0;   /* the last chunk, no trailers */
      if (n < i + size + 2) return 0;
      i += size + 2;
    }
  }
  if (clen < 0) return -1;   /* nginx always sends one or the other here */
  return n >= head + clen ? head + clen : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 6 || argc > 7) {
    fprintf(stderr, "usage: pace PORT PATH RATE CONNS SECONDS [WARMUP]\n");
    return 1;
  }
  port = atoi(argv[1]);
  const char *path = argv[2];
  double rate = atof(argv[3]);
  int nconns = atoi(argv[4]);
  double secs = atof(argv[5]);
  double warm = argc > 6 ? atof(argv[6]) : 1.0;
  if (port <= 0 || port > 65535 || path[0] != '/' || rate <= 0 || nconns <= 0 || nconns > 4096 ||
      secs <= 0 || warm < 0 || rate * secs > 1e8) {
    fprintf(stderr, "pace: bad arguments\n");
    return 1;
  }
  request_len = snprintf(request, sizeof request,
                         "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: pace\r\n\r\n", path, port);
  epfd = epoll_create1(EPOLL_CLOEXEC);
  struct conn *cs = calloc(nconns, sizeof *cs);
  int *idle = malloc(nconns * sizeof *idle);  /* a stack of free connections */
  int nidle = 0;
  for (int i = 0; i < nconns; i++) {
    if (open_conn(&cs[i]) < 0) { fprintf(stderr, "pace: connect: %s\n", strerror(errno)); return 2; }
    idle[nidle++] = i;
  }
  long cap = (long)(rate * secs) + 16;
  double *lat = malloc(cap * sizeof *lat);
  long nlat = 0, errors = 0, due_counted = 0;
  double t0 = now() + 0.01;
  double t_measure = t0 + warm, t_end = t_measure + secs;
  long next = 0;               /* the next request to become due */
  long sent = 0;               /* requests sent so far: next - sent are waiting */
  struct epoll_event evs[256];
  for (;;) {
    double t = now();
    /* send every due request a free connection can take */
    while (t_end > t0 + next / rate && t0 + next / rate <= t) next++;
    while (sent < next && nidle > 0) {
      struct conn *c = &cs[idle[--nidle]];
      c->due = t0 + sent / rate;
      c->counted = c->due >= t_measure;
      if (c->counted) due_counted++;
      c->busy = 1;
      sent++;
      if (send(c->fd, request, request_len, MSG_NOSIGNAL) != request_len) {
        /* the server closed it: counted as an error, opened again, request dropped */
        if (c->counted) errors++;
        epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        if (open_conn(c) < 0) { fprintf(stderr, "pace: reconnect: %s\n", strerror(errno)); return 2; }
        idle[nidle++] = c - cs;
      }
    }
    int out = nconns - nidle;
    if (t >= t_end && sent == next && out == 0) break;
    if (t >= t_end + 5.0) {   /* answers that never came: errors if in the measured part */
      for (int i = 0; i < nconns; i++)
        if (cs[i].busy && cs[i].counted) errors++;
      break;
    }
    double wait = 1.0;   /* a request waits for a free connection: an answer wakes us */
    if (sent == next) wait = (t0 + next / rate < t_end ? t0 + next / rate : t_end) - t;
    if (t >= t_end) wait = t_end + 5.0 - t;
    if (wait < 0) wait = 0;
    struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
    int k = epoll_pwait2(epfd, evs, 256, &ts, NULL);
    if (k < 0 && errno != EINTR) { perror("epoll_pwait2"); return 2; }
    for (int j = 0; j < k; j++) {
      struct conn *c = evs[j].data.ptr;
      int r = read(c->fd, c->buf + c->fill, sizeof c->buf - c->fill);
      if (r > 0) c->fill += r;
      int status = 0, len = 0, closing = 0;
      if (r > 0 && c->busy) len = response_length(c->buf, c->fill, &status, &closing);
      if (r > 0 && len == 0) continue;
      double done = now();
      int answered = r > 0 && len > 0 && len == c->fill;
      if (answered) {
        if (c->counted) {
          if (status == 200) lat[nlat++] = done - c->due;
          else errors++;
        }
        c->fill = 0;
      } else if (c->busy && c->counted) {
        errors++;   /* closed, unreadable, or more than one answer */
      }
      int was_busy = c->busy;
      c->busy = 0;
      if (!answered || closing) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        if (open_conn(c) < 0) { fprintf(stderr, "pace: reconnect: %s\n", strerror(errno)); return 2; }
      }
      if (was_busy) idle[nidle++] = c - cs;   /* an idle one is in the stack already */
    }
  }
  qsort(lat, nlat, sizeof *lat, cmp_double);
#define PCT(p) (nlat ? 1000 * lat[(long)((p) * (nlat - 1))] : 0.0)
  printf("due %ld answered %ld errors %ld rate %.0f p50 %.3f p90 %.3f p99 %.3f p999 %.3f max %.3f\n",
         due_counted, nlat, errors, nlat / secs, PCT(0.5), PCT(0.9), PCT(0.99), PCT(0.999),
         nlat ? 1000 * lat[nlat - 1] : 0.0);
  return 0;
}
