#include "collectives/executor.h"

namespace gyre::collectives {

namespace {

using transport::Connection;
using Waiting = ExecContext::Waiting;

class StepRunner {
 public:
  StepRunner(const CallArgs& args, ExecContext& ctx) : args_(args), ctx_(ctx) {}

  void run(const Step& s) {
    const size_t bytes = s.count * args_.elemSize;
    const void* src = pointer(s.src, s.srcOffset);
    void* dst = pointer(s.dst, s.dstOffset);
    const uint32_t divisor = s.finalReduce ? args_.divisor : 1;
    switch (s.prim) {
      case Prim::Copy:
        if (src != dst || divisor > 1) reduce(dst, nullptr, src, nullptr, s, divisor, true);
        break;
      case Prim::Send:
        sendFrom(ctx_.connection(s.sendPeer), src, bytes);
        break;
      case Prim::Recv:
        recvInto(ctx_.connection(s.recvPeer), dst, bytes);
        break;
      case Prim::RecvReduce: {
        Connection& in = ctx_.connection(s.recvPeer);
        reduce(dst, nullptr, recvBuffer(in, bytes), src, s, divisor, true);
        in.recvRelease(bytes);
        break;
      }
      case Prim::RecvReduceSend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        const void* data = recvBuffer(in, bytes);
        reduce(sendBuffer(out, bytes), nullptr, data, src, s, divisor, false);
        out.sendCommit(bytes);
        in.recvRelease(bytes);
        break;
      }
      case Prim::RecvReduceCopySend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        const void* data = recvBuffer(in, bytes);
        if (out.prefersDirect()) {  // reduce once into place, send from there
          // Cached stores: the socket reads dst right away.
          reduce(dst, nullptr, data, src, s, divisor, false);
          in.recvRelease(bytes);
          sendFrom(out, dst, bytes);
        } else {  // one pass writes both our result and the peer's slot
          reduce(dst, sendBuffer(out, bytes), data, src, s, divisor, true);
          out.sendCommit(bytes);
          in.recvRelease(bytes);
        }
        break;
      }
      case Prim::RecvCopySend: {
        Connection& in = ctx_.connection(s.recvPeer);
        Connection& out = ctx_.connection(s.sendPeer);
        if (in.prefersDirect()) {
          recvInto(in, dst, bytes);
          sendFrom(out, dst, bytes);
        } else if (out.prefersDirect()) {
          kernels::copy(dst, recvBuffer(in, bytes), bytes);  // cached: sent next
          in.recvRelease(bytes);
          sendFrom(out, dst, bytes);
        } else {
          const void* data = recvBuffer(in, bytes);
          kernels::copy2(dst, sendBuffer(out, bytes), data, bytes);
          out.sendCommit(bytes);
          in.recvRelease(bytes);
        }
        break;
      }
    }
  }

 private:
  void* pointer(BufId b, size_t offsetElems) const {
    auto* base = b == BufId::Input ? static_cast<char*>(const_cast<void*>(args_.input))
                                   : static_cast<char*>(args_.output);
    return base + offsetElems * args_.elemSize;
  }

  // received: the peer's data; local: ours. Operand order follows the step.
  // out0IsOutput: out0 is the user's output, which may be streamed.
  void reduce(void* out0, void* out1, const void* received, const void* local, const Step& s,
              uint32_t divisor, bool out0IsOutput) {
    kernels::ReduceTask t;
    t.dtype = args_.dtype;
    t.op = args_.op;
    if (!local) {
      t.a = received;
    } else if (s.recvFirst) {
      t.a = received;
      t.b = local;
    } else {
      t.a = local;
      t.b = received;
    }
    t.out0 = out0;
    t.out1 = out1;
    t.count = s.count;
    t.divisor = divisor;
    t.streamOut0 = out0IsOutput && args_.streamOutput;
    kernels::run(t);
  }

  // Each helper tries once before involving the waiting machinery: in steady
  // state the peer is usually ready.
  const void* recvBuffer(Connection& c, size_t bytes) {
    const void* p = c.tryRecvBuffer(bytes);
    if (!p)
      ctx_.waitUntil(c, Waiting::ForData, [&] { return (p = c.tryRecvBuffer(bytes)) != nullptr; });
    return p;
  }
  void* sendBuffer(Connection& c, size_t bytes) {
    void* p = c.trySendBuffer(bytes);
    if (!p)
      ctx_.waitUntil(c, Waiting::ForRoom, [&] { return (p = c.trySendBuffer(bytes)) != nullptr; });
    return p;
  }
  void sendFrom(Connection& c, const void* src, size_t bytes) {
    if (!c.trySendFrom(src, bytes))
      ctx_.waitUntil(c, Waiting::ForRoom, [&] { return c.trySendFrom(src, bytes); });
  }
  void recvInto(Connection& c, void* dst, size_t bytes) {
    if (!c.prefersDirect()) {  // copy out of the peer's buffer ourselves, streaming if large
      kernels::copy(dst, recvBuffer(c, bytes), bytes, args_.streamOutput);
      c.recvRelease(bytes);
      return;
    }
    if (!c.tryRecvInto(dst, bytes))
      ctx_.waitUntil(c, Waiting::ForData, [&] { return c.tryRecvInto(dst, bytes); });
  }

  const CallArgs& args_;
  ExecContext& ctx_;
};

}  // namespace

void execute(const Plan& plan, const CallArgs& args, ExecContext& ctx) {
  StepRunner runner(args, ctx);
  for (const Step& s : plan.steps) runner.run(s);
}

}  // namespace gyre::collectives
