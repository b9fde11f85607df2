#include "sim/estimate.h"

#include <algorithm>
#include <string>

#include "sim/simulate.h"

namespace gyre::sim {

ClusterSpec clusterLike(const collectives::TuningParams& t, int ranks, bool peerReads) {
  ClusterSpec spec;
  int perHost = std::clamp(t.perHost, 1, std::max(ranks, 1));
  while (ranks % perHost != 0) --perHost;
  spec.ranksPerHost = perHost;
  spec.hosts = ranks / perHost;
  spec.hostsPerLeaf = std::max(spec.hosts, 1);  // one switch: the model knows no network beyond the link
  useCostModel(t.model, spec);
  spec.peerReads = peerReads;
  if (t.localFifoSlots > 0) {
    spec.fifoSlotBytes = static_cast<double>(t.localChunk);
    spec.fifoSlots = t.localFifoSlots;
  }
  return spec;
}

double estimateSeconds(const collectives::TuningParams& t, collectives::OpKind op, size_t count, size_t elemSize,
                       int ranks, bool peerReads, const char* algo) {
  collectives::CallRequest req;
  req.desc.kind = op;
  req.desc.count = count;
  const bool rooted = op == collectives::OpKind::Broadcast || op == collectives::OpKind::Reduce;
  req.desc.root = rooted ? 0 : -1;
  req.elemSize = elemSize;
  const std::string spec = std::string(collectives::opKindName(op)) + ":" + algo;
  return simulateCall(clusterLike(t, ranks, peerReads), req, spec, &t.model).run.seconds;
}

}  // namespace gyre::sim
