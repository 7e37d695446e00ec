// load SOCKPATH CONNS SECONDS [K]: closed-loop FastCGI load straight on a unix socket (or,
// for SOCKPATH tcp:PORT, on 127.0.0.1:PORT), no front. CONNS keep-conn connections each
// send one nginx-like GET (begin, 20 params, empty stdin) and the next as soon as
// END_REQUEST arrives; prints requests, req/s and reconnects. With K > 0, a connection is closed after its K-th request and a new one
// opened in its place (nginx does that when more requests are in flight than its upstream
// keepalive keeps). Used by direct.sh (rounds 6 and 7 of bench/OPTIMISATIONS.md as of c223f0c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
static unsigned char req[2048]; static int reqlen;
static void rec(int type, const unsigned char *c, int len) {
  int pad = (8 - (len & 7)) & 7;
  unsigned char h[8] = {1, type, 0, 1, len >> 8, len & 255, pad, 0};
  memcpy(req + reqlen, h, 8); reqlen += 8; memcpy(req + reqlen, c, len); reqlen += len;
  memset(req + reqlen, 0, pad); reqlen += pad;
}
static const char *P[] = {"QUERY_STRING","","REQUEST_METHOD","GET","CONTENT_TYPE","","CONTENT_LENGTH","",
 "SCRIPT_NAME","/","REQUEST_URI","/","DOCUMENT_URI","/","DOCUMENT_ROOT","/usr/share/nginx/html",
 "SERVER_PROTOCOL","HTTP/1.1","REQUEST_SCHEME","http","GATEWAY_INTERFACE","CGI/1.1",
 "SERVER_SOFTWARE","nginx/1.22.1","REMOTE_ADDR","127.0.0.1","REMOTE_PORT","40000",
 "SERVER_ADDR","127.0.0.1","SERVER_PORT","8080","SERVER_NAME","localhost","REDIRECT_STATUS","200",
 "HTTP_HOST","127.0.0.1:8080","HTTP_USER_AGENT","wrk",0};
// dial : const char * -> int ; a connected socket to the server, or -1
static int dial(const char *where) {
  if (strncmp(where, "tcp:", 4) == 0) {
    struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(atoi(where + 4));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    return connect(fd, (void *)&a, sizeof a) < 0 ? -1 : fd;
  }
  struct sockaddr_un a = {0}; a.sun_family = AF_UNIX; strncpy(a.sun_path, where, 107);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  return connect(fd, (void *)&a, sizeof a) < 0 ? -1 : fd;
}
struct conn { int fd; int got; int nreq; unsigned char buf[65536]; int fill; };
int main(int argc, char **argv) {
  int n = atoi(argv[2]); double secs = atof(argv[3]); int K = argc > 4 ? atoi(argv[4]) : 0; long conns = 0;
  unsigned char br[8] = {0, 1, 1, 0, 0, 0, 0, 0}; rec(1, br, 8);
  unsigned char pb[1024]; int pl = 0;
  for (int i = 0; P[i]; i += 2) { int a = strlen(P[i]), b = strlen(P[i+1]); pb[pl++] = a; pb[pl++] = b;
    memcpy(pb + pl, P[i], a); pl += a; memcpy(pb + pl, P[i+1], b); pl += b; }
  rec(4, pb, pl); rec(4, pb, 0); rec(5, pb, 0);
  int ep = epoll_create1(0);
  struct conn *cs = calloc(n, sizeof *cs);
  for (int i = 0; i < n; i++) {
    if ((cs[i].fd = dial(argv[1])) < 0) { perror("connect"); return 1; }
    struct epoll_event e = {EPOLLIN, {.ptr = &cs[i]}}; epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
    if (write(cs[i].fd, req, reqlen) != reqlen) { perror("write"); return 1; }
  }
  struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);
  long done = 0; struct epoll_event evs[64];
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    double el = (t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
    if (el >= secs) { printf("%ld requests %.3f s %.0f req/s %ld reconnects\n", done, el, done / el, conns); return 0; }
    int k = epoll_wait(ep, evs, 64, 1000);
    for (int j = 0; j < k; j++) {
      struct conn *c = evs[j].data.ptr;
      int r = read(c->fd, c->buf + c->fill, sizeof c->buf - c->fill);
      if (r <= 0) { fprintf(stderr, "read %d errno %d\n", r, errno); return 1; }
      c->fill += r;
      // walk records; END_REQUEST (type 3) ends the request
      int off = 0;
      for (;;) {
        if (c->fill - off < 8) break;
        int len = (c->buf[off+4] << 8 | c->buf[off+5]) + c->buf[off+6] + 8;
        if (c->fill - off < len) break;
        if (c->buf[off+1] == 3) { done++; c->nreq++;
          if (K && c->nreq >= K) {
            close(c->fd); c->nreq = 0; c->fill = 0; off = 0; conns++;
            if ((c->fd = dial(argv[1])) < 0) { perror("connect"); return 1; }
            struct epoll_event e = {EPOLLIN, {.ptr = c}}; epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
            if (write(c->fd, req, reqlen) != reqlen) { perror("write"); return 1; }
            goto next;
          }
          if (write(c->fd, req, reqlen) != reqlen) { perror("write"); return 1; } }
        off += len;
      }
      memmove(c->buf, c->buf + off, c->fill - off); c->fill -= off;
      next: ;
    }
  }
}
