// A call repeated: a training loop makes the same call, on the same
// buffers, step after step. The first of them is checked, captured,
// classified, requested and planned (communicator_ops.cc); what it ran on
// (the plan, the executor's arguments) is kept, and the same call made
// again with nothing in between runs on it at once. Only the call number
// changes. A small call spent a fifth of its instructions before its
// plan ran (docs/PERFORMANCE-transports.md, "A call repeated").
#include <algorithm>

#include "base/log.h"
#include "core/communicator.h"
#include "core/group.h"

namespace gyre::core {

void Communicator::rememberRepeat(const Operation& op, const collectives::CallArgs& args) {
  // Only what the plan and its arguments hold whole: a call that reads
  // more when it runs (a PreMulSum's scalar, a stream, device staging, a
  // codec's residuals, pieces arriving) or is observed (the trace, the
  // online tuner's trials, a log line per call) goes the whole way.
  if (op.stream || op.device || op.request || op.codec || op.premul || op.stageSend || op.stageRecv ||
      op.inputArrival || op.outputDeparture || args.engine || args.stepObserver || online_ ||
      traceRow_ || !planCache_.valid || log::enabled(log::Level::Trace))
    return;
  repeat_.key = op.key;
  repeat_.args = args;
  repeat_.name = opName_;
  repeat_.statBytes = std::max(op.sendBytes, op.recvBytes);
  repeat_.valid = true;
}

void Communicator::countPlannedSends(size_t elemSize) {
  for (const auto& [peer, elems] : planCache_.sends) StatCounters::add(stats_.sentToPeer[peer], elems * elemSize);
}

bool Communicator::repeat(const CallKey& key) {
  if (group::active()) return false;  // the group's end runs it
  ActiveScope active(activeCalls_);
  uint32_t nobody = 0;
  if (!turn_.compare_exchange_strong(nobody, kBusy)) return false;  // others first: queued behind them
  Turn turn{*this};
  if (!repeat_.valid || !(repeat_.key == key)) return false;
  checkUsable();
  // As execute() and executeCollective() make a call: its number, its
  // name, the peers' reports, the plan run, the statistics.
  const CallClock clock = startCall();
  try {
    opSeq_ = ++collSeq_;
    opName_ = repeat_.name;
    checkReports();
    plan_.tags[0].call = opSeq_;
    try {
      collectives::execute(plan_, repeat_.args, *this);
    } catch (const Error& e) {
      throw fail(e);
    }
  } catch (const Error&) {
    repeat_.valid = false;
    countCall(repeat_.statBytes, clock, true);
    throw;
  }
  countPlannedSends(repeat_.args.elemSize);
  countCall(repeat_.statBytes, clock, false);
  return true;
}

}  // namespace gyre::core
