/*
 * A program written against NCCL's API only (plus POSIX to start its ranks):
 * it is built twice, once with gyre's nccl.h and libnccl.so.2, once with the
 * CUDA toolkit's nccl.h and NVIDIA's library, then run on gyre's through
 * LD_LIBRARY_PATH. Host buffers and NULL streams throughout.
 *
 * Usage:
 *   nccl_api_test NRANKS [TIMEOUT_S]
 *     The parent forks the ranks; rank 0 creates the unique ids and sends
 *     them to the others through pipes (as an MPI program broadcasts them).
 *     The parent prints "PASS" with the version code the library reported
 *     only when every rank exited 0. It forks before any NCCL call has
 *     started a thread: a child of a threaded parent may inherit a lock
 *     some other thread held (the sanitizers' allocator has no fork
 *     handlers in GCC 12).
 *   gyrerun -n N nccl_api_test --launcher
 *     Rank and size from the launcher (GYRE_RANK, GYRE_WORLD_SIZE); every
 *     rank calls ncclGetUniqueId itself, which NCCL_COMM_ID (or the
 *     launcher's GYRE_COMM_ID) makes the same id everywhere.
 */
#define _POSIX_C_SOURCE 200809L
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;

#define CHECK(call)                                                                            \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess) {                                                                   \
      fprintf(stderr, "rank %d: %s:%d: %s returned %d (%s): %s\n", g_rank, __FILE__, __LINE__, \
              #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL));                 \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

#define EXPECT(cond, ...)                                                                  \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "rank %d: %s:%d: expected %s: ", g_rank, __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                        \
      fprintf(stderr, "\n");                                                               \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

/* An error that must be refused locally with this code and a sentence that
 * mentions `word`. */
static void expectError(ncclResult_t got, ncclResult_t want, const char* word, const char* what) {
  const char* text = ncclGetLastError(NULL);
  EXPECT(got == want, "%s: result %d (%s), want %d", what, (int)got, ncclGetErrorString(got),
         (int)want);
  EXPECT(text && strstr(text, word), "%s: last error '%s' should mention '%s'", what,
         text ? text : "(null)", word);
}

static void* xmalloc(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* Every value below is a small integer, so every type and op has an exact
 * result known in advance. */
static void allReduceTests(ncclComm_t comm, int rank, int n) {
  enum { kCount = 1031 };
  size_t i;
  int r;
  float* f = xmalloc(kCount * sizeof(float));
  float* fout = xmalloc(kCount * sizeof(float));
  int32_t* i32 = xmalloc(kCount * sizeof(int32_t));
  int64_t* i64 = xmalloc(kCount * sizeof(int64_t));
  double* d = xmalloc(kCount * sizeof(double));
  uint8_t* u8 = xmalloc(kCount);
  ncclRedOp_t premul;
  float scalar = 2.0f;
  double dscalar = 0.0;

  /* float sum, out of place */
  for (i = 0; i < kCount; i++) f[i] = (float)(rank + 1 + (int)(i % 7));
  CHECK(ncclAllReduce(f, fout, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(fout[i] == (float)(n * (n + 1) / 2 + n * (int)(i % 7)), "float sum [%zu] = %g", i,
           fout[i]);

  /* float avg, in place: the mean of rank + i%5 over ranks is (n-1)/2 + i%5 */
  for (i = 0; i < kCount; i++) f[i] = (float)(rank + (int)(i % 5));
  CHECK(ncclAllReduce(f, f, kCount, ncclFloat, ncclAvg, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(f[i] == (float)((n - 1) / 2.0 + (double)(i % 5)), "float avg [%zu] = %g", i, f[i]);

  /* int32 max, int64 min, double prod, uint8 sum */
  for (i = 0; i < kCount; i++) {
    i32[i] = rank * 3 - (int32_t)(i % 11);
    i64[i] = (int64_t)rank - (int64_t)i * 1000000000LL;
    d[i] = (double)(rank + 1 + (int)(i % 3));
    u8[i] = (uint8_t)(rank + i % 4);
  }
  CHECK(ncclAllReduce(i32, i32, kCount, ncclInt32, ncclMax, comm, NULL));
  CHECK(ncclAllReduce(i64, i64, kCount, ncclInt64, ncclMin, comm, NULL));
  CHECK(ncclAllReduce(d, d, kCount, ncclFloat64, ncclProd, comm, NULL));
  CHECK(ncclAllReduce(u8, u8, kCount, ncclUint8, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++) {
    double p = 1;
    for (r = 0; r < n; r++) p *= (double)(r + 1 + (int)(i % 3));
    EXPECT(i32[i] == (n - 1) * 3 - (int32_t)(i % 11), "int32 max [%zu] = %d", i, (int)i32[i]);
    EXPECT(i64[i] == -(int64_t)i * 1000000000LL, "int64 min [%zu] = %lld", i, (long long)i64[i]);
    EXPECT(d[i] == p, "double prod [%zu] = %g, want %g", i, d[i], p);
    EXPECT(u8[i] == (uint8_t)(n * (n - 1) / 2 + n * (int)(i % 4)), "uint8 sum [%zu] = %u", i,
           (unsigned)u8[i]);
  }

  /* PreMulSum with a host scalar: sum over ranks of 2 * (rank + 1) */
  for (i = 0; i < kCount; i++) f[i] = (float)(rank + 1);
  CHECK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  scalar = 100.0f; /* copied at creation: no effect */
  CHECK(ncclAllReduce(f, fout, kCount, ncclFloat32, premul, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(fout[i] == (float)(n * (n + 1)), "premulsum (host) [%zu] = %g", i, fout[i]);
  CHECK(ncclRedOpDestroy(premul, comm));

  /* ... and with a scalar read through its pointer at the call */
  for (i = 0; i < kCount; i++) d[i] = (double)(rank + 1);
  CHECK(ncclRedOpCreatePreMulSum(&premul, &dscalar, ncclFloat64, ncclScalarDevice, comm));
  dscalar = 3.0;
  CHECK(ncclAllReduce(d, d, kCount, ncclDouble, premul, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(d[i] == 3.0 * n * (n + 1) / 2, "premulsum (pointer) [%zu] = %g", i, d[i]);
  CHECK(ncclRedOpDestroy(premul, comm));

  /* count 0 is a valid no-op */
  CHECK(ncclAllReduce(f, fout, 0, ncclFloat32, ncclSum, comm, NULL));

  free(f);
  free(fout);
  free(i32);
  free(i64);
  free(d);
  free(u8);
}

static void rootedTests(ncclComm_t comm, int rank, int n) {
  enum { kCount = 777 };
  size_t i;
  int r;
  int32_t* a = xmalloc((size_t)n * kCount * sizeof(int32_t));
  int32_t* b = xmalloc((size_t)n * kCount * sizeof(int32_t));
  const int bcastRoot = n - 1, reduceRoot = 1 % n, gatherRoot = 0, scatterRoot = n - 1;

  /* Broadcast, out of place */
  for (i = 0; i < kCount; i++) a[i] = rank == bcastRoot ? (int32_t)(i * 7 + 1) : -1;
  memset(b, 0, kCount * sizeof(int32_t));
  CHECK(ncclBroadcast(a, b, kCount, ncclInt32, bcastRoot, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(b[i] == (int32_t)(i * 7 + 1), "broadcast [%zu] = %d", i, (int)b[i]);

  /* Bcast: in place, from root 0 */
  for (i = 0; i < kCount; i++) a[i] = rank == 0 ? (int32_t)(i + 5) : 0;
  CHECK(ncclBcast(a, kCount, ncclInt, 0, comm, NULL));
  for (i = 0; i < kCount; i++) EXPECT(a[i] == (int32_t)(i + 5), "bcast [%zu] = %d", i, (int)a[i]);

  /* Reduce, out of place, then in place */
  for (i = 0; i < kCount; i++) a[i] = (int32_t)(rank + i);
  memset(b, 0, kCount * sizeof(int32_t));
  CHECK(ncclReduce(a, b, kCount, ncclInt32, ncclSum, reduceRoot, comm, NULL));
  if (rank == reduceRoot)
    for (i = 0; i < kCount; i++)
      EXPECT(b[i] == (int32_t)(n * (n - 1) / 2 + n * (int)i), "reduce [%zu] = %d", i, (int)b[i]);
  CHECK(ncclReduce(a, a, kCount, ncclInt32, ncclMax, reduceRoot, comm, NULL));
  if (rank == reduceRoot)
    for (i = 0; i < kCount; i++)
      EXPECT(a[i] == (int32_t)(n - 1 + i), "reduce in place [%zu] = %d", i, (int)a[i]);

  /* AllGather, out of place, then in place (own block at rank * count) */
  for (i = 0; i < kCount; i++) a[i] = (int32_t)(rank * 1000 + i);
  CHECK(ncclAllGather(a, b, kCount, ncclInt32, comm, NULL));
  for (r = 0; r < n; r++)
    for (i = 0; i < kCount; i++)
      EXPECT(b[(size_t)r * kCount + i] == (int32_t)(r * 1000 + i), "allgather [%d][%zu]", r, i);
  memset(b, 0, (size_t)n * kCount * sizeof(int32_t));
  for (i = 0; i < kCount; i++) b[(size_t)rank * kCount + i] = (int32_t)(rank * 1000 + i);
  CHECK(ncclAllGather(b + (size_t)rank * kCount, b, kCount, ncclInt32, comm, NULL));
  for (r = 0; r < n; r++)
    for (i = 0; i < kCount; i++)
      EXPECT(b[(size_t)r * kCount + i] == (int32_t)(r * 1000 + i), "allgather in place [%d][%zu]",
             r, i);

  /* ReduceScatter, out of place, then in place (result at rank * count) */
  for (r = 0; r < n; r++)
    for (i = 0; i < kCount; i++) a[(size_t)r * kCount + i] = (int32_t)(r + rank + (int)i);
  CHECK(ncclReduceScatter(a, b, kCount, ncclInt32, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(b[i] == (int32_t)(n * rank + n * (n - 1) / 2 + n * (int)i), "reducescatter [%zu] = %d",
           i, (int)b[i]);
  CHECK(ncclReduceScatter(a, a + (size_t)rank * kCount, kCount, ncclInt32, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(a[(size_t)rank * kCount + i] == (int32_t)(n * rank + n * (n - 1) / 2 + n * (int)i),
           "reducescatter in place [%zu]", i);

  /* AlltoAll: block j of rank r carries r*100+j */
  for (r = 0; r < n; r++)
    for (i = 0; i < kCount; i++)
      a[(size_t)r * kCount + i] = (int32_t)(rank * 100 + r + (int)i * 10000);
  CHECK(ncclAlltoAll(a, b, kCount, ncclInt32, comm, NULL));
  for (r = 0; r < n; r++)
    for (i = 0; i < kCount; i++)
      EXPECT(b[(size_t)r * kCount + i] == (int32_t)(r * 100 + rank + (int)i * 10000),
             "alltoall [%d][%zu]", r, i);

  /* Gather and Scatter */
  for (i = 0; i < kCount; i++) a[i] = (int32_t)(rank * 3 + i);
  CHECK(ncclGather(a, b, kCount, ncclInt32, gatherRoot, comm, NULL));
  if (rank == gatherRoot)
    for (r = 0; r < n; r++)
      for (i = 0; i < kCount; i++)
        EXPECT(b[(size_t)r * kCount + i] == (int32_t)(r * 3 + i), "gather [%d][%zu]", r, i);
  if (rank == scatterRoot)
    for (r = 0; r < n; r++)
      for (i = 0; i < kCount; i++) a[(size_t)r * kCount + i] = (int32_t)(r * 5 + i);
  CHECK(ncclScatter(a, b, kCount, ncclInt32, scatterRoot, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(b[i] == (int32_t)(rank * 5 + i), "scatter [%zu] = %d", i, (int)b[i]);

  free(a);
  free(b);
}

/* Every rank sends to the next and receives from the previous, receive
 * posted first: only a group makes that order safe. */
static void sendRecvRing(ncclComm_t comm, int rank, int n) {
  enum { kCount = 4099 };
  size_t i;
  double* out = xmalloc(kCount * sizeof(double));
  double* in = xmalloc(kCount * sizeof(double));
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  for (i = 0; i < kCount; i++) {
    out[i] = rank * 10000.0 + (double)i;
    in[i] = -1;
  }
  CHECK(ncclGroupStart());
  CHECK(ncclRecv(in, kCount, ncclFloat64, prev, comm, NULL));
  CHECK(ncclSend(out, kCount, ncclFloat64, next, comm, NULL));
  CHECK(ncclGroupEnd());
  for (i = 0; i < kCount; i++)
    EXPECT(in[i] == prev * 10000.0 + (double)i, "ring recv [%zu] = %g", i, in[i]);
  free(out);
  free(in);
}

/* usedId: a well-formed id whose rendezvous is over, so that only the
 * argument under test is wrong. */
static void errorTests(ncclComm_t comm, ncclUniqueId usedId, int n) {
  float x[4] = {0, 0, 0, 0};
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  ncclComm_t none = NULL;
  expectError(ncclAllReduce(x, x, 4, (ncclDataType_t)99, ncclSum, comm, NULL), ncclInvalidArgument,
              "99", "unknown dtype");
  expectError(ncclAllReduce(x, x, 4, ncclFloat32, (ncclRedOp_t)77, comm, NULL), ncclInvalidArgument,
              "77", "unknown op");
  expectError(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument, "comm",
              "null comm");
  expectError(ncclBroadcast(x, x, 4, ncclFloat32, n, comm, NULL), ncclInvalidArgument, "root",
              "bad root");
  expectError(ncclSend(x, 4, ncclFloat32, -1, comm, NULL), ncclInvalidArgument, "peer", "bad peer");
  expectError(ncclAllReduce(NULL, x, 4, ncclFloat32, ncclSum, comm, NULL), ncclInvalidArgument,
              "sendbuff", "null buffer");
  expectError(ncclCommCount(comm, NULL), ncclInvalidArgument, "count", "null count");
  expectError(ncclGroupEnd(), ncclInvalidUsage, "GroupStart", "unmatched group end");
  bad.magic = 0;
  expectError(ncclCommInitRankConfig(&none, n, usedId, 0, &bad), ncclInvalidArgument, "magic",
              "config without magic");
  expectError(ncclCommInitRank(&none, n, usedId, n), ncclInvalidArgument, "rank",
              "rank out of range");
  EXPECT(strlen(ncclGetErrorString(ncclInvalidArgument)) > 0, "an error string");
  /* After refused calls the communicator still works. */
  x[0] = 1;
  CHECK(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, comm, NULL));
  EXPECT(x[0] == (float)n, "usable after errors: %g", x[0]);
}

static void splitTests(ncclComm_t comm, int rank, int n) {
  ncclComm_t child = NULL;
  int childRank = -1, childCount = -1;
  const int top = (n - 1) % 2 == rank % 2 ? n - 1 : n - 2; /* largest parent rank of my parity */
  int32_t v = rank;
  /* Reverse order in each half: the highest parent rank becomes child rank 0. */
  CHECK(ncclCommSplit(comm, rank % 2, -rank, &child, NULL));
  EXPECT(child != NULL, "a child communicator");
  CHECK(ncclCommCount(child, &childCount));
  CHECK(ncclCommUserRank(child, &childRank));
  EXPECT(childCount == (rank % 2 == 0 ? (n + 1) / 2 : n / 2), "child size %d", childCount);
  EXPECT(childRank == (childCount - 1) - rank / 2, "child rank %d", childRank);
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclMax, child, NULL));
  EXPECT(v == top, "max over the child = %d, want %d", (int)v, top);
  CHECK(ncclCommDestroy(child));
}

/* blocking = 0: init returns ncclInProgress and finishes in the background;
 * the caller polls ncclCommGetAsyncError, as NCCL's documentation shows. */
static void nonblockingTests(ncclUniqueId id, int rank, int n) {
  ncclComm_t comm = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclResult_t r, state = ncclInProgress;
  int polls = 0;
  int64_t v = rank + 1;
  config.blocking = 0;
  config.commName = "nonblocking";
  /* NCCL allows ncclSuccess here too; gyre always connects in the
   * background, so the handle must come back before the init is done. */
  r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
  EXPECT(r == ncclInProgress, "nonblocking init returned %d", (int)r);
  EXPECT(comm != NULL, "a communicator handle before the init finished");
  do {
    CHECK(ncclCommGetAsyncError(comm, &state));
    polls++;
    if (state == ncclInProgress) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
  } while (state == ncclInProgress);
  EXPECT(state == ncclSuccess, "nonblocking init ended with %d: %s", (int)state,
         ncclGetLastError(comm));
  r = ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comm, NULL);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "allreduce on a nonblocking comm returned %d",
         (int)r);
  r = ncclCommFinalize(comm);
  EXPECT(r == ncclSuccess || r == ncclInProgress, "finalize returned %d", (int)r);
  do {
    CHECK(ncclCommGetAsyncError(comm, &state));
  } while (state == ncclInProgress);
  EXPECT(state == ncclSuccess, "after finalize: %d", (int)state);
  EXPECT(v == (int64_t)n * (n + 1) / 2, "nonblocking allreduce = %lld", (long long)v);
  CHECK(ncclCommDestroy(comm));
  if (rank == 0)
    printf("nonblocking init: ncclInProgress, then ncclSuccess after %d polls\n", polls);
}

static void memoryTests(ncclComm_t comm, int rank, int n) {
  enum { kCount = 1 << 16 };
  float* buf = NULL;
  void* handle = NULL;
  int device = -2;
  size_t i;
  CHECK(ncclMemAlloc((void**)&buf, kCount * sizeof(float)));
  EXPECT(buf != NULL, "memory");
  CHECK(ncclCommRegister(comm, buf, kCount * sizeof(float), &handle));
  for (i = 0; i < kCount; i++) buf[i] = (float)rank;
  CHECK(ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (i = 0; i < kCount; i++)
    EXPECT(buf[i] == (float)(n * (n - 1) / 2), "registered buffer [%zu]", i);
  CHECK(ncclCommDeregister(comm, handle));
  expectError(ncclCommDeregister(comm, handle), ncclInvalidArgument, "handle",
              "deregistered twice");
  CHECK(ncclMemFree(buf));
  CHECK(ncclCommCuDevice(comm, &device));
  EXPECT(device == -1, "host communicator's device %d", device);
}

static void abortTest(ncclUniqueId id, int rank, int n) {
  ncclComm_t comm = NULL;
  int32_t v = 1;
  CHECK(ncclCommInitRank(&comm, n, id, rank));
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
  EXPECT(v == n, "before abort: %d", (int)v);
  CHECK(ncclCommAbort(comm));
}

/* NCCL 2.28's revoke: the communicator quiescent (ncclSuccess) and every
 * later call refused by name, then destroyed. */
static void revokeTest(ncclUniqueId id, int rank, int n) {
  ncclComm_t comm = NULL;
  int32_t v = 1;
  ncclResult_t async = ncclInProgress;
  CHECK(ncclCommInitRank(&comm, n, id, rank));
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
  EXPECT(v == n, "before revoke: %d", (int)v);
  expectError(ncclCommRevoke(comm, 5), ncclInvalidArgument, "flags 5", "revoke flags");
  CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  while (async == ncclInProgress) CHECK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess, "revoked communicator's state %d", (int)async);
  expectError(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL), ncclInvalidUsage,
              "revoked", "a call after revoke");
  CHECK(ncclCommDestroy(comm));
}

/* NCCL 2.28's shrink: every rank but the last makes a communicator without
 * it; the parent stays usable by all (here, as the barrier that lets the
 * last rank leave). */
static void shrinkTest(ncclUniqueId id, int rank, int n) {
  ncclComm_t comm = NULL, small = NULL;
  int32_t v = 1;
  int count = -1, me = -1, last = n - 1;
  CHECK(ncclCommInitRank(&comm, n, id, rank));
  if (rank != last) {
    expectError(ncclCommShrink(comm, &rank, 1, &small, NULL, NCCL_SHRINK_DEFAULT),
                ncclInvalidArgument, "is this rank", "excluding oneself");
    CHECK(ncclCommShrink(comm, &last, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
    CHECK(ncclCommCount(small, &count));
    CHECK(ncclCommUserRank(small, &me));
    EXPECT(count == n - 1 && me == rank, "shrunk: rank %d of %d", me, count);
    v = rank;
    CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, small, NULL));
    EXPECT(v == (n - 1) * (n - 2) / 2, "allreduce on the shrunk communicator: %d", (int)v);
    CHECK(ncclCommDestroy(small));
  }
  v = 1;
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
  EXPECT(v == n, "the parent after the shrink: %d", (int)v);
  CHECK(ncclCommDestroy(comm));
}

/* The rest of NCCL 2.28's host API: a scalable init (nId ids), a group
 * simulated rather than run, a memory window, and ncclResetDebugInit. */
static void nccl228Test(const ncclUniqueId* ids, int rank, int n) {
  ncclComm_t comm = NULL;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  ncclWindow_t win = NULL;
  float* buf = xmalloc(1024 * sizeof(float));
  int32_t v = rank;
  size_t i;
  CHECK(ncclCommInitRankScalable(&comm, n, rank, 2, (ncclUniqueId*)ids, NULL));
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
  EXPECT(v == n * (n - 1) / 2, "scalable init's allreduce: %d", (int)v);
  /* Simulated: an estimate, and the call does not run. */
  v = rank;
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, NULL));
  CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL));
  CHECK(ncclGroupSimulateEnd(&sim));
  EXPECT(v == rank, "a simulated group's call ran: %d", (int)v);
  EXPECT(n == 1 ? sim.estimatedTime == 0.0f : sim.estimatedTime > 0.0f,
         "estimatedTime %g us", (double)sim.estimatedTime);
  bad.magic = 0;
  CHECK(ncclGroupStart());
  EXPECT(ncclGroupSimulateEnd(&bad) == ncclInvalidArgument, "simInfo without its magic");
  /* A window: registered memory that collectives use as any buffer. */
  CHECK(ncclCommWindowRegister(comm, buf, 1024 * sizeof(float), &win, NCCL_WIN_DEFAULT));
  for (i = 0; i < 1024; i++) buf[i] = 1.0f;
  CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL));
  EXPECT(buf[0] == (float)n && buf[1023] == (float)n, "allreduce in a window: %g", (double)buf[0]);
  CHECK(ncclCommWindowDeregister(comm, win));
  EXPECT(ncclCommWindowRegister(comm, buf, 16, &win, 0x80) == ncclInvalidArgument, "window flags");
  CHECK(ncclCommDestroy(comm));
  free(buf);
  /* Deprecated in NVIDIA's header, but there. With NCCL_TEST_RESET_DEBUG
   * set, rank 0 turns INFO logging on mid-run (the ctest looks for INFO
   * lines after the marker). */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
  if (rank == 0 && getenv("NCCL_TEST_RESET_DEBUG")) {
    fprintf(stderr, "debug reset\n");
    fflush(stderr);
    setenv("NCCL_DEBUG", "INFO", 1);
  }
  ncclResetDebugInit();
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

/* ndev communicators in one process, driven from one thread by a group. */
static void initAllTest(int n) {
  ncclComm_t* comms = xmalloc((size_t)n * sizeof(ncclComm_t));
  int32_t* v = xmalloc((size_t)n * sizeof(int32_t));
  int i, r;
  CHECK(ncclCommInitAll(comms, n, NULL));
  for (i = 0; i < n; i++) {
    CHECK(ncclCommUserRank(comms[i], &r));
    EXPECT(r == i, "comms[%d] has rank %d", i, r);
    v[i] = i + 1;
  }
  CHECK(ncclGroupStart());
  for (i = 0; i < n; i++) CHECK(ncclAllReduce(&v[i], &v[i], 1, ncclInt32, ncclSum, comms[i], NULL));
  CHECK(ncclGroupEnd());
  for (i = 0; i < n; i++)
    EXPECT(v[i] == n * (n + 1) / 2, "InitAll allreduce on comms[%d] = %d", i, (int)v[i]);
  for (i = 0; i < n; i++) CHECK(ncclCommDestroy(comms[i]));
  free(comms);
  free(v);
}

enum { kMainId, kNonblockingId, kAbortId, kRevokeId, kShrinkId, kScalableId, kScalableId2, kIds };

static void onAlarm(int sig) { (void)sig; /* only interrupts waitpid */ }

static int runRank(const ncclUniqueId* ids, int rank, int n) {
  ncclComm_t comm = NULL;
  int count = -1, me = -1, version = 0;
  g_rank = rank;
  CHECK(ncclGetVersion(&version));
  CHECK(ncclCommInitRank(&comm, n, ids[kMainId], rank));
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &me));
  EXPECT(count == n && me == rank, "count %d rank %d", count, me);
  allReduceTests(comm, rank, n);
  rootedTests(comm, rank, n);
  sendRecvRing(comm, rank, n);
  errorTests(comm, ids[kMainId], n);
  splitTests(comm, rank, n);
  memoryTests(comm, rank, n);
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  nonblockingTests(ids[kNonblockingId], rank, n);
  abortTest(ids[kAbortId], rank, n);
  revokeTest(ids[kRevokeId], rank, n);
  shrinkTest(ids[kShrinkId], rank, n);
  nccl228Test(&ids[kScalableId], rank, n);
  if (rank == 0) initAllTest(n);
  return 0;
}

static int envInt(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : -1;
}

static int launcherMode(void) {
  ncclUniqueId ids[kIds];
  int r, rank = envInt("GYRE_RANK"), n = envInt("GYRE_WORLD_SIZE"), version = 0;
  if (rank < 0 || n < 1) {
    fprintf(stderr, "--launcher: GYRE_RANK and GYRE_WORLD_SIZE are not set\n");
    return 2;
  }
  g_rank = rank;
  for (r = 0; r < kIds; r++) CHECK(ncclGetUniqueId(&ids[r]));
  EXPECT(memcmp(&ids[0], &ids[kIds - 1], sizeof(ncclUniqueId)) == 0, "the same id from every call");
  if (runRank(ids, rank, n) != 0) return 1;
  CHECK(ncclGetVersion(&version));
  printf("PASS: rank %d of %d, ncclGetVersion %d\n", rank, n, version);
  return 0;
}

/* Rank 0 makes the ids and writes them to every other rank's pipe. */
static int forkedRank(int (*pipes)[2], int rank, int n) {
  ncclUniqueId ids[kIds];
  int r;
  g_rank = rank;
  for (r = 1; r < n; r++) {
    if (r != rank) close(pipes[r][0]);
    if (rank != 0) close(pipes[r][1]);
  }
  if (rank == 0) {
    for (r = 0; r < kIds; r++) CHECK(ncclGetUniqueId(&ids[r]));
    for (r = 1; r < n; r++) {
      EXPECT(write(pipes[r][1], ids, sizeof(ids)) == (ssize_t)sizeof(ids), "ids sent to rank %d",
             r);
      close(pipes[r][1]);
    }
  } else {
    size_t got = 0;
    while (got < sizeof(ids)) {
      ssize_t k = read(pipes[rank][0], (char*)ids + got, sizeof(ids) - got);
      EXPECT(k > 0, "the ids from rank 0 (read returned %zd)", k);
      got += (size_t)k;
    }
  }
  return runRank(ids, rank, n);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  int timeoutS = argc > 2 ? atoi(argv[2]) : 60;
  int version = 0, r, failed = 0;
  int pipes[64][2];
  pid_t pids[64];
  if (argc > 1 && !strcmp(argv[1], "--launcher")) return launcherMode();
  if (n < 1 || n > 64) {
    fprintf(stderr, "usage: %s NRANKS(1-64) [TIMEOUT_S]\n", argv[0]);
    return 2;
  }
  CHECK(ncclGetVersion(&version));
  for (r = 1; r < n; r++)
    if (pipe(pipes[r]) != 0) {
      perror("pipe");
      return 1;
    }
  fflush(stdout);
  for (r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[r] == 0) {
      int rc = forkedRank(pipes, r, n);
      fflush(stdout); /* _exit skips stdio; the parent's atexit work is not the child's */
      _exit(rc);
    }
  }
  for (r = 1; r < n; r++) {
    close(pipes[r][0]);
    close(pipes[r][1]);
  }
  /* A rank that hangs must not hang the test: the alarm interrupts waitpid
   * and every rank is killed. */
  {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onAlarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm((unsigned)timeoutS);
  }
  for (r = 0; r < n; r++) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) < 0) {
      fprintf(stderr, "timed out after %d s waiting for rank %d\n", timeoutS, r);
      failed = 1;
      break;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, status);
      failed = 1;
    }
  }
  if (failed) {
    for (r = 0; r < n; r++) kill(pids[r], SIGKILL);
    while (wait(NULL) > 0) {
    }
    return 1;
  }
  printf("PASS: %d ranks, ncclGetVersion %d\n", n, version);
  return 0;
}
