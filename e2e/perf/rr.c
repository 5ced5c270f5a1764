/* 1-byte TCP request/response over one connection, TCP_NODELAY on both ends.
 *   rr server PORT          serve one connection at a time, echo every byte
 *   rr client IP PORT SECS  print round trips per second over SECS seconds
 * Used by e2e/perf-services.sh; compiled by it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int main(int argc, char **argv) {
  char b = 'x';
  if (argc == 3 && strcmp(argv[1], "server") == 0) {
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 16)) {
      perror("rr server");
      return 1;
    }
    for (;;) {
      int c = accept(l, NULL, NULL);
      if (c < 0) continue;
      nodelay(c);
      while (read(c, &b, 1) == 1 && write(c, &b, 1) == 1) {}
      close(c);
    }
  }
  if (argc == 5 && strcmp(argv[1], "client") == 0) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    if (connect(c, (struct sockaddr *)&a, sizeof a)) {
      perror("rr client");
      return 1;
    }
    nodelay(c);
    for (int i = 0; i < 200; i++) /* warm-up */
      if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1) return 1;
    double secs = atof(argv[4]), start = now(), end = start + secs, t;
    long n = 0;
    do {
      if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1) {
        perror("rr client");
        return 1;
      }
      n++;
    } while ((n & 63) || (t = now()) < end);
    printf("%.0f\n", n / (t - start));
    return 0;
  }
  fprintf(stderr, "usage: rr server PORT | rr client IP PORT SECS\n");
  return 2;
}
