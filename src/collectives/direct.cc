#include "collectives/direct.h"

#include <algorithm>

#include "base/error.h"
#include "collectives/steps.h"

namespace gyre::collectives {

namespace {

// Reads go in pieces of this many bytes: large enough that the system call
// costs nothing, small enough that a reduction's bounce buffer stays in L2.
constexpr size_t kReadPieceBytes = 256 * 1024;

void requireDirect(PlanEnv& env, const char* op) {
  if (!env.canReadPeerMemory())
    throwError(gyreInvalidUsage, std::string("GYRE_ALGO asks for the direct ") + op +
                                     ", which reads peers' buffers: it needs a transport that can to every "
                                     "peer (shared memory on one host with process_vm_readv allowed, UCX or "
                                     "RDMA verbs)");
}

void allPeers(PlanEnv& env, Plan& plan) {
  for (int p = 0; p < env.nranks(); ++p)
    if (p != env.rank()) plan.addPeer(p);
  env.chunkBytes(plan.peers);  // connects them (they carry the small messages)
}

// Tells every peer where our src and dst regions are (and how many elements
// it may read), then learns theirs. count: kAnyCount to skip the check.
void exchangeAddresses(Plan& plan, PlanEnv& env, BufId src, size_t srcOff, BufId dst, size_t dstOff) {
  for (int p : plan.peers) add(plan, Prim::SendAddresses, src, srcOff, dst, dstOff, kAnyCount, p);
  for (int p : plan.peers) add(plan, Prim::RecvAddresses, src, 0, dst, 0, kAnyCount, -1, p);
}

// Empty messages to and from everyone: after it, no peer reads us any more.
void finish(Plan& plan) {
  for (int p : plan.peers) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, p);
  for (int p : plan.peers) add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, p);
}

// dst[0, count) = op over ranks r of (rank r's `remote` region + remoteBase)
// in rank order, the lower ranks' partial result always on the left; our own
// contribution comes from (local, localBase). Scratch: a bounce buffer for
// what is read, then (inPlace: dst is our own input) a saved copy of ours,
// which the reads into dst would otherwise overwrite before we use it.
void reduceFromAll(Plan& plan, PlanEnv& env, size_t count, size_t elemSize, BufId local, size_t localBase,
                   BufId remote, size_t remoteBase, BufId dst, size_t dstBase, bool inPlace) {
  const size_t piece = std::max<size_t>(1, kReadPieceBytes / elemSize);
  const size_t bounce = std::min(piece, count);
  plan.scratchElems = std::max(plan.scratchElems, bounce + (inPlace ? count : 0));
  if (inPlace) {
    add(plan, Prim::Copy, local, localBase, BufId::Scratch, bounce, count);
    local = BufId::Scratch;
    localBase = bounce;
  }
  const int n = env.nranks(), me = env.rank();
  forPieces(count, piece, [&](size_t off, size_t len) {
    for (int q = 0; q < n; ++q) {
      Step* s;
      if (q == 0) {  // the first contribution lands in dst as it is
        s = q == me ? &add(plan, Prim::Copy, local, localBase + off, dst, dstBase + off, len)
                    : &add(plan, Prim::ReadCopy, local, 0, dst, dstBase + off, len, -1, q);
      } else if (q == me) {
        s = &add(plan, Prim::Reduce, local, localBase + off, dst, dstBase + off, len);
        s->recvFirst = true;  // Reduce: dst (the lower ranks' sum) on the left
      } else {
        s = &add(plan, Prim::ReadReduce, dst, dstBase + off, dst, dstBase + off, len, -1, q);
        s->recvFirst = false;  // ReadReduce: src (here dst, the sum so far) on the left
      }
      s->remote = remote;
      s->remoteOffset = remoteBase + off;
      s->finalReduce = q == n - 1;
    }
  });
}

