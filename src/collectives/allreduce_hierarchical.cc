// Hierarchical AllReduce: reduce within each host over shared memory (a
// pipelined chain ending at the host's first rank, its leader), AllReduce
// across hosts among the leaders only (the ring, over the network), then
// broadcast within each host (a chain from the leader). The network carries
// the vector 2(h-1)/h times per leader for h hosts, instead of 2(n-1)/n per
// rank with every rank's traffic crossing it: the win when hosts hold
// several ranks and the network is the slow link.
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/steps.h"

namespace gyre::collectives {

void buildHierarchicalAllReduce(const CallRequest& req, PlanEnv& env, Plan& plan) {
  plan.reset("hierarchical");
  const int n = env.nranks(), me = env.rank(), myHost = env.hostIndex(me);
  Group local, leaders;  // this host's ranks; each host's first rank
  // Hosts met so far (their indices are below n): a host's first rank in
  // one pass, not a scan of the ranks before each (n² host lookups, most
  // of planning 16,384 simulated ranks).
  std::vector<char> met(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const int h = env.hostIndex(r);
    if (h == myHost) {
      if (r == me) local.me = local.size();
      local.ranks.push_back(r);
    }
    const bool first = !met[static_cast<size_t>(h)];
    met[static_cast<size_t>(h)] = 1;
    if (first) {
      if (r == me) leaders.me = leaders.size();
      leaders.ranks.push_back(r);
    }
  }
  const int m = local.size(), pos = local.me;
  const bool leader = pos == 0, acrossHosts = leaders.size() > 1;
  const size_t count = req.desc.count;
  const int up = pos > 0 ? local.ranks[pos - 1] : -1, down = pos + 1 < m ? local.ranks[pos + 1] : -1;
  if (up >= 0) plan.addPeer(up);
  if (down >= 0) plan.addPeer(down);
  const size_t localChunk = plan.peers.empty() ? count : chainPieceElems(req, env.chunkBytes(plan.peers));

  // 1. Up the chain to the leader: the last rank starts, each adds its own.
  // With one host, the leader's sum is the final one (the average divides).
  if (m == 1) {
    if (!req.inPlace) add(plan, Prim::Copy, BufId::Input, 0, BufId::Output, 0, count);
  } else {
    forPieces(count, localChunk, [&](size_t off, size_t len) {
      Step& s = down < 0  ? add(plan, Prim::Send, BufId::Input, off, BufId::Output, off, len, up)
                : leader ? add(plan, Prim::RecvReduce, BufId::Input, off, BufId::Output, off, len, -1, down)
                         : add(plan, Prim::RecvReduceSend, BufId::Input, off, BufId::Output, off, len, up, down);
      s.recvFirst = true;
      s.finalReduce = leader && !acrossHosts;
    });
  }
  // 2. The leaders' ring, in place on their sums.
  if (leader && acrossHosts) {
    const int ringPeers[2] = {leaders.at(leaders.me + 1), leaders.at(leaders.me - 1)};
    const size_t chunk = std::max<size_t>(1, env.chunkBytes(ringPeers) / req.elemSize);
    appendRingAllReduce(plan, leaders, count, chunk, req.elemSize, BufId::Output, 0, BufId::Output, 0);
  }
  // 3. Down the chain from the leader.
  if (m > 1) {
    forPieces(count, localChunk, [&](size_t off, size_t len) {
      if (leader)
        add(plan, Prim::Send, BufId::Output, off, BufId::Output, off, len, down);
      else if (down >= 0)
        add(plan, Prim::RecvCopySend, BufId::Output, off, BufId::Output, off, len, down, up);
      else
        add(plan, Prim::Recv, BufId::Output, off, BufId::Output, off, len, -1, up);
    });
  }
}

}  // namespace gyre::collectives
