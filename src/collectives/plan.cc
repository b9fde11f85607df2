#include "collectives/plan.h"

namespace gyre::collectives {

const char* primName(Prim p) {
  switch (p) {
    case Prim::Copy: return "copy";
    case Prim::Reduce: return "reduce";
    case Prim::Send: return "send";
    case Prim::Recv: return "recv";
    case Prim::RecvReduce: return "recv-reduce";
    case Prim::RecvReduceSend: return "recv-reduce-send";
    case Prim::RecvReduceCopySend: return "recv-reduce-copy-send";
    case Prim::RecvCopySend: return "recv-copy-send";
    case Prim::CopySend: return "copy-send";
    case Prim::SendAddresses: return "send-addresses";
    case Prim::RecvAddresses: return "recv-addresses";
    case Prim::ReadCopy: return "read-copy";
    case Prim::ReadReduce: return "read-reduce";
    case Prim::ReduceFromAll: return "reduce-from-all";
    case Prim::Encode: return "encode";
    case Prim::Decode: return "decode";
    case Prim::RecvDecode: return "recv-decode";
    case Prim::Widen: return "widen";
    case Prim::Divide: return "divide";
    case Prim::Await: return "await";
    case Prim::Resolve: return "resolve";
  }
  return "step";
}

}  // namespace gyre::collectives
