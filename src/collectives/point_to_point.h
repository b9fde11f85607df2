// Plans for point-to-point messages: a batch of sends and receives (one
// call, or the run of them in a group) progressing together, one lane per
// peer and direction, so that no order of calls can deadlock.
#pragma once

#include <span>

#include "collectives/planner.h"

namespace gyre::collectives {

struct P2PMessage {
  bool send = false;
  int peer = -1;
  size_t bytes = 0;
  uint16_t tag = 0;     // index into the plan's tags
  uint16_t buffer = 0;  // index into CallArgs::extra
};

// Steps count bytes (CallArgs::elemSize = 1).
void buildPointToPoint(std::span<const P2PMessage> messages, PlanEnv& env, Plan& plan);

}  // namespace gyre::collectives
