/* Pieces both Open MPI drivers (mpi-allreduce-perf, mpi-collective-perf)
 * share: page-aligned buffers touched before timing, the cross-rank sums
 * that nccl-tests reports, and the "Using devices" lines. */
#ifndef GYRE_BENCH_COMPARE_MPI_SUPPORT_H
#define GYRE_BENCH_COMPARE_MPI_SUPPORT_H

#include <stddef.h>

/* Page-aligned and zeroed (first touch here, not inside the timed loop). */
void* mpi_alloc_buffer(size_t bytes);
/* Average of a per-rank value over MPI_COMM_WORLD. */
double mpi_average_over_ranks(double v, int nranks);
long mpi_sum_over_ranks(long v);
/* nccl-tests' "# Using devices" block: every rank's pid and host, on rank 0. */
void mpi_print_ranks(int rank, int nranks);

#endif
