// Compressed collectives (docs/compression.md): AllReduce, ReduceScatter
// and AllGather whose messages are encoded by a codec (kernels/cpu/codec.h),
// built as plans like every other algorithm.
//
// AllReduce: every rank encodes each other rank's block of its input and
// sends it there (a reduce-scatter of compressed blocks); the block's owner
// adds the decoded contributions to its own input in float32, in rank order,
// encodes the sum once and sends it to every rank (an all-gather of
// compressed blocks), and every rank, the owner too, decodes that one
// message: every rank ends with the same bits. Only the owner's sum is
// encoded twice over, never a running sum passed around a ring, so the error
// is one encoding of each contribution plus one of the result, whatever the
// rank count.
//
// Such a plan is a byte plan (plan.h): CallArgs::elemSize is 1 and
// CallArgs::values the caller's type. Within a rank the lanes are: one per
// peer sending to it, one per peer receiving from it, and one that reduces
// and encodes this rank's block; Await steps order them (the owner's result
// leaves once it is encoded, the reduction waits for each contribution).
#pragma once

#include <cstddef>

#include "collectives/planner.h"

namespace gyre::collectives {

// The blocks of a compressed AllReduce of `count` values over n ranks: rank
// j owns [begin(j), begin(j + 1)), whole codec chunks (codec::kChunk) but
// the last, spread as evenly as chunks allow (a rank may own none). A
// compressor's residuals are indexed by the tensor's values: each Encode
// keeps the residual of the values it encodes.
struct CodecBlocks {
  size_t count = 0;
  int n = 1;
  size_t begin(int j) const;
  size_t size(int j) const { return begin(j + 1) - begin(j); }
};

// Whether a compressed AllReduce on this communicator is hierarchical:
// ranks on several hosts, more than one on a host, as many on each.
// Within a host it sums in full precision over shared memory, and only the
// host sums cross the network, encoded (compressed.cc).
bool compressedIsHierarchical(PlanEnv& env);

// req.desc.codec names the codec (not None), req.values the values' type;
// req.elemSize is 1 and req.desc.count counts values (per rank for
// ReduceScatter and AllGather, as the API does).
void buildCompressed(const CallRequest& req, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
