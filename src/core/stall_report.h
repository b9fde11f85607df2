// GYRE_STALL_REPORT_MS: a wait that lasts that long, well before the
// timeout, asks every other rank where it is (a status over the bootstrap's
// listeners) and logs, without failing, who has not reached which call.
// Ranks answer whenever they are inside gyre (in a wait, or starting a
// call): a rank that does not answer is outside every call (busy in the
// application, stopped or hung), and the ranks that wait for it say which
// call it has not reached (docs/reliability.md, "Stall reports").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gyre::core {

// Where a rank is, as it tells the others.
struct RankWhere {
  bool ask = false;          // the sender waits and asks everyone where they are
  uint64_t collectives = 0;  // collective calls the sender has begun
  uint64_t seq = 0;          // its call's number
  int64_t waitedMs = -1;     // its wait so far; -1: starting the call, not waiting
  int waitingOn = -1;        // the rank it waits for
  bool forData = true;       // for data from it (else for room at it)
  std::string call;          // its call's name ("allreduce", "send/recv")

  std::string encode() const;
  // Null when the bytes are not a RankWhere of a communicator of nranks.
  static std::optional<RankWhere> decode(const std::string& bytes, int nranks);
};

struct StallReportState {
  StallReportState(int nranks, int64_t thresholdNs);
  int64_t thresholdNs;
  int64_t windowNs;  // how long answers are collected before the report is logged
  int64_t lastPollNs;  // a call's start looked for questions (at most every kPollEveryNs)
  int64_t nextAskNs = 0;  // reports at most every threshold
  bool pending = false;   // asked; the report is logged when the answers are in
  int64_t askedAtNs = 0;
  int64_t askedInWaitNs = 0;  // the wait that asked (its start)
  struct Known {
    bool valid = false;
    RankWhere where;
    int64_t atNs = 0;  // when it arrived
  };
  std::vector<Known> known;  // by rank: the latest each told

  static constexpr int64_t kPollEveryNs = 10'000'000;
};

// GYRE_STALL_REPORT_MS's default: a tenth of the timeout, at most 30 s
// (30 s without a timeout).
int64_t defaultStallReportMs(int64_t timeoutMs);

}  // namespace gyre::core
