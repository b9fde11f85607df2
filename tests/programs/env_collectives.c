/* AllReduce, AllToAll and Broadcast from the launcher's environment, each at
 * a few sizes (one element, a few KiB, a few hundred KiB: the last above any
 * eager limit) with inputs whose results are exact in int32, checked element
 * by element. The Soft-RoCE VM test runs it over verbs with 2 and 3 ranks.
 * Prints "rank R of N: collectives ok" and exits 0, or a FAIL line and 1.
 * With ENV_COLLECTIVES_EXIT_RANK=R, rank R exits (status 3) after the first
 * AllReduce, without a word to anyone: the others must fail, naming it,
 * instead of hanging. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gyre/gyre.h"

static int check(gyreResult_t r, const char* what) {
  if (r == gyreSuccess) return 1;
  printf("FAIL %s: %s: %s\n", what, gyreGetErrorString(r), gyreGetLastError(NULL));
  return 0;
}

static int expectEqual(const int* got, size_t i, int want, const char* what, size_t count) {
  if (got[i] == want) return 1;
  printf("FAIL %s of %zu: element %zu is %d, expected %d\n", what, count, i, got[i], want);
  return 0;
}

/* Rank r contributes r + 1 + i % 1000 at i: the sum is n(n+1)/2 + n * (i % 1000). */
static int allReduce(gyreComm_t comm, int rank, int n, size_t count, int* buf) {
  for (size_t i = 0; i < count; ++i) buf[i] = rank + 1 + (int)(i % 1000);
  if (!check(gyreAllReduce(buf, buf, count, gyreInt32, gyreSum, comm, NULL), "allreduce")) return 0;
  for (size_t i = 0; i < count; ++i)
    if (!expectEqual(buf, i, n * (n + 1) / 2 + n * (int)(i % 1000), "allreduce", count)) return 0;
  return 1;
}

/* Block j of rank r's input holds 1000 * r + j (+ the element's place): rank
 * r's output block j must then hold 1000 * j + r. */
static int allToAll(gyreComm_t comm, int rank, int n, size_t count, int* in, int* out) {
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i) in[(size_t)j * count + i] = 1000 * rank + j + (int)(i % 7) * 100000;
  if (!check(gyreAllToAll(in, out, count, gyreInt32, comm, NULL), "alltoall")) return 0;
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      if (!expectEqual(out, (size_t)j * count + i, 1000 * j + rank + (int)(i % 7) * 100000, "alltoall", count))
        return 0;
  return 1;
}

/* The root (the last rank) sends 3 * i + 11; everyone else starts with -1. */
static int broadcast(gyreComm_t comm, int rank, int n, size_t count, int* buf) {
  const int root = n - 1;
  for (size_t i = 0; i < count; ++i) buf[i] = rank == root ? 3 * (int)(i % 100000) + 11 : -1;
  if (!check(gyreBroadcast(buf, buf, count, gyreInt32, root, comm, NULL), "broadcast")) return 0;
  for (size_t i = 0; i < count; ++i)
    if (!expectEqual(buf, i, 3 * (int)(i % 100000) + 11, "broadcast", count)) return 0;
  return 1;
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  gyreComm_t comm = NULL;
  int rank = -1, n = 0;
  if (!check(gyreCommInitFromEnv(&comm, NULL), "gyreCommInitFromEnv")) return 1;
  if (!check(gyreCommUserRank(comm, &rank), "rank") || !check(gyreCommCount(comm, &n), "count")) return 1;
  const size_t counts[] = {1, 3000, 70000};
  const size_t largest = 70000;
  int* a = malloc(largest * (size_t)n * sizeof(int));
  int* b = malloc(largest * (size_t)n * sizeof(int));
  if (!a || !b) return 1;
  const char* exitRank = getenv("ENV_COLLECTIVES_EXIT_RANK");
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    const size_t c = counts[k];
    if (!allReduce(comm, rank, n, c, a)) return 1;
    if (exitRank && atoi(exitRank) == rank) {
      printf("rank %d of %d: exiting on purpose\n", rank, n);
      _exit(3);
    }
    if (!allToAll(comm, rank, n, c, a, b) || !broadcast(comm, rank, n, c, a)) return 1;
  }
  if (!check(gyreCommDestroy(comm), "destroy")) return 1;
  free(a);
  free(b);
  printf("rank %d of %d: collectives ok\n", rank, n);
  return 0;
}
