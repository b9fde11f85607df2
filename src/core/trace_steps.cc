#include "core/trace_steps.h"

namespace gyre::core {

void TraceSteps::stepDone(const collectives::Step& s, uint32_t index, size_t lane, int64_t startNs, int64_t endNs) {
  trace::Step t;
  t.name = collectives::primName(s.prim);
  t.index = index;
  t.lane = static_cast<uint32_t>(lane);
  t.from = s.recvPeer;
  t.to = s.sendPeer;
  // (An Await's count is a step's index, not elements; a codec step's
  // elements are its values, in a byte plan.)
  t.bytes = s.prim == collectives::Prim::Await ? 0 : s.count * elemSize_;
  t.startNs = startNs;
  t.endNs = endNs;
  steps_.push_back(t);
}

void TraceSteps::flush(int row) {
  trace::recordSteps(row, steps_);
  steps_.clear();
}

}  // namespace gyre::core
