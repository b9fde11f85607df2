#define _GNU_SOURCE
#include "perf_common.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Input pattern period: values repeat every kPeriod elements. */
enum { kPeriod = 16 };

static long g_total_wrong;
static double g_busbw_sum;
static int g_busbw_count;

int perf_parse_size(const char* s, size_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') return -1;
  unsigned long long mult = 1;
  switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    default: return -1;
  }
  if (*end == 'B' || *end == 'b') end++; /* accept "256MB" too */
  if (*end != '\0') return -1;
  if (v > SIZE_MAX / mult) return -1;
  *out = (size_t)(v * mult);
  return 0;
}

static int parse_int(const char* s, int* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < -1000000000L || v > 1000000000L) return -1;
  *out = (int)v;
  return 0;
}

static void usage(const char* prog, unsigned extras, const perf_opts* o) {
  printf("usage: %s [flags]\n"
         "  -b, --minbytes SIZE     smallest message (K/M/G suffixes), default %zu\n"
         "  -e, --maxbytes SIZE     largest message, default %zu\n"
         "  -f, --stepfactor N      multiply the size by N each step, default %zu\n"
         "  -n, --iters N           timed iterations per size, default %d\n"
         "  -w, --warmup_iters N    warmup iterations per size, default %d\n"
         "  -d, --datatype TYPE     float (the only type the peer drivers implement)\n"
         "  -o, --op OP             sum (the only op the peer drivers implement)\n"
         "  -c, --check 0|1         check results, default %d\n",
         prog, o->min_bytes, o->max_bytes, o->factor, o->iters, o->warmup, o->check);
  if (extras & PERF_EXTRA_GLOO)
    printf("  --collective NAME       allreduce | alltoall (gloo::alltoall, out of place\n"
           "                          only), default allreduce\n"
           "  --algo NAME             allreduce: ring | ring_chunked | halving_doubling (Gloo's\n"
           "                          algorithm classes, in-place) | allreduce_ring |\n"
           "                          allreduce_bcube (gloo::allreduce with AllreduceOptions),\n"
           "                          default ring; alltoall has one algorithm\n"
           "  --rank R, --size N      this process's rank and the world size\n"
           "                          (default: $RANK and $WORLD_SIZE)\n"
           "  --store-dir DIR         empty directory for gloo::rendezvous::FileStore\n"
           "                          (default: $GLOO_STORE_DIR)\n"
           "  --timeout SECONDS       Gloo context timeout, default 60\n");
  if (extras & PERF_EXTRA_SKEW)
    printf("  --skew K                alltoallv: each rank sends its next rank K times what it\n"
           "                          sends each other rank, default %d\n", o->skew);
  if (extras & PERF_EXTRA_THREADS)
    printf("  --threads N             copy concurrently on N threads, each pinned to one CPU\n"
           "                          of the process's affinity mask (round-robin), default 1\n");
}

void perf_default_opts(perf_opts* o) {
  memset(o, 0, sizeof(*o));
  o->min_bytes = 32u << 20;
  o->max_bytes = 32u << 20;
  o->factor = 2;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->dtype = "float";
  o->op = "sum";
  o->collective = "allreduce";
  o->algo = "ring";
  o->store_dir = NULL;
  o->rank = -1;
  o->size = -1;
  o->timeout_s = 60.0;
  o->threads = 1;
  o->skew = 1;
}

