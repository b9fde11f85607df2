#include "collectives/peer_average.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "base/hash.h"
#include "collectives/steps.h"

namespace gyre::collectives {

const char* peerSelectionName(PeerSelection s) {
  switch (s) {
    case PeerSelection::ShiftOne: return "shift_one";
    case PeerSelection::Ring: return "ring";
    case PeerSelection::Random: return "random";
  }
  return "unknown";
}

std::vector<int> averagingPeers(PeerSelection s, uint64_t step, int n, int rank) {
  if (n < 2) return {};
  std::vector<int> peers;
  switch (s) {
    case PeerSelection::ShiftOne: {
      if (n % 2) throwError(gyreInvalidArgument, "shift_one peer averaging pairs the lower half of the ranks with the upper half: it needs an even number of ranks, not " + std::to_string(n));
      const int half = n / 2, shift = static_cast<int>(step % static_cast<uint64_t>(half));
      peers.push_back(rank < half ? half + (rank + shift) % half : ((rank - half - shift) % half + half) % half);
      break;
    }
    case PeerSelection::Ring:
      peers = {(rank + n - 1) % n, (rank + 1) % n};
      break;
    case PeerSelection::Random: {
      // Fisher-Yates over the ranks, then neighbours in the shuffle pair up
      // (a fixed generator: every rank, and every build, draws the same).
      std::vector<int> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      uint64_t state = step ^ 0x6779726550656572ull;  // 'gyrePeer'
      for (int i = n - 1; i > 0; --i) std::swap(order[i], order[splitmix64(state) % static_cast<uint64_t>(i + 1)]);
      const int at = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
      const int partner = at ^ 1;
      if (partner < n) peers.push_back(order[partner]);
      break;
    }
    default:
      throwError(gyreInvalidArgument, "unknown peer selection " + std::to_string(static_cast<int>(s)));
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

void buildPeerAverage(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("peer_average");
  const int me = env.rank();
  const size_t count = req.desc.count;
  const std::vector<int> peers = averagingPeers(static_cast<PeerSelection>(req.desc.redop),
                                                static_cast<uint64_t>(req.desc.root), env.nranks(), me);
  plan.rank = me;
  plan.inputElems = plan.outputElems = count;
  if (peers.empty()) {  // nobody this step: the buffer as it is
    if (count) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count);
    return;
  }
  for (int q : peers) plan.addPeer(q);
  const size_t piece = std::max<size_t>(1, env.chunkBytes(peers) / req.elemSize);
  // Scratch: each peer's copy, in the order of `peers`.
  plan.scratchElems = peers.size() * count;
  for (size_t i = 0; i < peers.size(); ++i) {
    plan.beginLane();
    forPieces(count, piece, [&](size_t off, size_t len) { add(plan, Prim::Send, BufId::Input, off, BufId::Input, 0, len, peers[i]); });
    plan.beginLane();
    forPieces(count, piece, [&](size_t off, size_t len) {
      add(plan, Prim::Recv, BufId::Scratch, 0, BufId::Scratch, i * count + off, len, -1, peers[i]);
    });
  }
  plan.closeLane();
  // The epilogue, after every lane (so an in-place output overwrites the
  // input only once it has left): the sum in rank order, divided once.
  // Where the output is the input and ours is not the first term, our
  // input is saved beside the peers' copies before the first overwrites it.
  const size_t none = ~size_t{0};
  std::vector<std::pair<int, size_t>> terms;  // (rank, scratch offset; none: our input)
  for (size_t i = 0; i < peers.size(); ++i) terms.push_back({peers[i], i * count});
  terms.push_back({me, none});
  std::sort(terms.begin(), terms.end());
  if (req.inPlace && terms[0].first != me) {
    const size_t saved = peers.size() * count;
    plan.scratchElems += count;
    add(plan, Prim::Copy, BufId::Input, 0, BufId::Scratch, saved, count);
    for (auto& t : terms)
      if (t.first == me) t.second = saved;
  }
  auto bufOf = [&](size_t where) { return where == none ? BufId::Input : BufId::Scratch; };
  auto offOf = [&](size_t where) { return where == none ? size_t{0} : where; };
  add(plan, Prim::Copy, bufOf(terms[0].second), offOf(terms[0].second), BufId::Output, 0, count);  // (in place: a no-op)
  for (size_t t = 1; t < terms.size(); ++t) {
    Step& s = add(plan, Prim::Reduce, bufOf(terms[t].second), offOf(terms[t].second), BufId::Output, 0, count);
    s.finalReduce = t + 1 == terms.size();
  }
}

}  // namespace gyre::collectives
