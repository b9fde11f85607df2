// The middle phase of a wait with more ranks than cores
// (Communicator::waitUntil): between busy polling and sleeping, the waiter
// hands its core to the rank beside it whenever it has nothing to do.
#pragma once

#include "base/function_ref.h"

namespace gyre::core {

// While goOn() (which also looks at the clock and at aborts): true once
// ready() is. Between looks at ready(), progress() looks at the transports,
// and the core is given away (yield()) only when that look, made just
// before, moved nothing. The look before the yield is what decides: a
// message still coming in over UCX's 8 KiB fragments, or being taken in by a
// receive's own look inside ready(), keeps the core; deciding on a look made
// before the previous ready() (and so before the receive's) gave the core
// away mid-message (4 ranks on 2 cores over UCX's shared memory, AllReduce
// of 32 KiB-256 KiB 0.85-0.86x the time in medians, single rounds to 0.73x;
// docs/PERFORMANCE-transports.md).
inline bool yieldUntilReady(FunctionRef<bool()> ready, FunctionRef<bool()> progress, FunctionRef<void()> yield,
                            FunctionRef<bool()> goOn) {
  while (goOn()) {
    if (ready()) return true;
    if (!progress()) yield();
  }
  return false;
}

}  // namespace gyre::core