int perf_parse_args(int argc, char** argv, perf_opts* o, unsigned extras, int verbose) {
  enum { OPT_ALGO = 256, OPT_RANK, OPT_SIZE, OPT_STORE, OPT_TIMEOUT, OPT_THREADS, OPT_SKEW, OPT_COLLECTIVE };
  static const struct option all_longopts[] = {
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"iters", required_argument, NULL, 'n'},
      {"warmup_iters", required_argument, NULL, 'w'},
      {"datatype", required_argument, NULL, 'd'},
      {"op", required_argument, NULL, 'o'},
      {"check", required_argument, NULL, 'c'},
      {"help", no_argument, NULL, 'h'},
      {"algo", required_argument, NULL, OPT_ALGO},
      {"rank", required_argument, NULL, OPT_RANK},
      {"size", required_argument, NULL, OPT_SIZE},
      {"store-dir", required_argument, NULL, OPT_STORE},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"skew", required_argument, NULL, OPT_SKEW},
      {"collective", required_argument, NULL, OPT_COLLECTIVE},
      {NULL, 0, NULL, 0},
  };
  const char* prog = argc > 0 ? argv[0] : "perf";
  opterr = verbose;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "b:e:f:n:w:d:o:c:h", all_longopts, NULL)) != -1) {
    int bad = 0;
    switch (c) {
      case 'b': bad = perf_parse_size(optarg, &o->min_bytes); break;
      case 'e': bad = perf_parse_size(optarg, &o->max_bytes); break;
      case 'f': {
        size_t f = 0;
        bad = perf_parse_size(optarg, &f) || f < 2;
        o->factor = f;
        break;
      }
      case 'n': bad = parse_int(optarg, &o->iters) || o->iters < 1; break;
      case 'w': bad = parse_int(optarg, &o->warmup) || o->warmup < 0; break;
      case 'd': o->dtype = optarg; break;
      case 'o': o->op = optarg; break;
      case 'c': bad = parse_int(optarg, &o->check) || o->check < 0 || o->check > 1; break;
      case 'h':
        if (verbose) usage(prog, extras, o);
        return 1;
      case OPT_ALGO: bad = !(extras & PERF_EXTRA_GLOO); o->algo = optarg; break;
      case OPT_COLLECTIVE: bad = !(extras & PERF_EXTRA_GLOO); o->collective = optarg; break;
      case OPT_RANK: bad = !(extras & PERF_EXTRA_GLOO) || parse_int(optarg, &o->rank) || o->rank < 0; break;
      case OPT_SIZE: bad = !(extras & PERF_EXTRA_GLOO) || parse_int(optarg, &o->size) || o->size < 1; break;
      case OPT_STORE: bad = !(extras & PERF_EXTRA_GLOO); o->store_dir = optarg; break;
      case OPT_TIMEOUT: {
        char* end = NULL;
        o->timeout_s = strtod(optarg, &end);
        bad = !(extras & PERF_EXTRA_GLOO) || end == optarg || *end != '\0' || !(o->timeout_s > 0);
        break;
      }
      case OPT_THREADS:
        bad = !(extras & PERF_EXTRA_THREADS) || parse_int(optarg, &o->threads) || o->threads < 1;
        break;
      case OPT_SKEW:
        bad = !(extras & PERF_EXTRA_SKEW) || parse_int(optarg, &o->skew) || o->skew < 1;
        break;
      default:
        if (verbose) fprintf(stderr, "%s: see --help\n", prog);
        return -1;
    }
    if (bad) {
      if (verbose) fprintf(stderr, "%s: bad or unsupported value for option '%s'\n", prog, argv[optind - 1]);
      return -1;
    }
  }
  if (optind < argc) {
    if (verbose) fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
    return -1;
  }
  if (o->max_bytes < o->min_bytes) {
    if (verbose) fprintf(stderr, "%s: -e (%zu) is smaller than -b (%zu)\n", prog, o->max_bytes, o->min_bytes);
    return -1;
  }
  return 0;
}

int perf_require_float_sum(const perf_opts* o, int verbose) {
  if (strcmp(o->dtype, "float") != 0 && strcmp(o->dtype, "float32") != 0) {
    if (verbose) fprintf(stderr, "error: datatype '%s' is not implemented by this peer driver (float only)\n", o->dtype);
    return -1;
  }
  if (strcmp(o->op, "sum") != 0) {
    if (verbose) fprintf(stderr, "error: op '%s' is not implemented by this peer driver (sum only)\n", o->op);
    return -1;
  }
  return 0;
}

float perf_input_value(int rank, size_t i) {
  return (float)((i + 3u * (unsigned)rank) % kPeriod);
}

void perf_fill_input(float* buf, size_t count, int rank) {
  for (size_t i = 0; i < count; i++) buf[i] = perf_input_value(rank, i);
}

