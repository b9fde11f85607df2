// What a call costs by itself: blocking calls on a communicator of one rank,
// where nothing moves between processes and no peer is waited for, so the
// time is gyre's own (argument checks, the operation, the plan cache, the
// executor, the statistics). docs/PERFORMANCE-transports.md, "A call's own
// cost", compares it with Open MPI's one-rank calls.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "gyre/gyre.h"

namespace {

gyreComm_t oneRank() {
  static gyreComm_t comm = [] {
    gyreUniqueId id;
    gyreComm_t c = nullptr;
    if (gyreGetUniqueId(&id) != gyreSuccess || gyreCommInitRank(&c, 1, id, 0) != gyreSuccess) std::abort();
    return c;
  }();
  return comm;
}

template <typename Call>
void run(benchmark::State& state, Call call) {
  const size_t count = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> in(count, 1.0f), out(count);
  gyreComm_t comm = oneRank();
  for (auto _ : state)
    if (call(in.data(), out.data(), count, comm) != gyreSuccess) state.SkipWithError(gyreGetLastError(comm));
}

void BM_AllReduce(benchmark::State& state) {
  run(state, [](const float* s, float* r, size_t n, gyreComm_t c) {
    return gyreAllReduce(s, r, n, gyreFloat32, gyreSum, c, nullptr);
  });
}
void BM_AllToAll(benchmark::State& state) {
  run(state, [](const float* s, float* r, size_t n, gyreComm_t c) {
    return gyreAllToAll(s, r, n, gyreFloat32, c, nullptr);
  });
}
void BM_Broadcast(benchmark::State& state) {
  run(state, [](const float* s, float* r, size_t n, gyreComm_t c) {
    return gyreBroadcast(s, r, n, gyreFloat32, 0, c, nullptr);
  });
}

BENCHMARK(BM_AllReduce)->Arg(64)->Arg(4096);
BENCHMARK(BM_AllToAll)->Arg(64);
BENCHMARK(BM_Broadcast)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
