// What gyre-bench runs: for each collective, how a row's size maps to the
// call's counts and buffers (nccl-tests' conventions), the bus-bandwidth
// factor, the call itself, and exact inputs with a check of the result.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/exact_values.h"
#include "bench/gyre_bench/options.h"
#include "gyre/gyre.h"

namespace gyre::bench {

// One call's arguments. Sizes in elements.
struct Call {
  gyreComm_t comm = nullptr;
  int rank = 0, nranks = 1;
  const Options* opt = nullptr;
  size_t count = 0;                 // the count argument of the call
  size_t sendElems = 0, recvElems = 0;
  unsigned char* send = nullptr;    // the caller's buffers (already placed for in-place)
  unsigned char* recv = nullptr;
  bool inPlace = false;
  gyreStream_t stream = nullptr;    // --device cuda: the stream the calls are enqueued on
  std::vector<size_t> sc, sd, rc, rd;  // alltoallv
  uint64_t step = 0;                   // peeraverage: the next call's step
  size_t tokens = 0;                   // seqtoheads, headstoseq: every rank's tokens
};

// What a collective's compressed form (--codec) adds. Its results are
// lossy, so rather than counting wrong elements the check measures how far
// they are from the exact ones, on inputs with fractions a codec must round.
struct Lossy {
  void (*fill)(Call& c);
  test::ErrorStats (*error)(Call& c);  // after fill + run: this rank's output against the exact one
  // The bytes this rank sends per call with `codec` (gyreCodecNone: the
  // uncompressed call's), averaged over the ranks; payload only.
  double (*wireBytes)(const Call& c, gyreCodec_t codec);
};

struct Collective {
  const char* name;
  bool reduces;      // takes an op (and prints it)
  bool rooted;       // takes a root (and prints it)
  bool hasInPlace;   // an in-place form exists
  double (*busFactor)(int nranks);
  // Sets count, sendElems and recvElems for a row of `elems` elements in
  // nccl-tests' count column (the larger buffer's size).
  void (*shape)(Call& c, size_t elems);
  // Points send/recv into the two allocations as the in-place form wants.
  void (*place)(Call& c, unsigned char* a, unsigned char* b);
  void (*fill)(Call& c);
  gyreResult_t (*run)(Call& c);
  size_t (*wrong)(Call& c);  // after fill + run: how many elements are wrong here
  const Lossy* lossy;        // null: no compressed form
};

// The bytes of one message of n values encoded by codec (uncompressed:
// n values of esz bytes), as kernels/common/codec.h lays them out: int8 a
// {lo, hi} float pair per chunk of 4096 values, then a byte per value;
// onebit a float scale per chunk, then a bit per value in 32-bit words.
size_t messageBytes(gyreCodec_t codec, size_t n, size_t esz);

const Collective* findCollective(const std::string& name);
std::string collectiveNames();

}  // namespace gyre::bench
