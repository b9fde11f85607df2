// The mixture-of-experts exchanges (docs/moe.md): core packs the tokens'
// rows by the routing, has collectives plan the exchange
// (collectives/moe_exchange.h), runs it, and places what came. The
// routing's arithmetic is collectives/moe_route.h's; this file is the order
// of those steps and the communicator's policy (a failure while talking
// breaks the communicator; a buffer too small for what arrived does not).
#include <cstring>

#include "collectives/moe_exchange.h"
#include "collectives/moe_route.h"
#include "core/communicator.h"
#include "kernels/cpu/reduce.h"

namespace gyre::core {

using collectives::OpKind;

void Communicator::executeMoe(Operation& op) {
  ActiveScope active(activeCalls_);
  repeat_.valid = false;  // (it takes the scratch)
  checkUsable();
  collectives::MoeRoute& r = *op.moe;
  const bool counts = op.kind == OpKind::MoeCounts;
  const auto dt = counts ? kernels::DType::Uint64 : static_cast<kernels::DType>(op.dtype);
  collectives::CallRequest req;
  req.desc.kind = op.kind;
  req.desc.dtype = static_cast<uint8_t>(counts ? gyreUint64 : op.dtype);
  req.desc.count = op.count;
  // A dispatch that sends its counts ahead is a different exchange: ranks
  // that disagree on it are told so by name (call.cc), never misread.
  const bool ahead = op.kind == OpKind::MoeDispatch && !op.moeCountsKnown;
  req.desc.redop = ahead ? 1 : 0;
  req.elemSize = kernels::dtypeSize(dt);
  beginCollective(req, op.kind);
  collectives::CallArgs args;
  args.dtype = dt;
  args.elemSize = req.elemSize;
  const size_t rowBytes = op.moeHidden * req.elemSize;
  collectives::Plan plan;
  auto run = [&] {
    plan.tags.assign(1, collectives::makeTag(req.desc));
    args.scratch = plan.scratchElems ? scratch(plan.scratchElems * req.elemSize) : nullptr;
    collectives::execute(plan, args, *this);
    countSent(plan, req.elemSize);
  };
  if (!counts) moePacked_.resize(r.packedRows() * rowBytes);
  try {
    switch (op.kind) {
      case OpKind::MoeCounts:
        args.input = r.countsOut.data();
        args.output = r.countsIn.data();
        buildMoeCounts(r, *this, plan);
        run();
        collectives::settleReceived(r);
        break;
      case OpKind::MoeDispatch:
        collectives::packRows(r, op.sendbuff, op.moePerSlot, rowBytes, moePacked_.data());
        args.input = moePacked_.data();
        args.output = op.recvbuff;
        if (!ahead) {
          buildMoeRows(r, true, op.moeHidden, req, *this, plan);
          run();
          break;
        }
        {
          // Counts and rows together (moe_exchange.h); our own come from us.
          const size_t mine = 2 * r.localCount();
          std::copy(r.countsOut.begin() + static_cast<ptrdiff_t>(r.countsAt[rank_]),
                    r.countsOut.begin() + static_cast<ptrdiff_t>(r.countsAt[rank_ + 1]),
                    r.countsIn.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(rank_) * mine));
          collectives::MoePipelinedDispatch pipelined(r, op.moeHidden, op.moeRows, req, *this, plan, moeStaging_);
          args.extra = pipelined.extra();
          args.resolver = &pipelined;
          run();
          if (nranks_ == 1) collectives::settleReceived(r);  // (no lane resolved it)
          if (r.recvTotal <= op.moeRows) collectives::copyOwnRows(r, moePacked_.data(), rowBytes, op.recvbuff);
        }
        break;
      case OpKind::MoeCombine:
        args.input = op.sendbuff;
        args.output = moePacked_.data();
        buildMoeRows(r, false, op.moeHidden, req, *this, plan);
        run();
        collectives::combineRows(r, moePacked_.data(), op.moeWeights, dt, op.moeHidden, op.recvbuff);
        break;
      default:
        throwError(gyreInternalError, "not an MoE exchange");
    }
  } catch (const Error& e) {
    throw fail(e);
  }
  // Only this rank's buffer is short: every peer's part went through, the
  // routing now knows the counts, and the call may be made again.
  if (ahead && r.recvTotal > op.moeRows)
    throwError(gyreInvalidArgument,
               "recvbuff holds recvRows = " + std::to_string(op.moeRows) + " rows but " +
                   std::to_string(r.recvTotal) +
                   " arrived for this rank's experts; the routing now knows its counts (gyreMoeRecvCounts): "
                   "dispatch again into a buffer that large");
}

}  // namespace gyre::core
