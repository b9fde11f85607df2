/* Average a "gradient" across ranks. Run: gyrerun -n 4 ./allreduce-example */
#include <gyre/gyre.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    gyreResult_t r_ = (call);                                                    \
    if (r_ != gyreSuccess) {                                                     \
      fprintf(stderr, "%s: %s\n", gyreGetErrorString(r_), gyreGetLastError(NULL)); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  gyreComm_t comm;
  int rank, nranks, ok;
  size_t i, count = 1 << 20;
  float* grad = malloc(count * sizeof(float));

  CHECK(gyreCommInitFromEnv(&comm, NULL)); /* gyrerun, torchrun, mpirun or srun */
  CHECK(gyreCommUserRank(comm, &rank));
  CHECK(gyreCommCount(comm, &nranks));
  for (i = 0; i < count; i++) grad[i] = (float)rank;

  /* In place: every rank ends with the same average, bit for bit. */
  CHECK(gyreAllReduce(grad, grad, count, gyreFloat32, gyreAvg, comm, NULL));
  printf("rank %d of %d: grad[0] = %g (expected %g)\n", rank, nranks, grad[0], (nranks - 1) / 2.0);
  ok = grad[0] == (float)((nranks - 1) / 2.0);

  free(grad);
  CHECK(gyreCommDestroy(comm));
  return ok ? 0 : 1;
}
