/* mpi-collective-perf <collective>: one MPI collective (float) timed the way
 * nccl-tests times its NCCL counterpart and gyre-bench times gyre's, printing
 * the same table, so that Open MPI can be put next to gyre for every
 * collective, not only AllReduce. Launch with mpirun.
 *
 * Shapes and bus factors follow gyre-bench (bench/gyre_bench/collectives.cc)
 * and nccl-tests: a row's size is its larger buffer's total bytes; AllGather,
 * ReduceScatter and AllToAll move size / nranks / 4 elements per rank (per
 * peer); AllToAllv sends the next rank --skew times what it sends each other
 * rank, with the same total as AllToAll of the row. Broadcast and Reduce use
 * root 0. In place is MPI_IN_PLACE; MPI_Bcast has one buffer, so its one
 * timing is reported in both columns; AllToAllv reports no in-place column,
 * as gyre-bench does. */
#define _GNU_SOURCE
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_support.h"
#include "perf_common.h"

enum { kRoot = 0 };

typedef struct bench_ctx {
  float* a; /* send buffer (or, in place, unused) */
  float* b; /* receive buffer (in place: the one buffer) */
  int rank;
  int nranks;
  int skew;
  /* Row shape. */
  size_t count;     /* the count argument of the MPI call (per rank / per peer) */
  size_t row_elems; /* the row's larger buffer, in elements */
  int* sc;          /* AllToAllv counts and displacements, nranks each */
  int* sd;
  int* rc;
  int* rd;
} bench_ctx;

typedef struct collective {
  const char* name;
  const char* mpi_name;
  int reduces;     /* float sum inputs, else data movement patterns */
  int rooted;      /* root 0, printed */
  int in_place;    /* 1: MPI_IN_PLACE column; 0: N/A; 2: the call is always in place */
  double (*bus_factor)(int nranks);
  void (*shape)(bench_ctx* c, size_t elems);
  /* Sets up inputs and clears outputs for one run (in place or not). */
  void (*fill)(bench_ctx* c, int in_place);
  int (*run)(bench_ctx* c, int in_place);
  /* Wrong elements on this rank after one run on fill's inputs. */
  long (*wrong)(bench_ctx* c, int in_place);
} collective;

static double factor_one(int nranks) {
  (void)nranks;
  return 1.0;
}
static double factor_allreduce(int nranks) { return nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0; }

static void clear(float* buf, size_t count) {
  for (size_t i = 0; i < count; i++) buf[i] = -1.0f;
}
static uint64_t block_seed(const bench_ctx* c, int from, int to) { return (uint64_t)from * (uint64_t)c->nranks + (uint64_t)to; }
static const void* send_or_in_place(const bench_ctx* c, int in_place) {
  return in_place ? MPI_IN_PLACE : (const void*)c->a;
}

/* ---- shapes ---- */

static void shape_same(bench_ctx* c, size_t elems) { c->count = c->row_elems = elems; }
static void shape_per_rank(bench_ctx* c, size_t elems) { /* allgather, reducescatter, alltoall */
  c->count = elems / (size_t)c->nranks;
  c->row_elems = c->count * (size_t)c->nranks;
}
static int alltoallv_weight(const bench_ctx* c, int from, int to) {
  return c->nranks > 1 && to == (from + 1) % c->nranks ? c->skew : 1;
}
static void shape_alltoallv(bench_ctx* c, size_t elems) {
  const int n = c->nranks;
  const size_t unit = elems / (size_t)(n - 1 + c->skew);
  size_t s = 0, r = 0;
  for (int p = 0; p < n; p++) {
    c->sc[p] = (int)(unit * (size_t)alltoallv_weight(c, c->rank, p));
    c->sd[p] = (int)s;
    s += (size_t)c->sc[p];
    c->rc[p] = (int)(unit * (size_t)alltoallv_weight(c, p, c->rank));
    c->rd[p] = (int)r;
    r += (size_t)c->rc[p];
  }
  c->count = c->row_elems = s; /* every rank sends (and receives) unit * (n - 1 + skew) */
}

/* ---- allreduce ---- */