// Output[dstBase, dstBase + count) = the peer's `remote` region (the
// address it sent for its src or dst) from remoteBase on, in read pieces.
void readFrom(Plan& plan, const CallRequest& req, int peer, size_t count, BufId remote, size_t remoteBase,
              size_t dstBase) {
  const size_t piece = std::max<size_t>(1, 4 * kReadPieceBytes / req.elemSize);
  forPieces(count, piece, [&](size_t off, size_t len) {
    Step& s = add(plan, Prim::ReadCopy, BufId::Output, 0, BufId::Output, dstBase + off, len, -1, peer);
    s.remote = remote;
    s.remoteOffset = remoteBase + off;
  });
}

// Slice boundaries: n nearly equal parts, each starting on 64 bytes.
size_t sliceStart(size_t count, int n, int i, size_t elemSize) {
  const size_t align = std::max<size_t>(1, 64 / elemSize);
  size_t per = (count + n - 1) / n;
  per = (per + align - 1) / align * align;
  return std::min(count, per * size_t(i));
}

}  // namespace

void buildDirectAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "allreduce");
  allPeers(env, plan);
  const int n = env.nranks(), me = env.rank();
  const size_t count = req.desc.count, esz = req.elemSize;
  exchangeAddresses(plan, env, BufId::Input, 0, BufId::Output, 0);
  // Reduce-scatter: our slice, from everyone's input, into our output.
  const size_t lo = sliceStart(count, n, me, esz), hi = sliceStart(count, n, me + 1, esz);
  reduceFromAll(plan, env, hi - lo, esz, BufId::Input, lo, BufId::Input, lo, BufId::Output, lo, req.inPlace);
  // Our slice is final: the peers may read it (an empty message each).
  for (int p : plan.peers) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, p);
  // All-gather: every other slice from its owner's output, once it is final.
  for (int q = 0; q < n; ++q) {
    if (q == me) continue;
    add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, q);
    const size_t qlo = sliceStart(count, n, q, esz), qhi = sliceStart(count, n, q + 1, esz);
    readFrom(plan, req, q, qhi - qlo, BufId::Output, qlo, qlo);
  }
  finish(plan);
}

namespace {

void requireMulti(PlanEnv& env, const char* op) {
  requireDirect(env, op);
  if (env.nranks() > kernels::kMaxReduceAll)
    throwError(gyreInvalidUsage, std::string("GYRE_ALGO asks for ") + op + ":direct_multi, which reduces at most " +
                                     std::to_string(kernels::kMaxReduceAll) + " ranks' data in one pass; this "
                                     "communicator has " + std::to_string(env.nranks()) + " (use direct)");
}

// Our slice's result from every rank's (remote) region in one pass
// (Prim::ReduceFromAll), into our dst and, with toAll, every peer's.
void reduceSliceFromAll(Plan& plan, PlanEnv& env, const CallRequest& req, size_t count, size_t srcBase,
                        size_t dstBase, bool toAll) {
  const size_t piece = std::max<size_t>(1, kReadPieceBytes / req.elemSize);
  plan.scratchElems = 2 * std::min(piece, std::max<size_t>(count, 1));  // the host's pieces: sum, read
  Step& s = add(plan, Prim::ReduceFromAll, BufId::Input, srcBase, BufId::Output, dstBase, count);
  s.remote = BufId::Input;
  s.remoteOffset = srcBase;
  s.finalReduce = true;
  s.toAll = toAll;
  plan.peersWriteOutput = toAll && env.nranks() > 1;
}

}  // namespace

// Each rank reduces its slice from every rank's input in one pass and
// writes it to every rank's output: each byte of every input read once,
// each byte of every output written once (the direct plan above reads
// partial sums again, and copies the slices a second time). The device's
// plan: on a GPU, one kernel per rank.
void buildDirectMultiAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct_multi");
  requireMulti(env, "allreduce");
  allPeers(env, plan);
  const int n = env.nranks(), me = env.rank();
  plan.rank = me;
  const size_t count = req.desc.count, esz = req.elemSize;
  exchangeAddresses(plan, env, BufId::Input, 0, BufId::Output, 0);
  const size_t lo = sliceStart(count, n, me, esz), hi = sliceStart(count, n, me + 1, esz);
  reduceSliceFromAll(plan, env, req, hi - lo, lo, lo, true);
  finish(plan);  // after it, every output is whole and no one reads us
}

void buildDirectMultiReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct_multi");
  requireMulti(env, "reducescatter");
  allPeers(env, plan);
  plan.rank = env.rank();
  const size_t count = req.desc.count;
  exchangeAddresses(plan, env, BufId::Input, 0, BufId::Output, 0);
  reduceSliceFromAll(plan, env, req, count, count * size_t(env.rank()), 0, false);
  finish(plan);
}

void buildDirectReduceScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "reducescatter");
  allPeers(env, plan);
  const size_t count = req.desc.count, block = count * size_t(env.rank());
  exchangeAddresses(plan, env, BufId::Input, 0, BufId::Output, 0);
  reduceFromAll(plan, env, count, req.elemSize, BufId::Input, block, BufId::Input, block, BufId::Output, 0,
                req.inPlace);
  finish(plan);
}

void buildDirectAllGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "allgather");
  allPeers(env, plan);
  const int n = env.nranks(), me = env.rank();
  const size_t count = req.desc.count;
  exchangeAddresses(plan, env, BufId::Input, 0, BufId::Output, 0);
  if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, size_t(me) * count, count);
  for (int k = 1; k < n; ++k) {  // start at the next rank: not everyone reads rank 0 first
    const int q = (me + k) % n;
    readFrom(plan, req, q, count, BufId::Input, 0, size_t(q) * count);
  }
  finish(plan);
}

namespace {

// AllToAll(v): each peer offers the block meant for us (address and count);
// we read it into place. In place, the input is first saved in scratch so
// that our writes cannot reach what a peer has yet to read. variable
// (AllToAllv): the address messages carry their block's count in the tag.
template <class SendAt, class RecvAt>
void directExchange(const CallRequest& req, PlanEnv& env, Plan& plan, SendAt sendAt, RecvAt recvAt, bool variable) {
  const int n = env.nranks(), me = env.rank();
  BufId from = BufId::Input;
  if (req.inPlace) {
    size_t total = 0;
    for (int p = 0; p < n; ++p) total = std::max(total, sendAt(p).first + sendAt(p).second);
    plan.scratchElems = total;
    add(plan, Prim::Copy, BufId::Input, 0, BufId::Scratch, 0, total);
    from = BufId::Scratch;
  }
  for (int p : plan.peers) {
    Step& s = add(plan, Prim::SendAddresses, from, sendAt(p).first, BufId::Output, 0, sendAt(p).second, p);
    if (variable) s.blockCount = sendAt(p).second;
  }
  // Our own block while the peers' addresses are on their way.
  add(plan, Prim::Copy, from, sendAt(me).first, BufId::Output, recvAt(me).first, sendAt(me).second);
  for (int p : plan.peers) {
    Step& s = add(plan, Prim::RecvAddresses, from, 0, BufId::Output, 0, recvAt(p).second, -1, p);
    if (variable) s.blockCount = recvAt(p).second;
  }
  for (int k = 1; k < n; ++k) {
    const int q = (me - k + n) % n;  // the pairwise schedule: no common first target
    readFrom(plan, req, q, recvAt(q).second, BufId::Input, 0, recvAt(q).first);
  }
  finish(plan);
}

}  // namespace

void buildDirectAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "alltoall");
  allPeers(env, plan);
  const size_t c = req.desc.count;
  auto at = [c](int p) { return std::make_pair(size_t(p) * c, c); };
  directExchange(req, env, plan, at, at, false);
}

void buildDirectAllToAllv(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  plan.rank = env.rank();
  requireDirect(env, "alltoallv");
  allPeers(env, plan);
  auto sendAt = [&](int p) { return std::make_pair(req.sendDispls[p], req.sendCounts[p]); };
  auto recvAt = [&](int p) { return std::make_pair(req.recvDispls[p], req.recvCounts[p]); };
  directExchange(req, env, plan, sendAt, recvAt, true);
}

