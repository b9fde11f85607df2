// gloo-allreduce-perf: Gloo allreduce (float, sum) or, with --collective
// alltoall, Gloo alltoall (float) over Gloo's TCP transport bound to
// 127.0.0.1 (or to the interface GLOO_SOCKET_IFNAME names), timed the way
// nccl-tests all_reduce_perf times ncclAllReduce and
// printing the same table. One process per rank; ranks meet through
// gloo::rendezvous::FileStore in a fresh directory. tools/compare.py starts
// the processes; by hand:
//
//   d=$(mktemp -d); for r in 0 1; do
//     gloo-allreduce-perf --algo ring --rank $r --size 2 --store-dir $d -b 8 -e 64M -f 4 &
//   done; wait
//
// AllReduce: Gloo's algorithm classes (AllreduceRing, AllreduceRingChunked,
// AllreduceHalvingDoubling) reduce in place. Their out-of-place column is a
// memcpy of the input into the output buffer followed by the in-place
// algorithm, which is what a caller of those classes has to do; the in-place
// column is the algorithm alone. allreduce_ring / allreduce_bcube use the
// gloo::allreduce(AllreduceOptions) entry point, which takes separate input
// and output buffers.
//
// AllToAll: gloo::alltoall(AlltoallOptions), Gloo's one algorithm (every rank
// posts a send to and a receive from each peer at once), with the shape of
// gyre-bench and mpi-collective-perf: a row's size is each rank's whole send
// (and receive) buffer, size / nranks bytes per peer, the block from s to d
// carrying pattern s * nranks + d; busbw = algbw x (n-1)/n. Gloo has no
// in-place AllToAll (it posts every receive while its sends from the input
// are still in flight, so one buffer for both is not safe), so that column is
// N/A, as for gyre-bench's alltoallv.
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "perf_common.h"

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// One allreduce of `count` floats bound to fixed buffers.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual void run(bool in_place) = 0;
};

// Gloo's in-place algorithm classes, constructed once per size (their
// constructor sets up the pair buffers) and run many times.
template <typename Algo>
class ClassRunner final : public Runner {
 public:
  ClassRunner(const std::shared_ptr<gloo::Context>& ctx, float* send, float* recv, size_t count)
      : send_(send),
        recv_(recv),
        count_(count),
        algo_(std::make_unique<Algo>(ctx, std::vector<float*>{recv}, static_cast<int>(count))) {}

  void run(bool in_place) override {
    if (!in_place) std::memcpy(recv_, send_, count_ * sizeof(float));
    algo_->run();
  }

 private:
  float* send_;
  float* recv_;
  size_t count_;
  // Held by pointer: Gloo's algorithm destructors are noexcept(false).
  std::unique_ptr<Algo> algo_;
};

// The gloo::allreduce(AllreduceOptions) entry point (what PyTorch's
// ProcessGroupGloo calls for dense CPU tensors), out-of-place natively.
class OptionsRunner final : public Runner {
 public:
  OptionsRunner(const std::shared_ptr<gloo::Context>& ctx, gloo::AllreduceOptions::Algorithm algo, float* send,
                float* recv, size_t count)
      : ctx_(ctx), algo_(algo), send_(send), recv_(recv), count_(count) {}

  void run(bool in_place) override {
    gloo::AllreduceOptions opts(ctx_);
    opts.setAlgorithm(algo_);
    if (!in_place) opts.setInput(send_, count_);
    opts.setOutput(recv_, count_);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  gloo::AllreduceOptions::Algorithm algo_;
  float* send_;
  float* recv_;
  size_t count_;
};

// gloo::alltoall, out of place; a fresh AlltoallOptions per call, as a caller
// (PyTorch's ProcessGroupGloo) builds one per call.
class AlltoallRunner final : public Runner {
 public:
  AlltoallRunner(const std::shared_ptr<gloo::Context>& ctx, float* send, float* recv, size_t count)
      : ctx_(ctx), send_(send), recv_(recv), count_(count) {}

