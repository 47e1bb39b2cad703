#define _GNU_SOURCE
// nullproxy: the socket work of one routed request and nothing else.
// Per client request: read it, send PING to Redis and read the reply, send
// the client's request bytes to the shard and read the whole response, write
// that response to the client. Single thread, level-triggered epoll, one
// Redis and one shard connection per client connection (kept). No parsing
// beyond finding the end of the shard's response (Content-Length).
// usage: nullproxy LISTEN_PORT REDIS_PORT|REDIS_SOCKET_PATH SHARD_PORT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { IDLE, WAIT_REDIS, WAIT_SHARD };
typedef struct conn {
  int client, redis, shard, state;
  char req[8192]; int req_len;
  char resp[65536]; int resp_len;
} conn;
#define MAXFD 65536
static conn *by_fd[MAXFD];
static int ep, redis_port, shard_port;

static int dial(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}
// Redis over a Unix socket when its "port" argument is a path.
static const char *redis_path;
static int dial_redis(void) {
  if (!redis_path) return dial(redis_port);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  strncpy(a.sun_path, redis_path, sizeof a.sun_path - 1);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect unix"); exit(1); }
  return s;
}
static void watch(int fd, conn *c) {
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  by_fd[fd] = c;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}
static void drop(conn *c) {
  int fds[3] = {c->client, c->redis, c->shard};
  for (int i = 0; i < 3; i++) if (fds[i] >= 0) { by_fd[fds[i]] = NULL; close(fds[i]); }
  free(c);
}
// Whole HTTP response in resp? (headers + Content-Length bytes)
static int complete(conn *c) {
  c->resp[c->resp_len] = 0;
  char *end = strstr(c->resp, "\r\n\r\n");
  if (!end) return 0;
  char *cl = strcasestr(c->resp, "content-length:");
  long n = cl ? strtol(cl + 15, NULL, 10) : 0;
  return c->resp_len >= (end + 4 - c->resp) + n;
}
static void on_event(int fd) {
  conn *c = by_fd[fd];
  if (!c) return;
  if (fd == c->client) {
    int n = read(fd, c->req, sizeof c->req);
    if (n <= 0) { drop(c); return; }
    c->req_len = n;
    if (c->redis < 0) { c->redis = dial_redis(); watch(c->redis, c); }
    write(c->redis, "*1\r\n$4\r\nPING\r\n", 14);
    c->state = WAIT_REDIS;
  } else if (fd == c->redis) {
    char buf[512];
    if (read(fd, buf, sizeof buf) <= 0) { drop(c); return; }
    if (c->shard < 0) { c->shard = dial(shard_port); watch(c->shard, c); }
    write(c->shard, c->req, c->req_len);
    c->resp_len = 0;
    c->state = WAIT_SHARD;
  } else if (fd == c->shard) {
    int n = read(fd, c->resp + c->resp_len, sizeof c->resp - 1 - c->resp_len);
    if (n <= 0) { drop(c); return; }
    c->resp_len += n;
    if (complete(c)) { write(c->client, c->resp, c->resp_len); c->state = IDLE; }
  }
}
int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: nullproxy LISTEN REDIS SHARD\n"); return 2; }
  redis_port = atoi(argv[2]); if (argv[2][0] == '/') redis_path = argv[2]; shard_port = atoi(argv[3]);
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1024) < 0) { perror("listen"); return 1; }
  ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l}, evs[256];
  epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == l) {
        int s = accept(l, NULL, NULL);
        if (s < 0) continue;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = calloc(1, sizeof *c);
        c->client = s; c->redis = c->shard = -1;
        watch(s, c);
      } else on_event(fd);
    }
  }
}