static void fill_allreduce(bench_ctx* c, int in_place) {
  if (in_place) {
    perf_fill_input(c->b, c->count, c->rank);
  } else {
    perf_fill_input(c->a, c->count, c->rank);
    clear(c->b, c->count);
  }
}
static int run_allreduce(bench_ctx* c, int in_place) {
  return MPI_Allreduce(send_or_in_place(c, in_place), c->b, (int)c->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static long wrong_allreduce(bench_ctx* c, int in_place) {
  (void)in_place;
  return perf_count_wrong(c->b, c->count, c->nranks);
}

/* ---- reduce (root 0; in place only the root passes MPI_IN_PLACE) ---- */

static void fill_reduce(bench_ctx* c, int in_place) {
  if (in_place && c->rank == kRoot) {
    perf_fill_input(c->b, c->count, c->rank);
  } else {
    perf_fill_input(c->a, c->count, c->rank);
    if (c->rank == kRoot) clear(c->b, c->count);
  }
}
static int run_reduce(bench_ctx* c, int in_place) {
  return MPI_Reduce(send_or_in_place(c, in_place && c->rank == kRoot), c->b, (int)c->count, MPI_FLOAT, MPI_SUM, kRoot,
                    MPI_COMM_WORLD);
}
static long wrong_reduce(bench_ctx* c, int in_place) {
  (void)in_place;
  return c->rank == kRoot ? perf_count_wrong(c->b, c->count, c->nranks) : 0;
}

/* ---- reducescatter (in place: the input is the whole receive buffer, the
 * result lands at its start) ---- */

static void fill_reducescatter(bench_ctx* c, int in_place) {
  if (in_place) {
    perf_fill_input(c->b, c->row_elems, c->rank);
  } else {
    perf_fill_input(c->a, c->row_elems, c->rank);
    clear(c->b, c->count);
  }
}
static int run_reducescatter(bench_ctx* c, int in_place) {
  return MPI_Reduce_scatter_block(send_or_in_place(c, in_place), c->b, (int)c->count, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD);
}
static long wrong_reducescatter(bench_ctx* c, int in_place) {
  (void)in_place;
  return perf_count_wrong_at(c->b, c->count, c->nranks, c->count * (size_t)c->rank);
}

/* ---- allgather: block q carries pattern q (in place: own block in place) ---- */

static void fill_allgather(bench_ctx* c, int in_place) {
  clear(c->b, c->row_elems);
  perf_fill_pattern(in_place ? c->b + c->count * (size_t)c->rank : c->a, c->count, (uint64_t)c->rank);
}
static int run_allgather(bench_ctx* c, int in_place) {
  return MPI_Allgather(send_or_in_place(c, in_place), (int)c->count, MPI_FLOAT, c->b, (int)c->count, MPI_FLOAT,
                       MPI_COMM_WORLD);
}
static long wrong_allgather(bench_ctx* c, int in_place) {
  (void)in_place;
  long w = 0;
  for (int q = 0; q < c->nranks; q++)
    w += perf_count_pattern_wrong(c->b + c->count * (size_t)q, c->count, (uint64_t)q);
  return w;
}

/* ---- alltoall(v): the block from s to d carries pattern s * nranks + d ---- */

static void fill_alltoall(bench_ctx* c, int in_place) {
  float* src = in_place ? c->b : c->a;
  for (int p = 0; p < c->nranks; p++)
    perf_fill_pattern(src + c->count * (size_t)p, c->count, block_seed(c, c->rank, p));
  if (!in_place) clear(c->b, c->row_elems);
}
static int run_alltoall(bench_ctx* c, int in_place) {
  return MPI_Alltoall(send_or_in_place(c, in_place), (int)c->count, MPI_FLOAT, c->b, (int)c->count, MPI_FLOAT,
                      MPI_COMM_WORLD);
}
static long wrong_alltoall(bench_ctx* c, int in_place) {
  (void)in_place;
  long w = 0;
  for (int q = 0; q < c->nranks; q++)
    w += perf_count_pattern_wrong(c->b + c->count * (size_t)q, c->count, block_seed(c, q, c->rank));
  return w;
}

static void fill_alltoallv(bench_ctx* c, int in_place) {
  (void)in_place; /* out of place only */
  for (int p = 0; p < c->nranks; p++) perf_fill_pattern(c->a + c->sd[p], (size_t)c->sc[p], block_seed(c, c->rank, p));
  clear(c->b, c->row_elems);
}
static int run_alltoallv(bench_ctx* c, int in_place) {
  (void)in_place;
  return MPI_Alltoallv(c->a, c->sc, c->sd, MPI_FLOAT, c->b, c->rc, c->rd, MPI_FLOAT, MPI_COMM_WORLD);
}
static long wrong_alltoallv(bench_ctx* c, int in_place) {
  (void)in_place;
  long w = 0;
  for (int q = 0; q < c->nranks; q++)
    w += perf_count_pattern_wrong(c->b + c->rd[q], (size_t)c->rc[q], block_seed(c, q, c->rank));
  return w;
}

/* ---- broadcast (root 0, one buffer: always in place) ---- */

static void fill_broadcast(bench_ctx* c, int in_place) {
  (void)in_place;
  if (c->rank == kRoot)
    perf_fill_pattern(c->b, c->count, kRoot);
  else
    clear(c->b, c->count);
}
static int run_broadcast(bench_ctx* c, int in_place) {
  (void)in_place;
  return MPI_Bcast(c->b, (int)c->count, MPI_FLOAT, kRoot, MPI_COMM_WORLD);
}
static long wrong_broadcast(bench_ctx* c, int in_place) {
  (void)in_place;
  return perf_count_pattern_wrong(c->b, c->count, kRoot);
}

static const collective kCollectives[] = {
    {"allreduce", "MPI_Allreduce", 1, 0, 1, factor_allreduce, shape_same, fill_allreduce, run_allreduce,
     wrong_allreduce},
    {"allgather", "MPI_Allgather", 0, 0, 1, perf_gather_bus_factor, shape_per_rank, fill_allgather, run_allgather,
     wrong_allgather},
    {"reducescatter", "MPI_Reduce_scatter_block", 1, 0, 1, perf_gather_bus_factor, shape_per_rank,
     fill_reducescatter, run_reducescatter, wrong_reducescatter},
    {"alltoall", "MPI_Alltoall", 0, 0, 1, perf_gather_bus_factor, shape_per_rank, fill_alltoall, run_alltoall,
     wrong_alltoall},
    {"alltoallv", "MPI_Alltoallv", 0, 0, 0, perf_gather_bus_factor, shape_alltoallv, fill_alltoallv, run_alltoallv,
     wrong_alltoallv},
    {"broadcast", "MPI_Bcast", 0, 1, 2, factor_one, shape_same, fill_broadcast, run_broadcast, wrong_broadcast},
    {"reduce", "MPI_Reduce", 1, 1, 1, factor_one, shape_same, fill_reduce, run_reduce, wrong_reduce},
};
enum { kNumCollectives = (int)(sizeof kCollectives / sizeof kCollectives[0]) };

static const collective* find_collective(const char* name) {
  for (int i = 0; i < kNumCollectives; i++)
    if (strcmp(name, kCollectives[i].name) == 0) return &kCollectives[i];
  return NULL;
}

static void print_collectives(FILE* f) {
  fprintf(f, "collectives:");
  for (int i = 0; i < kNumCollectives; i++) fprintf(f, "%s %s", i ? "," : "", kCollectives[i].name);
  fprintf(f, "\n");
}

/* Fills, warms up, times; returns microseconds per call averaged over ranks. */
static double time_collective(const collective* coll, bench_ctx* c, const perf_opts* o, int in_place) {
  coll->fill(c, in_place);
  for (int i = 0; i < o->warmup; i++) coll->run(c, in_place);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; i++) coll->run(c, in_place);
  double dt = (MPI_Wtime() - t0) / o->iters;
  return mpi_average_over_ranks(dt, c->nranks) * 1e6;
}

/* One fresh call on known inputs; the wrong elements over all ranks. */
static long check_collective(const collective* coll, bench_ctx* c, int in_place) {
  coll->fill(c, in_place);
  coll->run(c, in_place);
  return mpi_sum_over_ranks(coll->wrong(c, in_place));
}

/* The collective is the first argument; the rest are perf_parse_args flags.
 * Returns 0 to run, 1 after --help, -1 on a bad command line. */
static int parse_command_line(int argc, char** argv, int verbose, perf_opts* o, const collective** coll) {
  const char* prog = argc > 0 ? argv[0] : "mpi-collective-perf";
  const char* first = argc > 1 ? argv[1] : NULL;
  int help = first && (strcmp(first, "-h") == 0 || strcmp(first, "--help") == 0);
  if (!first || help || first[0] == '-') {
    if (verbose) {
      FILE* f = help ? stdout : stderr;
      fprintf(f, "usage: %s COLLECTIVE [flags] (--help for the flags)\n", prog);
      print_collectives(f);
    }
    if (help) {
      char usage_prog[256];
      snprintf(usage_prog, sizeof usage_prog, "%s COLLECTIVE", prog);
      char* hargv[] = {usage_prog, (char*)"--help", NULL};
      perf_parse_args(2, hargv, o, PERF_EXTRA_SKEW, verbose);
      return 1;
    }
    return -1;
  }
  *coll = find_collective(first);
  if (!*coll) {
    if (verbose) {
      fprintf(stderr, "%s: unknown collective '%s'\n", prog, first);
      print_collectives(stderr);
    }
    return -1;
  }
  /* Drop the collective; keep argv[0] naming it for perf_parse_args' usage. */
  char usage_prog[256];
  snprintf(usage_prog, sizeof usage_prog, "%s %s", prog, first);
  char** rest = calloc((size_t)argc + 1, sizeof(char*));
  if (!rest) return -1;
  rest[0] = usage_prog;
  for (int i = 2; i < argc; i++) rest[i - 1] = argv[i];
  int rc = perf_parse_args(argc - 1, rest, o, PERF_EXTRA_SKEW, verbose);
  free(rest);
  return rc;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);

  perf_opts o;
  perf_default_opts(&o);
  const collective* coll = NULL;
  int rc = parse_command_line(argc, argv, rank == 0, &o, &coll);
  if (rc == 0) rc = perf_require_float_sum(&o, rank == 0);
  if (rc == 0 && o.max_bytes / sizeof(float) > (size_t)INT_MAX) {
    if (rank == 0) fprintf(stderr, "error: -e too large for an int count\n");
    rc = -1;
  }
  if (rc != 0) {
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }

  /* Every shape's buffers fit in max_bytes (a row is at most its size). */
  bench_ctx c;
  memset(&c, 0, sizeof c);
  c.a = mpi_alloc_buffer(o.max_bytes);
  c.b = mpi_alloc_buffer(o.max_bytes);
  c.rank = rank;
  c.nranks = nranks;
  c.skew = o.skew;
  c.sc = calloc((size_t)nranks, sizeof(int));
  c.sd = calloc((size_t)nranks, sizeof(int));
  c.rc = calloc((size_t)nranks, sizeof(int));
  c.rd = calloc((size_t)nranks, sizeof(int));
  int ok = c.a && c.b && c.sc && c.sd && c.rc && c.rd, all_ok = 0;
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
    char skew[32] = "";
    if (coll->shape == shape_alltoallv) snprintf(skew, sizeof skew, ", skew %d", o.skew);
    char what[MPI_MAX_LIBRARY_VERSION_STRING + 160];
    snprintf(what, sizeof what, "mpi-collective-perf %s: %s%s, %d ranks, %s", coll->name, coll->mpi_name, skew,
             nranks, version);
    perf_print_preamble(&o, what);
  }
  mpi_print_ranks(rank, nranks);
  if (rank == 0) perf_print_columns();

  const double bus = coll->bus_factor(nranks);
  const char* redop = coll->reduces ? "sum" : "none";
  const int root = coll->rooted ? kRoot : -1;
  for (size_t bytes = o.min_bytes; bytes != 0; bytes = perf_next_size(&o, bytes)) {
    coll->shape(&c, bytes / sizeof(float));
    if (c.row_elems == 0) continue; /* too small to give every rank an element */
    double us[2] = {-1.0, -1.0};
    long wrong[2] = {-1, -1};
    for (int in_place = 0; in_place < 2; in_place++) {
      if (in_place && coll->in_place != 1) continue;
      us[in_place] = time_collective(coll, &c, &o, in_place);
      if (o.check) wrong[in_place] = check_collective(coll, &c, in_place);
    }
    if (coll->in_place == 2) { /* one buffer: the same call either way */
      us[1] = us[0];
      wrong[1] = wrong[0];
    }
    if (rank == 0)
      perf_print_row(c.row_elems * sizeof(float), c.row_elems, "float", redop, root, us[0], wrong[0], us[1], wrong[1],
                     bus);
  }
  long total_wrong = 0;
  if (rank == 0) total_wrong = perf_print_footer();
  MPI_Bcast(&total_wrong, 1, MPI_LONG, 0, MPI_COMM_WORLD);

  free(c.a);
  free(c.b);
  free(c.sc);
  free(c.sd);
  free(c.rc);
  free(c.rd);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
