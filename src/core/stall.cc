// A wait that ran out, explained. With one rank stopped, every other rank
// soon waits, directly or through others, for it; each timing-out rank used
// to name only the rank it waited on itself (mostly a healthy one). Here
// every stalled rank reports the rank its own wait is stuck on, and each
// follows the reports from the rank it waits for to the end of the chain:
// the rank that reported no wait of its own stopped making progress (and a
// local one is checked for being stopped or gone), or a cycle says the
// ranks' calls differ.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/communicator.h"

namespace gyre::core {

namespace {

constexpr int64_t kMs = 1'000'000;

struct Chain {
  std::vector<int> path;  // from the rank waited for, each waiting on the next
  bool cycle = false;
};

// Follows "rank r waits on w" from `from` while reports say where to go.
Chain follow(int me, int from, const std::map<int, int>& waitsOn) {
  Chain c;
  int at = from;
  for (;;) {
    if (at == me || std::find(c.path.begin(), c.path.end(), at) != c.path.end()) {
      c.path.push_back(at);
      c.cycle = true;
      return c;
    }
    c.path.push_back(at);
    auto next = waitsOn.find(at);
    if (next == waitsOn.end()) return c;
    at = next->second;
  }
}

}  // namespace

PeerFailure Communicator::stalled(std::span<const WaitItem> items,
                                  const bootstrap::AbortNotice* report) {
  return stalledOn(items.front().conn->peer(), describeWaits(items), report);
}

PeerFailure Communicator::stalledOn(int waitedOn, const std::string& waitText,
                                    const bootstrap::AbortNotice* report) {
  const int64_t waitedMs = report ? (nowNs() - waitStartNs_) / kMs : config_.timeoutMs;
  std::string sentence = "rank " + std::to_string(rank_) + " made no progress for " +
                         std::to_string(waitedMs) + " ms waiting for " + waitText;
  sentence += report ? " when rank " + std::to_string(report->reporter) + "'s GYRE_TIMEOUT_MS (" +
                           std::to_string(config_.timeoutMs) + " ms) ran out"
                     : " (GYRE_TIMEOUT_MS)";
  // Every stalled rank's report carries the rank its wait is stuck on; the
  // others' timeouts run out at about the same moment, and each follows them.
  bootstrap_->notifyAbort(rank_, sentence, waitedOn);
  stallReported_ = true;
  return explainStall(rank_, waitedOn, sentence, gyreTimeout, true);
}

PeerFailure Communicator::stallSeenFromOutside(const bootstrap::AbortNotice& report) {
  // This rank was not waiting (it reached its next call late): it has no
  // link to add, but follows the others' reports all the same.
  return explainStall(report.reporter, report.waitingOn, report.message, gyreRemoteError, false);
}

PeerFailure Communicator::explainStall(int start, int waitedOn, const std::string& sentence,
                                       gyreResult_t code, bool startIsMe) {
  // A moment for the others' reports: up to a quarter of the timeout, at
  // least 50 ms, at most a second; less once the chain's end is certain.
  const int64_t grace = std::clamp<int64_t>(config_.timeoutMs / 4, 50, 1000) * kMs;
  const int64_t end = nowNs() + grace;
  // Everyone but the chain's end can report: this rank only if it waits.
  const int reporters = nranks_ - 1 - (startIsMe ? 0 : 1);
  std::map<int, int> waitsOn;  // reporter -> the rank its wait was stuck on
  waitsOn[start] = waitedOn;
  Chain chain;
  std::optional<PeerFailure> otherCause;
  auto absorb = [&] {
    for (const bootstrap::AbortNotice& n : bootstrap_->notices()) {
      // A failure of another kind (an exit, a mismatch) is the cause itself.
      if (n.waitingOn < 0) otherCause = reported(n);
      waitsOn[n.reporter] = n.waitingOn;
    }
    chain = follow(start, waitedOn, waitsOn);
  };
  // A rank that reported and then exited may show as gone before its report
  // shows here (loopback delivery can lag a process's exit under load): a
  // dead end is believed only once it has been dead a little while.
  constexpr int64_t kDeadSettleNs = 50 * kMs;
  int64_t deadSeenAt = 0;
  int deadSeen = -1;
  for (;;) {
    absorb();
    if (otherCause) return *otherCause;
    const int last = chain.path.back();
    bool deadSettled = false;
    if (bootstrap_->liveness().isDead(last)) {
      if (deadSeen != last) deadSeen = last, deadSeenAt = nowNs();
      deadSettled = nowNs() - deadSeenAt >= kDeadSettleNs;
    }
    const bool known = chain.cycle || bootstrap_->liveness().isStopped(last) || deadSettled ||
                       static_cast<int>(waitsOn.size()) >= reporters;
    if (known || nowNs() >= end) break;
    // Sleeping on the listeners' reports would need a wake-up; a few ms apart is plenty here.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  const int last = chain.path.back();
  std::string behind;
  if (chain.cycle) {
    behind = "; the ranks wait on each other in a cycle (" + std::to_string(start);
    for (int r : chain.path) behind += " -> " + std::to_string(r);
    behind += "): their calls likely differ";
  } else {
    const std::string who = bootstrap_->describe(last);
    const std::string state = bootstrap_->liveness().isStopped(last)
                                  ? ", and it is stopped (SIGSTOP or a debugger)"
                              : bootstrap_->liveness().isDead(last)
                                  ? ", and it has exited"
                                  : " (it is hung, busy outside gyre, or not making this call)";
    if (last == waitedOn) {
      behind = "; " + who + " stopped making progress: it reported no wait of its own" + state;
    } else {
      behind = "; the wait is stuck behind " + who + ", which stopped making progress (";
      for (size_t i = 0; i + 1 < chain.path.size(); ++i)
        behind += (i ? ", " : "") + std::string("rank ") + std::to_string(chain.path[i]) +
                  " waits for rank " + std::to_string(chain.path[i + 1]);
      behind += "; rank " + std::to_string(last) + " reported no wait of its own" + state + ")";
    }
  }
  return PeerFailure(code, chain.cycle ? start : last, sentence + behind);
}

}  // namespace gyre::core
