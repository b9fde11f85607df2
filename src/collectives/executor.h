// Runs a plan: for each step, obtains the peer's data and/or room for ours
// from the connections, and calls the kernels. Waiting is delegated to the
// context, which owns the waiting policy, timeouts and failure detection.
#pragma once

#include "collectives/plan.h"
#include "core/function_ref.h"
#include "transport/transport.h"

namespace gyre::collectives {

class ExecContext {
 public:
  enum class Waiting { ForData, ForRoom };
  virtual transport::Connection& connection(int peer) = 0;
  // Returns once ready() is true; throws on timeout, abort or peer failure.
  virtual void waitUntil(transport::Connection& conn, Waiting what, FunctionRef<bool()> ready) = 0;

 protected:
  ~ExecContext() = default;
};

void execute(const Plan& plan, const CallArgs& args, ExecContext& ctx);

}  // namespace gyre::collectives
