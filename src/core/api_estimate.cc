// gyreEstimate: the tuner's cost model as a public answer, for callers that
// plan around calls not made yet (a sequence-parallel planner sizing
// groups that do not exist yet, docs/sequence-parallel.md).
#include <string>

#include "base/error.h"
#include "core/api_support.h"
#include "gyre/gyre.h"

namespace {

using gyre::throwError;
using gyre::collectives::OpKind;

OpKind opOf(const gyreCall_t& call) {
  switch (gyre::api::enumBits(call)) {
    case gyreCallAllReduce:
      return OpKind::AllReduce;
    case gyreCallBroadcast:
      return OpKind::Broadcast;
    case gyreCallReduce:
      return OpKind::Reduce;
    case gyreCallAllGather:
      return OpKind::AllGather;
    case gyreCallReduceScatter:
      return OpKind::ReduceScatter;
    case gyreCallAllToAll:
      return OpKind::AllToAll;
    default:
      throwError(gyreInvalidArgument, "call " + std::to_string(gyre::api::enumBits(call)) +
                                          " is not a gyreCall_t (valid: 0 to " +
                                          std::to_string(gyreNumCalls - 1) + ")");
  }
}

}  // namespace

gyreResult_t gyreEstimate(gyreCall_t call, size_t count, gyreDataType_t datatype, int nranks,
                          gyreComm_t comm, double* microseconds) {
  return gyre::api::guarded("gyreEstimate", [&] {
    if (!microseconds) throwError(gyreInvalidArgument, "microseconds is NULL");
    const OpKind op = opOf(call);
    gyre::api::checkDataType(datatype);
    gyre::core::Communicator& c = gyre::api::impl(comm);
    if (nranks < 0 || nranks > GYRE_MAX_RANKS)
      throwError(gyreInvalidArgument, "nranks " + std::to_string(nranks) +
                                          " must be 0 (comm's own ranks) or 1 to GYRE_MAX_RANKS (" +
                                          std::to_string(GYRE_MAX_RANKS) + ")");
    const int group = nranks == 0 ? c.nranks() : nranks;
    const size_t bytes = gyre::api::bytesOf(count, 1, datatype, "count");
    *microseconds = group == 1 ? 0.0 : c.estimate(op, bytes, group).us;
  });
}