void buildDirectBroadcast(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "broadcast");
  allPeers(env, plan);
  const int root = req.desc.root;
  const size_t count = req.desc.count;
  if (env.rank() == root) {
    for (int p : plan.peers) add(plan, Prim::SendAddresses, BufId::Input, 0, BufId::Output, 0, count, p);
    if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count);
    // Everyone has read us once every "done" is in.
    for (int p : plan.peers) add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, p);
    return;
  }
  // Non-roots talk to the root only.
  plan.peers.assign(1, root);
  add(plan, Prim::RecvAddresses, BufId::Input, 0, BufId::Output, 0, count, -1, root);
  readFrom(plan, req, root, count, BufId::Input, 0, 0);
  add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, root);
}

void buildDirectReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "reduce");
  allPeers(env, plan);
  const int n = env.nranks(), me = env.rank(), root = req.desc.root;
  const size_t count = req.desc.count, esz = req.elemSize;
  const size_t readPiece = std::max<size_t>(1, kReadPieceBytes / esz);
  auto slice = [&](int r) {
    return std::make_pair(sliceStart(count, n, r, esz), sliceStart(count, n, r + 1, esz));
  };
  // Where rank r keeps its reduced slice: the root in its output, in place;
  // the others in their scratch, past reduceFromAll's bounce buffer.
  auto keptAt = [&](int r) {
    const auto [lo, hi] = slice(r);
    return r == root ? lo : std::min(readPiece, hi - lo);
  };
  const BufId mine = me == root ? BufId::Output : BufId::Scratch;
  // The second address is where our slice will be (the root reads it).
  exchangeAddresses(plan, env, BufId::Input, 0, mine, 0);
  const auto [lo, hi] = slice(me);
  const bool inPlace = req.inPlace && me == root;
  reduceFromAll(plan, env, hi - lo, esz, BufId::Input, lo, BufId::Input, lo, mine, keptAt(me), inPlace);
  if (me != root) {
    plan.scratchElems = std::max(plan.scratchElems, keptAt(me) + (hi - lo));
    add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, root);  // our slice is final
  } else {
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, q);
      const auto [qlo, qhi] = slice(q);
      readFrom(plan, req, q, qhi - qlo, BufId::Output, keptAt(q), qlo);  // (its second address: its scratch)
    }
  }
  finish(plan);
}

void buildDirectGather(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "gather");
  allPeers(env, plan);
  const int root = req.desc.root, me = env.rank();
  const size_t count = req.desc.count;
  if (me != root) {
    // Our input, read by the root; we have no output (both addresses are
    // the input's). Done once the root says it has read us.
    plan.peers.assign(1, root);
    add(plan, Prim::SendAddresses, BufId::Input, 0, BufId::Input, 0, count, root);
    add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, root);
    return;
  }
  for (int p : plan.peers) add(plan, Prim::RecvAddresses, BufId::Input, 0, BufId::Output, 0, count, -1, p);
  if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, size_t(me) * count, count);
  for (int p : plan.peers) readFrom(plan, req, p, count, BufId::Input, 0, size_t(p) * count);
  for (int p : plan.peers) add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, p);
}

void buildDirectScatter(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("direct");
  requireDirect(env, "scatter");
  allPeers(env, plan);
  const int root = req.desc.root, me = env.rank();
  const size_t count = req.desc.count;
  if (me == root) {
    // Every peer reads its block of our input; both addresses are the
    // input's (our output is only our own block).
    for (int p : plan.peers) add(plan, Prim::SendAddresses, BufId::Input, 0, BufId::Input, 0, count, p);
    if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, size_t(me) * count, BufId::Output, 0, count);
    for (int p : plan.peers) add(plan, Prim::Recv, BufId::Output, 0, BufId::Output, 0, 0, -1, p);
    return;
  }
  plan.peers.assign(1, root);
  add(plan, Prim::RecvAddresses, BufId::Input, 0, BufId::Output, 0, count, -1, root);
  readFrom(plan, req, root, count, BufId::Input, size_t(me) * count, 0);
  add(plan, Prim::Send, BufId::Input, 0, BufId::Output, 0, 0, root);
}

}  // namespace gyre::collectives
