/* tcp-loopback-bw: a reference point for a 2-rank TCP AllReduce on this
 * machine. Two processes, pinned to two cores, each send and receive SIZE
 * bytes over one loopback TCP connection at the same time (the traffic of a
 * 2-rank AllReduce of SIZE bytes: each rank sends and receives SIZE), with
 * non-blocking sockets and poll. Not a limit: flooding both directions keeps
 * megabytes in flight whose socket pages fall out of cache, and a paced
 * exchange (gyre's) can beat it. Prints the per-direction rate for each
 * write size tried, median over repetitions, and the best of them:
 *   tcp-loopback-bw [-b SIZE] [-n REPS]
 *   "chunk 1048576: 1.23 GB/s"... then "best: 1.23 GB/s". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Sends and receives `total` bytes on s at once; returns the seconds taken.
 * Each direction moves as much as the kernel takes before the loop polls,
 * which is what keeps both copies (ours and the peer's) busy. */
static double exchange(int s, char* out, char* in, size_t total, size_t chunk) {
  size_t sent = 0, got = 0;
  double t = now();
  while (sent < total || got < total) {
    int moved = 0;
    while (sent < total) {
      ssize_t n = send(s, out + sent, total - sent < chunk ? total - sent : chunk, MSG_DONTWAIT);
      if (n <= 0) break;
      sent += (size_t)n;
      moved = 1;
    }
    while (got < total) {
      ssize_t n = recv(s, in + got, total - got < chunk ? total - got : chunk, MSG_DONTWAIT);
      if (n == 0) return -1;
      if (n < 0) break;
      got += (size_t)n;
      moved = 1;
    }
    if (moved) continue;
    struct pollfd p = {s, (short)((sent < total ? POLLOUT : 0) | (got < total ? POLLIN : 0)), 0};
    if (poll(&p, 1, 10000) <= 0) return -1;
  }
  return now() - t;
}

int main(int argc, char** argv) {
  size_t total = 16u << 20;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) total = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "-n")) reps = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: tcp-loopback-bw [-b BYTES] [-n REPS]\n");
      return 2;
    }
  }
  const size_t chunks[] = {256u << 10, 1u << 20, 4u << 20};
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof(a);
  if (bind(l, (struct sockaddr*)&a, al) || listen(l, 1) || getsockname(l, (struct sockaddr*)&a, &al)) {
    perror("tcp-loopback-bw: listen");
    return 1;
  }
  pid_t pid = fork();
  int child = pid == 0, s;
  if (child) {
    s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr*)&a, al)) _exit(1);
  } else {
    s = accept(l, NULL, NULL);
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(child, &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char* out = malloc(total);
  char* in = malloc(total);
  memset(out, 1, total);
  memset(in, 0, total);
  double best = 0;
  for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); ++c) {
    double* t = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; ++r) t[r] = exchange(s, out, in, total, chunks[c]);
    qsort(t, (size_t)reps, sizeof(double), cmp);
    double gbs = t[0] > 0 ? (double)total / t[reps / 2] / 1e9 : 0;
    if (!child) printf("chunk %zu: %.2f GB/s\n", chunks[c], gbs);
    if (gbs > best) best = gbs;
    free(t);
  }
  if (!child) {
    printf("best: %.2f GB/s\n", best);
    int st;
    waitpid(pid, &st, 0);
  }
  free(out);
  free(in);
  close(s);
  return 0;
}
