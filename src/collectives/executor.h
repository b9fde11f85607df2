// Runs a plan: advances every lane as far as its connections allow, without
// blocking, and when no lane can move asks the context to wait until one
// can. Waiting is the context's: it owns the policy, timeouts and failure
// detection.
#pragma once

#include <span>

#include "base/function_ref.h"
#include "collectives/plan.h"
#include "transport/transport.h"

namespace gyre::collectives {

class ExecContext {
 public:
  enum class Waiting { ForData, ForRoom };
  struct WaitItem {
    transport::Connection* conn;
    Waiting what;
  };
  virtual transport::Connection& connection(int peer) = 0;
  // Returns once ready() returns true; throws on timeout, abort or a peer's
  // failure. items say what the stalled lanes wait for.
  virtual void waitUntil(std::span<const WaitItem> items, FunctionRef<bool()> ready) = 0;

 protected:
  ~ExecContext() = default;
};

void execute(const Plan& plan, const CallArgs& args, ExecContext& ctx);

}  // namespace gyre::collectives
