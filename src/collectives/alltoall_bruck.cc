// AllToAll, Bruck's algorithm: ceil(log2 n) rounds instead of the pairwise
// exchange's n-1.
//
// Why: for small blocks an AllToAll is all per-message latency; Bruck sends
// log2(n) messages per rank (each about half of all the data) instead of
// n-1, at the price of moving each block up to log2(n) times and some local
// copying. For large blocks pairwise wins; this is the small-message choice.
//
// Number the blocks of rank r by distance: block i (0 <= i < n) is the one
// for rank r + i. In the round for bit k (k = 1, 2, 4, ...) every rank sends
// the blocks whose index has bit k set to rank r + k, and receives the same
// indices from rank r - k. A block travels once for each bit of its index,
// so block i of rank s ends on rank s + i, at index i of that rank, which
// therefore holds the block from rank r - i there. The blocks of a round are
// packed into one message in scratch (received back over the packed copy,
// piece by piece once each piece has gone), then unpacked.
//
// Scratch: a block's place between its rounds (index i at i * count), then
// the packing area. A block is read from the input in the round of its
// lowest bit and, out of place, written straight to its output slot in the
// round of its highest bit. In place, the output overwrites input blocks
// that later rounds still read, so every block waits in scratch and goes to
// the output after the last round.
#include <algorithm>
#include <vector>

#include "collectives/more_algorithms.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildBruckAllToAll(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("bruck");
  const int n = env.nranks(), me = env.rank();
  const size_t c = req.desc.count;
  for (int k = 1; k < n; k <<= 1) {
    plan.addPeer((me + k) % n);
    plan.addPeer((me - k + n) % n);
  }
  if (!req.inPlace && c) add(plan, Prim::Copy, BufId::Input, size_t(me) * c, BufId::Output, size_t(me) * c, c);
  if (plan.peers.empty() || c == 0) return;
  const size_t chunk = std::max<size_t>(1, env.chunkBytes(plan.peers) / req.elemSize);

  auto lowestBit = [](int i) { return i & -i; };
  auto highestBit = [](int i) {
    int b = 1;
    while (b * 2 <= i) b *= 2;
    return b;
  };
  int maxBlocks = 0;
  for (int k = 1; k < n; k <<= 1) {
    int m = 0;
    for (int i = 1; i < n; ++i) m += (i & k) != 0;
    maxBlocks = std::max(maxBlocks, m);
  }
  const size_t pack = size_t(n) * c;  // the packing area's offset in scratch
  plan.scratchElems = pack + size_t(maxBlocks) * c;

  // Where block i is read from in round k, and written to.
  auto source = [&](int i, int k, BufId& buf, size_t& off) {
    if (lowestBit(i) == k) {
      buf = BufId::Input;
      off = size_t((me + i) % n) * c;
    } else {
      buf = BufId::Scratch;
      off = size_t(i) * c;
    }
  };
  auto target = [&](int i, int k, BufId& buf, size_t& off) {
    if (highestBit(i) == k && !req.inPlace) {
      buf = BufId::Output;
      off = size_t((me - i + n) % n) * c;
    } else {
      buf = BufId::Scratch;
      off = size_t(i) * c;
    }
  };

  std::vector<int> blocks;  // the indices sent in this round
  for (int k = 1; k < n; k <<= 1) {
    const int to = (me + k) % n, from = (me - k + n) % n;
    blocks.clear();
    for (int i = 1; i < n; ++i)
      if (i & k) blocks.push_back(i);
    const int nb = static_cast<int>(blocks.size());
    BufId sbuf, dbuf;
    size_t soff, doff;
    if (nb == 1) {  // one block: straight from its place to its place
      source(blocks[0], k, sbuf, soff);
      target(blocks[0], k, dbuf, doff);
    } else {
      for (int j = 0; j < nb; ++j) {
        source(blocks[j], k, sbuf, soff);
        add(plan, Prim::Copy, sbuf, soff, BufId::Scratch, pack + size_t(j) * c, c);
      }
      sbuf = dbuf = BufId::Scratch;
      soff = doff = pack;
    }
    const size_t total = size_t(nb) * c;
    exchangePieces(
        total, total, chunk,
        [&](size_t off, size_t len) { add(plan, Prim::Send, sbuf, soff + off, BufId::Output, 0, len, to); },
        [&](size_t off, size_t len) { add(plan, Prim::Recv, BufId::Output, 0, dbuf, doff + off, len, -1, from); });
    if (nb > 1) {
      for (int j = 0; j < nb; ++j) {
        target(blocks[j], k, dbuf, doff);
        add(plan, Prim::Copy, BufId::Scratch, pack + size_t(j) * c, dbuf, doff, c);
      }
    }
  }
  if (req.inPlace)
    for (int i = 1; i < n; ++i)
      add(plan, Prim::Copy, BufId::Scratch, size_t(i) * c, BufId::Output, size_t((me - i + n) % n) * c, c);
}

}  // namespace gyre::collectives
