// --stats: what every rank's communicator did over the run
// (gyreCommGetStats), and the bytes it sent by transport
// (gyreCommPeerTransport), printed by rank 0 under the table.
#pragma once

#include <string>

#include "gyre/gyre.h"

namespace gyre::bench {

// Collective over comm (an AllGather, made after the counts are taken, so
// it is not in them). Rank 0 gets the table; the others "".
std::string commStatsTable(gyreComm_t comm, int rank, int nranks);

}  // namespace gyre::bench
