/* The public header must compile as strict C99 and work from C: this file is
 * built with -std=c99 -pedantic -Werror and runs a one-rank AllReduce. */
#include <gyre/gyre.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  gyreUniqueId id;
  gyreComm_t comm = NULL;
  gyreConfig_t config = GYRE_CONFIG_INITIALIZER;
  float in[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  float out[4] = {0};
  int version = 0, count = 0, rank = -1;
  gyreResult_t r;

  if (gyreGetVersion(&version) != gyreSuccess || version != GYRE_VERSION_CODE) return 1;
  if (gyreGetUniqueId(&id) != gyreSuccess) return 2;
  config.timeoutMs = 10000;
  if (gyreCommInitRankConfig(&comm, 1, id, 0, &config) != gyreSuccess) {
    fprintf(stderr, "init: %s\n", gyreGetLastError(NULL));
    return 3;
  }
  if (gyreCommCount(comm, &count) != gyreSuccess || count != 1) return 4;
  if (gyreCommUserRank(comm, &rank) != gyreSuccess || rank != 0) return 5;
  if (gyreAllReduce(in, out, 4, gyreFloat32, gyreSum, comm, NULL) != gyreSuccess) return 6;
  if (memcmp(in, out, sizeof(in)) != 0) return 7;
  r = gyreAllReduce(in, out, 4, (gyreDataType_t)99, gyreSum, comm, NULL);
  if (r != gyreInvalidArgument || strstr(gyreGetLastError(comm), "datatype") == NULL) return 8;
  if (strcmp(gyreGetErrorString(gyreSuccess), "no error") != 0) return 9;
  if (gyreCommDestroy(comm) != gyreSuccess) return 10;
  printf("c99 ok\n");
  return 0;
}
