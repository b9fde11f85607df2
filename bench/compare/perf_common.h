/* Shared pieces of the peer drivers (mpi-allreduce-perf, mpi-collective-perf,
 * gloo-allreduce-perf, memcpy-bw): nccl-tests style flags, the nccl-tests
 * table layout, and exactly checkable inputs. Written in C99 so both the C drivers
 * and the C++ Gloo driver use one copy; tools/compare.py parses the output. */
#ifndef GYRE_BENCH_COMPARE_PERF_COMMON_H
#define GYRE_BENCH_COMPARE_PERF_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Extra long options a driver accepts on top of the nccl-tests flags. */
enum {
  PERF_EXTRA_GLOO = 1u << 0,    /* --collective --algo --rank --size --store-dir --timeout */
  PERF_EXTRA_THREADS = 1u << 1, /* --threads */
  PERF_EXTRA_SKEW = 1u << 2,    /* --skew */
};

typedef struct perf_opts {
  size_t min_bytes;
  size_t max_bytes;
  size_t factor;
  int iters;
  int warmup;
  int check;
  const char* dtype;
  const char* op;
  /* PERF_EXTRA_GLOO */
  const char* collective; /* allreduce (default) or alltoall */
  const char* algo;
  const char* store_dir;
  int rank; /* -1: take from the environment */
  int size; /* -1: take from the environment */
  double timeout_s;
  /* PERF_EXTRA_THREADS */
  int threads;
  /* PERF_EXTRA_SKEW: alltoallv sends the next rank this many times more */
  int skew;
} perf_opts;

/* nccl-tests-like defaults: 32M..32M, factor 2, 20 iterations, 5 warmup,
 * check on. */
void perf_default_opts(perf_opts* o);

/* Parses argv into `o` (set up by perf_default_opts first). Returns 0 on success, 1 when --help
 * was asked for (usage already printed), -1 on a bad flag (message printed
 * to stderr when `verbose`). */
int perf_parse_args(int argc, char** argv, perf_opts* o, unsigned extras, int verbose);

/* "64", "4K", "256M", "1G" (binary multiples). Returns 0 on success. */
int perf_parse_size(const char* s, size_t* out);

/* Only float32 / sum are implemented by the peer drivers. Returns 0 when the
 * options name them, else prints why (when verbose) and returns -1. */
int perf_require_float_sum(const perf_opts* o, int verbose);

/* The value rank `rank` contributes at element `i`: a small integer, so any
 * summation order gives the exact result in float. */
float perf_input_value(int rank, size_t i);
void perf_fill_input(float* buf, size_t count, int rank);
/* Number of elements of buf that differ from the sum over `nranks` ranks. */
long perf_count_wrong(const float* buf, size_t count, int nranks);
/* The same for buf holding the result's elements [offset, offset + count)
 * (a ReduceScatter block). */
long perf_count_wrong_at(const float* buf, size_t count, int nranks, size_t offset);

/* Data movement: element `i` of the block tagged `seed` (e.g. source rank, or
 * source * nranks + destination). Nonnegative integers below 2^20, so exact in
 * float, and different seeds give different sequences. */
float perf_pattern_value(uint64_t seed, size_t i);
void perf_fill_pattern(float* buf, size_t count, uint64_t seed);
/* Number of elements of buf that differ from the pattern of `seed`. */
long perf_count_pattern_wrong(const float* buf, size_t count, uint64_t seed);

/* Next size of the sweep; 0 when done. */
size_t perf_next_size(const perf_opts* o, size_t bytes);

/* Output, nccl-tests all_reduce_perf layout. The caller prints only on the
 * printing rank. `bus_factor` turns algbw into busbw (2(n-1)/n for
 * allreduce). Times are microseconds; a negative time prints as N/A. A
 * negative wrong count prints N/A (no check). */
void perf_print_preamble(const perf_opts* o, const char* what);
void perf_print_columns(void);
void perf_print_row(size_t bytes, size_t count, const char* type, const char* op, int root,
                    double oop_us, long oop_wrong, double ip_us, long ip_wrong,
                    double bus_factor);
/* Prints the footer and returns the total wrong count seen by print_row. */
long perf_print_footer(void);

double perf_allreduce_bus_factor(int nranks);
/* nccl-tests' AllGather / ReduceScatter / AllToAll factor, (n-1)/n. */
double perf_gather_bus_factor(int nranks);
double perf_now_s(void);

#ifdef __cplusplus
}
#endif

#endif
