// AllToAllv, each block the way its own size favours.
//
// Why: an AllToAllv's ranks may send very different totals (a mixture of
// experts' imbalance), so no choice made from one rank's counts is the same
// on every rank, and ranks running different algorithms cannot talk. Every
// rank runs this one; what differs per block is decided from that block's
// size, which both its ends know (the sender's sendcounts[q], the receiver's
// recvcounts[p]), against a threshold every rank computes alike
// (blockwiseReadThreshold: the communicator's shape and model, not the call).
//
// How: pairwise's rounds (round k: send to rank + k, receive from rank - k)
// in two lanes, sends and receives, so no mix of speeds deadlocks. A block of
// the threshold or more is read by its receiver straight from the sender's
// buffer (direct's single copy): its sender tells the receiver where it lies
// before the lanes start (one small message per such block), and the
// receiver reads it in its round. Smaller blocks, empty ones
// included, travel through the connection as in pairwise. After both lanes,
// each reader tells the owners of the blocks it read that it is done, and
// each owner waits for those readers only, so no rank returns, and lets its
// caller touch its buffer, while a peer may still read it.
#include <algorithm>
#include <cstdint>

#include "base/log.h"
#include "collectives/alltoall.h"
#include "collectives/steps.h"
#include "collectives/tuner.h"

namespace gyre::collectives {

namespace {

// Reads go in pieces of this many bytes, as the direct AllToAll's do.
constexpr size_t kReadPieceBytes = 1024 * 1024;

}  // namespace

size_t blockwiseThresholdOf(const PlanEnv& env) {
  CallRequest req;  // the threshold depends on the communicator, not on a call's counts
  req.desc.kind = OpKind::AllToAll;
  req.elemSize = 1;
  return blockwiseReadThreshold(callShape(req, env), env.tuning().model);
}

void logBlockwiseThreshold(const PlanEnv& env) {
  if (env.rank() != 0 || env.nranks() < 2 || !log::enabled(log::Level::Info)) return;
  const TuningParams& t = env.tuning();
  const size_t threshold = t.blockwiseReadBytes;
  if (threshold == SIZE_MAX) {
    GYRE_INFO("alltoallv blockwise on %d ranks: every block passes through the connection (%s)", env.nranks(),
              env.canReadPeerMemory() ? "by the model, a single-copy read never costs less"
                                      : "peers' memory cannot be read");
    return;
  }
  GYRE_INFO("alltoallv blockwise on %d ranks: blocks of %zu bytes and more are read from the sender's buffer, "
            "smaller ones pass through the connection (threshold from the %s model, %s reads)",
            env.nranks(), threshold, t.model.source.c_str(),
            t.mappedBuffers ? "mapped" : "kernel (process_vm_readv)");
}

void buildBlockwiseAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("blockwise");
  plan.rank = env.rank();
  const int n = env.nranks(), me = env.rank();
  const size_t esz = req.elemSize;
  const size_t *sc = req.sendCounts, *sd = req.sendDispls, *rc = req.recvCounts, *rd = req.recvDispls;
  for (int k = 1; k < n; ++k) plan.addPeer((me + k) % n);
  const size_t chunk = pairwisePieceElems(req, env, plan.peers);  // connects them
  const size_t threshold = env.tuning().blockwiseReadBytes;  // the same on every rank
  auto isRead = [&](size_t count) { return count * esz >= threshold; };

  // Before the lanes (the prologue): the in-place copy, and where each
  // block to be read lies (for its reader).
  BufId from = BufId::Input;
  if (req.inPlace) {
    size_t total = 0;
    for (int p = 0; p < n; ++p) total = std::max(total, sd[p] + sc[p]);
    plan.scratchElems = total;
    add(plan, Prim::Copy, BufId::Input, 0, BufId::Scratch, 0, total);
    from = BufId::Scratch;
  }
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n;
    if (!isRead(sc[to])) continue;
    add(plan, Prim::SendAddresses, from, sd[to], BufId::Output, 0, sc[to], to).blockCount = sc[to];
  }

  // Sends: the blocks that pass through the connection; then our own
  // block, while they are on their way (as pairwise).
  plan.beginLane();
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n;
    if (isRead(sc[to])) continue;
    forPieces(sc[to], pairwisePieceElemsFor(req, env, chunk, to), [&](size_t off, size_t len) {
      add(plan, Prim::Send, from, sd[to] + off, BufId::Output, 0, len, to).blockCount = sc[to];
    }, true);
  }
  add(plan, Prim::Copy, from, sd[me], BufId::Output, rd[me], sc[me]);
  // Receives and reads.
  plan.beginLane();
  const size_t piece = std::max<size_t>(1, kReadPieceBytes / esz);
  for (int k = 1; k < n; ++k) {
    const int src = (me - k + n) % n;
    if (!isRead(rc[src])) {
      forPieces(rc[src], pairwisePieceElemsFor(req, env, chunk, src), [&](size_t off, size_t len) {
        add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, rd[src] + off, len, -1, src).blockCount = rc[src];
      }, true);
      continue;
    }
    add(plan, Prim::RecvAddresses, from, 0, BufId::Output, 0, rc[src], -1, src).blockCount = rc[src];
    forPieces(rc[src], piece, [&](size_t off, size_t len) {
      Step& s = add(plan, Prim::ReadCopy, BufId::Output, 0, BufId::Output, rd[src] + off, len, -1, src);
      s.remote = BufId::Input;  // the address its owner offered: its block's start
      s.remoteOffset = off;
    });
  }
  plan.closeLane();

  // After both lanes (the epilogue): "done" to the owner of every block we
  // read, then from every reader of ours. Each follows, on its connection,
  // everything else this call sends that way.
  for (int k = 1; k < n; ++k) {
    const int src = (me - k + n) % n;
    if (isRead(rc[src])) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, src);
  }
  for (int k = 1; k < n; ++k) {
    const int to = (me + k) % n;
    if (isRead(sc[to])) add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, to);
  }
}

}  // namespace gyre::collectives
