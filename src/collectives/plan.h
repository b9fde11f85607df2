// A plan is what an algorithm produces: for this rank, an ordered list of
// steps, each moving one piece (at most one message) between user buffers
// and peers. The executor runs any plan over any transport; an algorithm is
// a plan builder, never a loop over bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/reduce.h"

namespace gyre::collectives {

enum class Prim : uint8_t {
  Copy,                // dst = src (local)
  Send,                // peer <- src
  Recv,                // dst <- peer
  RecvReduce,          // dst = recv (+) src
  RecvReduceSend,      // next <- recv (+) src
  RecvReduceCopySend,  // dst = recv (+) src, and next <- the same
  RecvCopySend,        // dst = recv, and next <- the same
};

enum class BufId : uint8_t { Input, Output };

struct Step {
  Prim prim = Prim::Copy;
  BufId src = BufId::Input;
  BufId dst = BufId::Output;
  bool recvFirst = true;     // the received data is the left operand
  bool finalReduce = false;  // the result is final: apply the average's divisor
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  size_t srcOffset = 0;  // elements
  size_t dstOffset = 0;  // elements
  size_t count = 0;      // elements
};

struct Plan {
  const char* algorithm = "";
  std::vector<int> peers;  // every peer a step talks to
  std::vector<Step> steps;
  void reset(const char* name) {
    algorithm = name;
    peers.clear();
    steps.clear();  // keeps capacity: no allocation in steady state
  }
};

// What one call operates on.
struct CallArgs {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
  kernels::DType dtype = kernels::DType::Float32;
  kernels::Op op = kernels::Op::Sum;
  uint32_t divisor = 1;  // average: the rank count
  size_t elemSize = 4;
  // The output is too large to stay in cache: write it with non-temporal
  // stores (never the FIFO slots, which a peer reads next).
  bool streamOutput = false;
};

}  // namespace gyre::collectives
