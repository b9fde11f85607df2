// What the network transports (ucx, verbs, net) share about being usable:
// each is created on every rank, and one that a single rank cannot start is
// used by none (a peer pair would otherwise disagree on how to talk). So
// every rank says why it cannot, in one exchange, and the first reason
// becomes every rank's answer to canConnect.
#pragma once

#include <string>

#include "base/clock.h"
#include "bootstrap/bootstrap.h"

namespace gyre::transport {

// Collective over the bootstrap: this rank's reason it cannot use the
// transport ("" when it can). Returns the first rank's reason, naming the
// rank ("rank 1 (pid ...): why"), or "" when every rank can.
std::string firstRankUnable(bootstrap::Bootstrap& bs, const std::string& why, Deadline deadline);

// canConnect for such a transport: unusable everywhere (`unusable`, as
// firstRankUnable returned it), or not a peer, or reachable.
bool reachable(const std::string& unusable, int rank, int nranks, int peer, std::string* whyNot);

}  // namespace gyre::transport
