#include "collectives/point_to_point.h"

#include <algorithm>
#include <map>

namespace gyre::collectives {

void buildPointToPoint(std::span<const P2PMessage> messages, PlanEnv& env, Plan& plan) {
  plan.reset("point_to_point");
  for (const P2PMessage& m : messages) plan.addPeer(m.peer);
  const size_t chunk = env.chunkBytes(plan.peers);
  // Lanes keyed by (peer, direction), in the order the messages were given,
  // so each connection carries the pair's messages in call order.
  std::map<std::pair<int, bool>, std::vector<const P2PMessage*>> lanes;
  for (const P2PMessage& m : messages) lanes[{m.peer, m.send}].push_back(&m);
  for (const auto& [key, list] : lanes) {
    plan.beginLane();
    for (const P2PMessage* m : list) {
      // Zero bytes still travel, as one empty message: the receiver checks
      // that the call it expects is the one that was made.
      size_t off = 0;
      do {
        const size_t len = std::min(chunk, m->bytes - off);
        Step s;
        s.prim = m->send ? Prim::Send : Prim::Recv;
        s.src = s.dst = extraBuffer(m->buffer);
        s.sendPeer = m->send ? m->peer : -1;
        s.recvPeer = m->send ? -1 : m->peer;
        s.srcOffset = s.dstOffset = off;
        s.count = len;
        s.tag = m->tag;
        plan.steps.push_back(s);
        off += len;
      } while (off < m->bytes);
    }
  }
  plan.closeLane();
}

}  // namespace gyre::collectives