  void run(bool /*in_place*/) override {
    gloo::AlltoallOptions opts(ctx_);
    opts.setInput(send_, count_);
    opts.setOutput(recv_, count_);
    gloo::alltoall(opts);
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  float* send_;
  float* recv_;
  size_t count_;
};

bool known_algo(const std::string& a) {
  return a == "ring" || a == "ring_chunked" || a == "halving_doubling" || a == "allreduce_ring" ||
         a == "allreduce_bcube";
}

std::unique_ptr<Runner> make_runner(const std::string& algo, const std::shared_ptr<gloo::Context>& ctx, float* send,
                                    float* recv, size_t count) {
  if (algo == "ring") return std::make_unique<ClassRunner<gloo::AllreduceRing<float>>>(ctx, send, recv, count);
  if (algo == "ring_chunked")
    return std::make_unique<ClassRunner<gloo::AllreduceRingChunked<float>>>(ctx, send, recv, count);
  if (algo == "halving_doubling")
    return std::make_unique<ClassRunner<gloo::AllreduceHalvingDoubling<float>>>(ctx, send, recv, count);
  if (algo == "allreduce_ring")
    return std::make_unique<OptionsRunner>(ctx, gloo::AllreduceOptions::Algorithm::RING, send, recv, count);
  return std::make_unique<OptionsRunner>(ctx, gloo::AllreduceOptions::Algorithm::BCUBE, send, recv, count);
}

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions opts(ctx);
  gloo::barrier(opts);
}

// Sum of a few doubles over all ranks (used for times, wrong counts, pids).
void sum_doubles(const std::shared_ptr<gloo::Context>& ctx, double* v, size_t n) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(v, n);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<double>));
  gloo::allreduce(opts);
}

struct Buffers {
  float* send = nullptr;
  float* recv = nullptr;
  ~Buffers() {
    std::free(send);
    std::free(recv);
  }
};

float* alloc_buffer(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes ? bytes : 4096) != 0) return nullptr;
  std::memset(p, 0, bytes);  // first touch here, not inside the timed loop
  return static_cast<float*>(p);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