long perf_count_wrong(const float* buf, size_t count, int nranks) {
  return perf_count_wrong_at(buf, count, nranks, 0);
}

long perf_count_wrong_at(const float* buf, size_t count, int nranks, size_t offset) {
  float expect[kPeriod];
  for (size_t k = 0; k < kPeriod; k++) {
    long s = 0;
    for (int r = 0; r < nranks; r++) s += (long)perf_input_value(r, k);
    expect[k] = (float)s;
  }
  long wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += buf[i] != expect[(offset + i) % kPeriod];
  return wrong;
}

float perf_pattern_value(uint64_t seed, size_t i) {
  /* splitmix64-style mix of (seed, i), cut to 20 bits. */
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (float)(x & 0xFFFFFu);
}

void perf_fill_pattern(float* buf, size_t count, uint64_t seed) {
  for (size_t i = 0; i < count; i++) buf[i] = perf_pattern_value(seed, i);
}

long perf_count_pattern_wrong(const float* buf, size_t count, uint64_t seed) {
  long wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += buf[i] != perf_pattern_value(seed, i);
  return wrong;
}

size_t perf_next_size(const perf_opts* o, size_t bytes) {
  if (bytes > o->max_bytes / o->factor) return 0;
  return bytes * o->factor;
}

void perf_print_preamble(const perf_opts* o, const char* what) {
  g_total_wrong = 0;
  g_busbw_sum = 0;
  g_busbw_count = 0;
  printf("# %s\n", what);
  printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
         "agg iters: 1 validation: %d graph: 0\n",
         o->min_bytes, o->max_bytes, o->factor, o->warmup, o->iters, o->check);
  printf("#\n");
}

void perf_print_columns(void) {
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
         "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type",
         "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "",
         "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

static void print_half(size_t bytes, double us, long wrong, double bus_factor) {
  char t[32], a[32], b[32], w[32];
  if (us < 0) {
    snprintf(t, sizeof t, "%7s", "N/A");
    snprintf(a, sizeof a, "%6s", "N/A");
    snprintf(b, sizeof b, "%6s", "N/A");
  } else {
    if (us >= 10000.0)
      snprintf(t, sizeof t, "%7.0f", us);
    else if (us >= 100.0)
      snprintf(t, sizeof t, "%7.1f", us);
    else
      snprintf(t, sizeof t, "%7.2f", us);
    double algbw = us > 0 ? (double)bytes / us / 1.0e3 : 0.0;
    double busbw = algbw * bus_factor;
    snprintf(a, sizeof a, "%6.2f", algbw);
    snprintf(b, sizeof b, "%6.2f", busbw);
    g_busbw_sum += busbw;
    g_busbw_count++;
  }
  if (wrong < 0) {
    snprintf(w, sizeof w, "%5s", "N/A");
  } else {
    snprintf(w, sizeof w, "%5ld", wrong);
    g_total_wrong += wrong;
  }
  printf("  %s  %s  %s  %s", t, a, b, w);
}

void perf_print_row(size_t bytes, size_t count, const char* type, const char* op, int root,
                    double oop_us, long oop_wrong, double ip_us, long ip_wrong, double bus_factor) {
  printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, op, root);
  print_half(bytes, oop_us, oop_wrong, bus_factor);
  print_half(bytes, ip_us, ip_wrong, bus_factor);
  printf("\n");
  fflush(stdout);
}

long perf_print_footer(void) {
  printf("# Out of bounds values : %ld %s\n", g_total_wrong, g_total_wrong ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g \n", g_busbw_count ? g_busbw_sum / g_busbw_count : 0.0);
  printf("#\n");
  fflush(stdout);
  return g_total_wrong;
}

double perf_allreduce_bus_factor(int nranks) {
  return nranks > 1 ? 2.0 * (nranks - 1) / nranks : 1.0;
}

double perf_gather_bus_factor(int nranks) {
  return nranks > 0 ? (double)(nranks - 1) / nranks : 0.0;
}

double perf_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
