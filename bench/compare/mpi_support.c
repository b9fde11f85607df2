#define _GNU_SOURCE
#include "mpi_support.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void* mpi_alloc_buffer(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 4096, bytes ? bytes : 4096) != 0) return NULL;
  memset(p, 0, bytes);
  return p;
}

double mpi_average_over_ranks(double v, int nranks) {
  double sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / nranks;
}

long mpi_sum_over_ranks(long v) {
  long sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

void mpi_print_ranks(int rank, int nranks) {
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  int pid = (int)getpid();
  int* pids = rank == 0 ? calloc((size_t)nranks, sizeof(int)) : NULL;
  char* hosts = rank == 0 ? calloc((size_t)nranks, sizeof host) : NULL;
  MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(host, (int)sizeof host, MPI_CHAR, hosts, (int)sizeof host, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("# Using devices\n");
    for (int r = 0; r < nranks; r++)
      printf("#  Rank %2d Group  0 Pid %6d on %10s device -1 [host] CPU memory\n", r, pids[r],
             hosts + (size_t)r * sizeof host);
  }
  free(pids);
  free(hosts);
}