int run(const perf_opts& o) {
  const int rank = o.rank >= 0 ? o.rank : env_int("RANK", -1);
  const int size = o.size >= 1 ? o.size : env_int("WORLD_SIZE", -1);
  const char* store_dir = o.store_dir ? o.store_dir : std::getenv("GLOO_STORE_DIR");
  if (rank < 0 || size < 1 || rank >= size) {
    std::fprintf(stderr, "error: need --rank/--size (or RANK/WORLD_SIZE) with 0 <= rank < size\n");
    return 2;
  }
  if (!store_dir || !*store_dir) {
    std::fprintf(stderr, "error: need --store-dir (or GLOO_STORE_DIR): an empty directory shared by the ranks\n");
    return 2;
  }
  const bool alltoall = std::strcmp(o.collective, "alltoall") == 0;
  if (!alltoall && std::strcmp(o.collective, "allreduce") != 0) {
    std::fprintf(stderr, "error: unknown --collective '%s' (allreduce, alltoall)\n", o.collective);
    return 2;
  }
  if (!alltoall && !known_algo(o.algo)) {
    std::fprintf(stderr, "error: unknown --algo '%s' (ring, ring_chunked, halving_doubling, allreduce_ring, "
                 "allreduce_bcube)\n", o.algo);
    return 2;
  }
  if (o.max_bytes / sizeof(float) > 0x7fffffffu / sizeof(float)) {
    std::fprintf(stderr, "error: -e too large: Gloo's algorithm classes count bytes in an int\n");
    return 2;
  }
  mkdir(store_dir, 0700);  // may exist already; FileStore reports real problems

  // Loopback unless GLOO_SOCKET_IFNAME (PyTorch's name for it) names the
  // interface: ranks in different network namespaces (tools/netns_bench.sh)
  // meet over their own links, the store being a shared directory.
  gloo::transport::tcp::attr attr;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const std::string where = ifname && *ifname ? ifname : "127.0.0.1";
  if (ifname && *ifname)
    attr.iface = ifname;
  else
    attr.hostname = "127.0.0.1";
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000)));
  gloo::rendezvous::FileStore store(store_dir);
  ctx->connectFullMesh(store, dev);
  std::shared_ptr<gloo::Context> base = ctx;

  Buffers b;
  b.send = alloc_buffer(o.max_bytes);
  b.recv = alloc_buffer(o.max_bytes);
  double ok = (b.send && b.recv) ? 1.0 : 0.0;
  sum_doubles(base, &ok, 1);
  if (ok < size) {
    if (rank == 0) std::fprintf(stderr, "error: cannot allocate 2 x %zu bytes\n", o.max_bytes);
    return 2;
  }

  std::vector<double> pids(static_cast<size_t>(size), 0.0);
  pids[static_cast<size_t>(rank)] = static_cast<double>(getpid());
  sum_doubles(base, pids.data(), pids.size());
  if (rank == 0) {
    char what[256];
    if (alltoall)
      std::snprintf(what, sizeof what, "gloo-allreduce-perf: Gloo %d.%d.%d alltoall, %d ranks, tcp transport on "
                    "%s", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, size, where.c_str());
    else
      std::snprintf(what, sizeof what, "gloo-allreduce-perf: Gloo %d.%d.%d algo %s, %d ranks, tcp transport on "
                    "%s", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, o.algo, size, where.c_str());
    perf_print_preamble(&o, what);
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    std::printf("# Using devices\n");
    for (int r = 0; r < size; r++)
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s device -1 [host] CPU memory\n", r,
                  static_cast<int>(pids[static_cast<size_t>(r)]), host);
    perf_print_columns();
  }

  const double bus = alltoall ? perf_gather_bus_factor(size) : perf_allreduce_bus_factor(size);
  const size_t n = static_cast<size_t>(size);
  for (size_t bytes = o.min_bytes; bytes != 0; bytes = perf_next_size(&o, bytes)) {
    // AllReduce: `count` elements in and out. AllToAll: `count` per peer,
    // `elems` = count x nranks in each buffer (the row's size).
    const size_t count = alltoall ? bytes / sizeof(float) / n : bytes / sizeof(float);
    const size_t elems = alltoall ? count * n : count;
    if (count == 0) continue;  // too small to give every rank an element
    std::unique_ptr<Runner> runner;
    if (alltoall)
      runner = std::make_unique<AlltoallRunner>(base, b.send, b.recv, elems);
    else
      runner = make_runner(o.algo, base, b.send, b.recv, count);
    auto fill = [&](bool in_place) {
      if (alltoall) {
        for (size_t p = 0; p < n; p++)
          perf_fill_pattern(b.send + count * p, count, static_cast<uint64_t>(rank) * n + p);
        for (size_t i = 0; i < elems; i++) b.recv[i] = -1.0f;
      } else if (in_place) {
        perf_fill_input(b.recv, count, rank);
      } else {
        perf_fill_input(b.send, count, rank);
        for (size_t i = 0; i < count; i++) b.recv[i] = -1.0f;
      }
    };
    auto count_wrong = [&]() {
      if (!alltoall) return static_cast<double>(perf_count_wrong(b.recv, count, size));
      long w = 0;
      for (size_t q = 0; q < n; q++)
        w += perf_count_pattern_wrong(b.recv + count * q, count, q * n + static_cast<uint64_t>(rank));
      return static_cast<double>(w);
    };
    double us[2] = {0, 0};
    double wrong[2] = {0, 0};
    for (int in_place = 0; in_place < (alltoall ? 1 : 2); in_place++) {
      fill(in_place);
      for (int i = 0; i < o.warmup; i++) runner->run(in_place);
      barrier(base);
      const double t0 = perf_now_s();
      for (int i = 0; i < o.iters; i++) runner->run(in_place);
      us[in_place] = (perf_now_s() - t0) / o.iters * 1e6;
      if (o.check) {
        fill(in_place);
        runner->run(in_place);
        wrong[in_place] = count_wrong();
      }
    }
    double sums[4] = {us[0], us[1], wrong[0], wrong[1]};
    sum_doubles(base, sums, 4);
    if (rank == 0) {
      const bool ip = !alltoall;  // AllToAll: no in-place column
      perf_print_row(elems * sizeof(float), elems, "float", alltoall ? "none" : "sum", -1, sums[0] / size,
                     o.check ? static_cast<long>(sums[2]) : -1, ip ? sums[1] / size : -1.0,
                     o.check && ip ? static_cast<long>(sums[3]) : -1, bus);
    }
  }
  double wrong = rank == 0 ? static_cast<double>(perf_print_footer()) : 0.0;
  sum_doubles(base, &wrong, 1);
  barrier(base);
  return wrong > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  perf_opts o;
  perf_default_opts(&o);
  int rc = perf_parse_args(argc, argv, &o, PERF_EXTRA_GLOO, 1);
  if (rc != 0) return rc > 0 ? 0 : 2;
  if (perf_require_float_sum(&o, 1) != 0) return 2;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-allreduce-perf: %s\n", e.what());
    return 3;
  }
}
