/* A real gyre program for launcher_test, started by gyrerun, by hand with a
 * torchrun or Open MPI environment, or by mpirun. Creates two communicators
 * one after the other from the environment (two rendezvous rounds), runs an
 * AllReduce on each and checks the sums. Prints "rank R of N: ok". */
#include <stdio.h>

#include "gyre/gyre.h"

#define COUNT 1000

static int check(gyreResult_t r, const char* what) {
  if (r == gyreSuccess) return 1;
  printf("FAIL %s: %s: %s\n", what, gyreGetErrorString(r), gyreGetLastError(NULL));
  return 0;
}

/* Each rank contributes rank + 1 + i at index i (times scale), so the sum is
 * scale * (n(n+1)/2 + n*i): exact in int32. */
static int allReduceAndCheck(gyreComm_t comm, int rank, int n, int scale, const char* which) {
  static int buf[COUNT];
  for (int i = 0; i < COUNT; ++i) buf[i] = scale * (rank + 1 + i);
  if (!check(gyreAllReduce(buf, buf, COUNT, gyreInt32, gyreSum, comm, NULL), which)) return 0;
  for (int i = 0; i < COUNT; ++i) {
    int want = scale * (n * (n + 1) / 2 + n * i);
    if (buf[i] != want) {
      printf("FAIL %s: element %d is %d, expected %d\n", which, i, buf[i], want);
      return 0;
    }
  }
  return 1;
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  gyreComm_t first = NULL, second = NULL;
  int rank = -1, n = 0, rank2 = -1, n2 = 0;
  if (!check(gyreCommInitFromEnv(&first, NULL), "first gyreCommInitFromEnv")) return 1;
  if (!check(gyreCommUserRank(first, &rank), "rank") || !check(gyreCommCount(first, &n), "count"))
    return 1;
  if (!allReduceAndCheck(first, rank, n, 1, "allreduce on the first communicator")) return 1;
  /* The second rendezvous: a new round at the same root. */
  if (!check(gyreCommInitFromEnv(&second, NULL), "second gyreCommInitFromEnv")) return 1;
  if (!check(gyreCommUserRank(second, &rank2), "rank") ||
      !check(gyreCommCount(second, &n2), "count"))
    return 1;
  if (rank2 != rank || n2 != n) {
    printf("FAIL the second communicator says rank %d of %d, the first %d of %d\n", rank2, n2, rank,
           n);
    return 1;
  }
  if (!allReduceAndCheck(second, rank, n, 3, "allreduce on the second communicator")) return 1;
  if (!allReduceAndCheck(first, rank, n, 2, "allreduce on the first communicator again")) return 1;
  if (!check(gyreCommDestroy(second), "destroy") || !check(gyreCommDestroy(first), "destroy"))
    return 1;
  printf("rank %d of %d: ok\n", rank, n);
  return 0;
}
