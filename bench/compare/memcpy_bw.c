/* memcpy-bw: the machine's copy bandwidth, the yardstick for shared-memory
 * collectives. Each of --threads N threads (default 1) is pinned to one CPU
 * of the process's affinity mask (round-robin), owns a source and a
 * destination buffer of the row's size (first touched by that thread), and
 * copies one into the other with libc memcpy; all threads start each
 * repetition together. Reported bandwidth is bytes copied per second (the
 * memory traffic is about twice that: a read and a write per byte).
 *
 * The table has the nccl-tests layout so that tools/compare.py parses it with
 * the same code as the collective drivers: the out-of-place columns hold the
 * median over -n repetitions of the time (us) of one memcpy of the whole
 * buffer on every thread together, algbw = busbw = threads x bytes / time,
 * and #wrong the destination elements that differ from the source (-c 1).
 * The in-place columns are N/A. With --threads > 1, a comment line per row
 * gives each thread's own median bandwidth. Default size: 256 MiB. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_common.h"

typedef struct shared_state shared_state;

typedef struct {
  shared_state* s;
  int index;
  int cpu; /* -1: not pinned */
  int pin_error;
  float* src;
  float* dst;
  double* start; /* per repetition */
  double* end;
  long wrong;
} worker;

struct shared_state {
  pthread_barrier_t barrier;
  const perf_opts* o;
  size_t bytes;
  int reps; /* warmup + iters */
  int alloc_failed;
};

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void* worker_main(void* arg) {
  worker* w = arg;
  shared_state* s = w->s;
  if (w->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    w->pin_error = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  size_t bytes = s->bytes;
  void *src = NULL, *dst = NULL;
  if (posix_memalign(&src, 4096, bytes) != 0 || posix_memalign(&dst, 4096, bytes) != 0) {
    __atomic_store_n(&s->alloc_failed, 1, __ATOMIC_SEQ_CST);
  } else {
    w->src = src;
    w->dst = dst;
    perf_fill_input(w->src, bytes / sizeof(float), w->index);
    memset(w->dst, 0, bytes);
  }
  pthread_barrier_wait(&s->barrier);
  int failed = __atomic_load_n(&s->alloc_failed, __ATOMIC_SEQ_CST);
  for (int r = 0; r < s->reps && !failed; r++) {
    pthread_barrier_wait(&s->barrier);
    w->start[r] = perf_now_s();
    memcpy(w->dst, w->src, bytes);
    w->end[r] = perf_now_s();
  }
  if (!failed && s->o->check) {
    size_t count = bytes / sizeof(float);
    long wrong = 0;
    for (size_t i = 0; i < count; i++) wrong += w->dst[i] != w->src[i];
    w->wrong = wrong;
  }
  free(src);
  free(dst);
  w->src = w->dst = NULL;
  return NULL;
}

/* The CPUs this process may run on, in order. */
static int allowed_cpus(int* cpus, int max) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

static int run_size(const perf_opts* o, size_t bytes, const int* cpus, int ncpus) {
  int nt = o->threads;
  int reps = o->warmup + o->iters;
  shared_state s = {.o = o, .bytes = bytes, .reps = reps, .alloc_failed = 0};
  pthread_barrier_init(&s.barrier, NULL, (unsigned)nt);
  worker* ws = calloc((size_t)nt, sizeof *ws);
  pthread_t* tids = calloc((size_t)nt, sizeof *tids);
  double* times = calloc((size_t)reps * (size_t)nt * 2, sizeof(double));
  if (!ws || !tids || !times) {
    fprintf(stderr, "error: out of memory\n");
    return 2;
  }
  for (int t = 0; t < nt; t++) {
    ws[t].s = &s;
    ws[t].index = t;
    ws[t].cpu = ncpus > 0 ? cpus[t % ncpus] : -1;
    ws[t].start = times + (size_t)t * (size_t)reps * 2;
    ws[t].end = ws[t].start + reps;
  }
  int created = 0, rc = 0;
  for (int t = 0; t < nt; t++) {
    int err = pthread_create(&tids[t], NULL, worker_main, &ws[t]);
    if (err != 0) {
      /* Nobody can pass the barrier now; this cannot be recovered cleanly. */
      fprintf(stderr, "error: pthread_create: %s\n", strerror(err));
      exit(2);
    }
    created++;
  }
  for (int t = 0; t < created; t++) pthread_join(tids[t], NULL);
  pthread_barrier_destroy(&s.barrier);

  if (s.alloc_failed) {
    fprintf(stderr, "error: cannot allocate 2 x %zu bytes per thread\n", bytes);
    rc = 2;
  } else {
    for (int t = 0; t < nt; t++)
      if (ws[t].pin_error)
        fprintf(stderr, "warning: cannot pin thread %d to cpu %d: %s\n", t, ws[t].cpu, strerror(ws[t].pin_error));
    /* Together: from the first start to the last end of each repetition. */
    double* together = calloc((size_t)o->iters, sizeof(double));
    double* own = calloc((size_t)o->iters, sizeof(double));
    long wrong = 0;
    for (int r = o->warmup; r < reps; r++) {
      double t0 = ws[0].start[r], t1 = ws[0].end[r];
      for (int t = 1; t < nt; t++) {
        if (ws[t].start[r] < t0) t0 = ws[t].start[r];
        if (ws[t].end[r] > t1) t1 = ws[t].end[r];
      }
      together[r - o->warmup] = t1 - t0;
    }
    for (int t = 0; t < nt; t++) wrong += ws[t].wrong;
    if (nt > 1) {
      printf("# threads %d, size %zu per thread:", nt, bytes);
      for (int t = 0; t < nt; t++) {
        for (int r = o->warmup; r < reps; r++) own[r - o->warmup] = ws[t].end[r] - ws[t].start[r];
        double m = median(own, o->iters);
        printf(" thread %d (cpu %d) %.2f GB/s;", t, ws[t].cpu, (double)bytes / m / 1e9);
      }
      printf(" total below\n");
    }
    double us = median(together, o->iters) * 1e6;
    /* algbw is computed from the row's size, so pass the bytes of all threads. */
    perf_print_row(bytes * (size_t)nt, bytes / sizeof(float) * (size_t)nt, "float", "copy", -1, us,
                   o->check ? wrong : -1, -1.0, -1, 1.0);
    free(together);
    free(own);
  }
  free(ws);
  free(tids);
  free(times);
  return rc;
}

int main(int argc, char** argv) {
  perf_opts o;
  perf_default_opts(&o);
  /* memcpy-bw's own defaults: one 256 MiB buffer (far beyond the caches),
   * median of 10 copies. */
  o.min_bytes = o.max_bytes = 256u << 20;
  o.iters = 10;
  o.warmup = 2;
  int rc = perf_parse_args(argc, argv, &o, PERF_EXTRA_THREADS, 1);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (perf_require_float_sum(&o, 1) != 0) return 2;

  int cpus[CPU_SETSIZE];
  int ncpus = allowed_cpus(cpus, CPU_SETSIZE);
  char what[160];
  snprintf(what, sizeof what, "memcpy-bw: libc memcpy, %d thread(s) pinned round-robin to %d allowed cpu(s)",
           o.threads, ncpus);
  perf_print_preamble(&o, what);
  printf("# time = median over iters of one memcpy per thread (all threads together); "
         "algbw = busbw = bytes copied per second; in-place: N/A\n");
  perf_print_columns();
  for (size_t bytes = o.min_bytes; bytes != 0; bytes = perf_next_size(&o, bytes)) {
    bytes -= bytes % sizeof(float);
    if (bytes == 0) continue;
    rc = run_size(&o, bytes, cpus, ncpus);
    if (rc != 0) return rc;
  }
  return perf_print_footer() ? 1 : 0;
}
