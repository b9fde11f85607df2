// gyre-bench's command line: nccl-tests' flags and meanings, plus gyre's own
// (--ranks, --bind, --transport, --algo).
#pragma once

#include <cstddef>
#include <string>

#include "gyre/gyre.h"

namespace gyre::bench {

struct Options {
  std::string collective;
  size_t minBytes = 8, maxBytes = 256u << 20;
  double factor = 2;     // -f: multiply the size by this each row
  size_t step = 0;       // -i: or add this many bytes (nccl-tests: factor wins when both)
  int iters = 20, warmup = 5;
  bool check = true;
  gyreDataType_t dtype = gyreFloat32;
  gyreRedOp_t op = gyreSum;
  int root = 0;
  int timeoutSec = 0;  // -T: per-rank communicator timeout (0: gyre's default)
  int spawn = 0;       // --ranks N: fork N local ranks
  bool bind = false;   // --bind core: pin spawned rank i to CPU i mod ncpus
  std::string transport, algo;
  int skew = 1;        // alltoallv: each rank sends its next rank this many times more
};

// Exits with status 2 and a usage message on anything it cannot accept.
Options parseOptions(int argc, char** argv);
size_t parseBytes(const std::string& s);
const char* typeName(gyreDataType_t t);

}  // namespace gyre::bench
