/* A program built against an installed gyre (tests/packaging): the header
 * and the library must agree on the version, and a one-rank communicator
 * must reduce. */
#include <gyre/gyre.h>
#include <stdio.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    gyreResult_t r_ = (call);                                                              \
    if (r_ != gyreSuccess) {                                                               \
      fprintf(stderr, "%s: %s: %s\n", #call, gyreGetErrorString(r_), gyreGetLastError(NULL)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(int argc, char** argv) {
  const char* kind = argc > 1 ? argv[1] : "consumer";
  int version = 0;
  gyreUniqueId id;
  gyreComm_t comm;
  int values[3] = {1, 2, 3};

  CHECK(gyreGetVersion(&version));
  if (version != GYRE_VERSION_CODE) {
    fprintf(stderr, "%s: header says %d, library %d\n", kind, GYRE_VERSION_CODE, version);
    return 1;
  }
  CHECK(gyreGetUniqueId(&id));
  CHECK(gyreCommInitRank(&comm, 1, id, 0));
  CHECK(gyreAllReduce(values, values, 3, gyreInt32, gyreSum, comm, NULL));
  CHECK(gyreCommDestroy(comm));
  if (values[0] != 1 || values[1] != 2 || values[2] != 3) {
    fprintf(stderr, "%s: allreduce over one rank changed the values\n", kind);
    return 1;
  }
  printf("%s: gyre %d.%d.%d, allreduce over 1 rank ok\n", kind, version / 10000, version / 100 % 100,
         version % 100);
  return 0;
}
