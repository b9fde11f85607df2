// Plans for the tuner's calibration at communicator creation: the same
// executor and transports as real calls, so what they measure is what calls
// will see. Each involves one pair of ranks (or one rank); `first` is the
// side that starts.
#pragma once

#include <cstddef>

#include "collectives/plan.h"

namespace gyre::collectives {

// `reps` round trips of one `bytes`-byte message (at most one link message).
void buildPingPong(Plan& plan, int peer, bool first, size_t bytes, int reps);
// After a round trip that lines them up, both sides send `bytes` to each
// other at once, in pieces of `chunk` (the traffic of a ring or pairwise
// exchange).
void buildExchange(Plan& plan, int peer, bool first, size_t bytes, size_t chunk);
// Both sides copy `bytes` straight out of the other's input at once (the
// single-copy algorithms' traffic), then wait for each other.
void buildPeerRead(Plan& plan, int peer, size_t bytes);
// Output = Output (+) Input over `count` elements, on this rank alone.
void buildLocalReduce(Plan& plan, size_t count);

}  // namespace gyre::collectives
