// gyre-bench's command line: nccl-tests' flags and meanings (short and long
// forms), plus gyre's own (--ranks, --bind, --transport, --algo, --skew,
// the sequence exchanges' --heads, --kv-heads, --head-dim, --parts) and
// the result files (--json, --csv, --plot, --label, --percentiles), and
// --codec (the compressed collectives, their error and bytes sent).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/gyre_bench/stats.h"
#include "gyre/gyre.h"

namespace gyre::bench {

struct Options {
  std::string collective;
  size_t minBytes = 8, maxBytes = 256u << 20;
  double factor = 2;     // -f: multiply the size by this each row
  size_t step = 0;       // -i: or add this many bytes (nccl-tests: factor wins when both)
  int iters = 20, warmup = 5;
  bool check = true;
  // -d and -o: one name or "all"; the run loops over every entry (types
  // outside, ops inside, sizes innermost, as nccl-tests does). dtype and op
  // hold the combination being measured.
  std::vector<gyreDataType_t> dtypes = {gyreFloat32};
  std::vector<gyreRedOp_t> ops = {gyreSum};
  std::string dtypeArg = "float", opArg = "sum";
  gyreDataType_t dtype = gyreFloat32;
  gyreRedOp_t op = gyreSum;
  int root = 0;
  Aggregate average = Aggregate::Avg;  // -a
  int timeoutSec = 0;  // -T: bound on each row (row_timeout.h); 0: none
  // -R 1: buffers from gyreMemAlloc (which local peers can map), registered
  // with the communicator, as nccl-tests' -R uses ncclMemAlloc.
  bool registered = false;
  // --device cuda: buffers in device memory, calls on a CUDA stream
  // (device_memory.h); "host" (the default): host memory, host calls.
  std::string device = "host";
  bool commStats = false;    // --stats: every rank's gyreCommGetStats under the table
  bool percentiles = false;  // --percentiles: time each iteration, add p50/p99
  int spawn = 0;       // --ranks N: fork N local ranks
  bool bind = false;   // --bind core: pin spawned rank i to CPU i mod ncpus
  std::string transport, algo;
  // --codec: allreduce, allgather and reducescatter compressed on the wire
  // (docs/compression.md); gyreCodecNone: the plain calls.
  gyreCodec_t codec = gyreCodecNone;
  // --peers: peeraverage's selection (gyrePeerAverage).
  gyrePeers_t peers = gyrePeersRing;
  int skew = 1;        // alltoallv: each rank sends its next rank this many times more
  // seqtoheads, headstoseq: the layout (gyreSeqLayout_t; sequence.h).
  int seqHeads = 32, seqKvHeads = 0;  // 0: as many as heads
  size_t seqHeadDim = 128;
  int seqParts = gyreSeqQ;
  std::string jsonPath, csvPath, plotPath, label;
};

// `gyre-bench plot -o OUT.svg [--title T] RUN.json...`
struct PlotArgs {
  std::string out, title;
  std::vector<std::string> inputs;
};

// Both exit with status 2 and a usage message on anything they cannot
// accept, and with 0 after printing the usage for -h/--help.
Options parseOptions(int argc, char** argv);
PlotArgs parsePlotArgs(int argc, char** argv);
size_t parseBytes(const std::string& s);
// nccl-tests' names: float, half, double, bfloat16, int8 ...
const char* typeName(gyreDataType_t t);
// --codec's names: none, fp16, bf16, int8, onebit.
const char* codecName(gyreCodec_t c);

}  // namespace gyre::bench
