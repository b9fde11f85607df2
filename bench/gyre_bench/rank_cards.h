// Who runs where: each rank's host and pid, exchanged once at the start, for
// the header's rank lines, the host count and the transports in use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace gyre::bench {

struct RankCard {  // 64 bytes, exchanged as bytes
  uint64_t hostKey;
  int64_t pid;
  char host[48];  // host name, cut to 47 characters
};

// Collective: every rank's card, indexed by rank.
gyreResult_t exchangeCards(gyreComm_t comm, int nranks, std::vector<RankCard>& all);

// What auto picks (shm between ranks of one host, tcp between hosts), or the
// requested transport: "shm", "tcp", "shm+tcp", or "none" for one rank.
std::string transportsInUse(const std::vector<RankCard>& cards, const std::string& requested);

}  // namespace gyre::bench
