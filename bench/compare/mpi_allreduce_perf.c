/* mpi-allreduce-perf: MPI_Allreduce (float, sum) timed the way nccl-tests
 * all_reduce_perf times ncclAllReduce, printing the same table, so that
 * tools/compare.py can put Open MPI next to gyre. Launch with mpirun. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_support.h"
#include "perf_common.h"

typedef struct {
  float* send;
  float* recv;
  int rank;
  int nranks;
  const perf_opts* o;
} bench_ctx;

static int allreduce(const bench_ctx* b, size_t count, int in_place) {
  return MPI_Allreduce(in_place ? MPI_IN_PLACE : (const void*)b->send, b->recv, (int)count, MPI_FLOAT,
                       MPI_SUM, MPI_COMM_WORLD);
}

/* Returns the average time per iteration in microseconds. */
static double time_allreduce(const bench_ctx* b, size_t count, int in_place) {
  for (int i = 0; i < b->o->warmup; i++) allreduce(b, count, in_place);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < b->o->iters; i++) allreduce(b, count, in_place);
  double dt = (MPI_Wtime() - t0) / b->o->iters;
  return mpi_average_over_ranks(dt, b->nranks) * 1e6;
}

/* One fresh allreduce on known inputs; returns the wrong elements over all ranks. */
static long check_allreduce(const bench_ctx* b, size_t count, int in_place) {
  if (in_place) {
    perf_fill_input(b->recv, count, b->rank);
  } else {
    perf_fill_input(b->send, count, b->rank);
    for (size_t i = 0; i < count; i++) b->recv[i] = -1.0f;
  }
  allreduce(b, count, in_place);
  return mpi_sum_over_ranks(perf_count_wrong(b->recv, count, b->nranks));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  perf_opts o;
  perf_default_opts(&o);
  int rc = perf_parse_args(argc, argv, &o, 0, rank == 0);
  if (rc == 0) rc = perf_require_float_sum(&o, rank == 0);
  if (rc == 0 && o.max_bytes / sizeof(float) > 2147483647u) {
    if (rank == 0) fprintf(stderr, "error: -e too large for an int count\n");
    rc = -1;
  }
  if (rc != 0) {
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }

  bench_ctx b = {mpi_alloc_buffer(o.max_bytes), mpi_alloc_buffer(o.max_bytes), rank, nranks, &o};
  int ok = b.send && b.recv, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0) fprintf(stderr, "error: cannot allocate 2 x %zu bytes\n", o.max_bytes);
    MPI_Finalize();
    return 2;
  }

  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    MPI_Get_library_version(version, &len);
    char* nl = strchr(version, '\n');
    if (nl) *nl = '\0';
    char what[MPI_MAX_LIBRARY_VERSION_STRING + 96];
    snprintf(what, sizeof what, "mpi-allreduce-perf: MPI_Allreduce, %d ranks, %s", nranks, version);
    perf_print_preamble(&o, what);
  }
  mpi_print_ranks(rank, nranks);
  if (rank == 0) perf_print_columns();

  const double bus = perf_allreduce_bus_factor(nranks);
  for (size_t bytes = o.min_bytes; bytes != 0; bytes = perf_next_size(&o, bytes)) {
    size_t count = bytes / sizeof(float);
    if (count == 0) continue;
    perf_fill_input(b.send, count, rank);
    double oop = time_allreduce(&b, count, 0);
    long oop_wrong = o.check ? check_allreduce(&b, count, 0) : -1;
    perf_fill_input(b.recv, count, rank);
    double ip = time_allreduce(&b, count, 1);
    long ip_wrong = o.check ? check_allreduce(&b, count, 1) : -1;
    if (rank == 0)
      perf_print_row(count * sizeof(float), count, "float", "sum", -1, oop, oop_wrong, ip, ip_wrong, bus);
  }
  long wrong = 0;
  if (rank == 0) wrong = perf_print_footer();
  MPI_Bcast(&wrong, 1, MPI_LONG, 0, MPI_COMM_WORLD);

  free(b.send);
  free(b.recv);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
