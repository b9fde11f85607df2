// Stall reports (stall_report.h): the asking, the answering and the report.
#include "core/stall_report.h"

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "core/communicator.h"

namespace gyre::core {

namespace {

constexpr int64_t kMs = 1'000'000;
constexpr uint32_t kWhereMagic = 0x47595354;  // "GYST"
constexpr uint32_t kAskFlag = 1, kForDataFlag = 2;

// A peer's bytes: fixed size, the name's length bounded, nothing trusted.
struct Wire {
  uint32_t magic;
  uint32_t flags;
  uint64_t collectives;
  uint64_t seq;
  int64_t waitedMs;
  int32_t waitingOn;
  uint32_t nameBytes;
  char name[32];
};

std::string rankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

std::string RankWhere::encode() const {
  Wire w{};
  w.magic = kWhereMagic;
  w.flags = (ask ? kAskFlag : 0) | (forData ? kForDataFlag : 0);
  w.collectives = collectives;
  w.seq = seq;
  w.waitedMs = waitedMs;
  w.waitingOn = waitingOn;
  w.nameBytes = static_cast<uint32_t>(std::min(call.size(), sizeof(w.name)));
  std::memcpy(w.name, call.data(), w.nameBytes);
  return std::string(reinterpret_cast<const char*>(&w), sizeof(w));
}

std::optional<RankWhere> RankWhere::decode(const std::string& bytes, int nranks) {
  Wire w;
  if (bytes.size() != sizeof(w)) return std::nullopt;
  std::memcpy(&w, bytes.data(), sizeof(w));
  if (w.magic != kWhereMagic || w.nameBytes > sizeof(w.name) || w.waitingOn < -1 || w.waitingOn >= nranks ||
      w.waitedMs < -1)
    return std::nullopt;
  RankWhere r;
  r.ask = w.flags & kAskFlag;
  r.forData = w.flags & kForDataFlag;
  r.collectives = w.collectives;
  r.seq = w.seq;
  r.waitedMs = w.waitedMs;
  r.waitingOn = w.waitingOn;
  r.call.assign(w.name, w.nameBytes);
  for (char& c : r.call)
    if (c < 0x20 || c > 0x7e) c = '?';  // it goes into a log line
  return r;
}

StallReportState::StallReportState(int nranks, int64_t threshold)
    : thresholdNs(threshold),
      // Waiting ranks answer within a health check (10 ms) of the question;
      // on a loaded host, later. Late answers serve the next report.
      windowNs(std::clamp<int64_t>(threshold / 2, 50 * kMs, 1000 * kMs)),
      lastPollNs(INT64_MIN / 2),
      known(static_cast<size_t>(nranks)) {}

int64_t defaultStallReportMs(int64_t timeoutMs) {
  constexpr int64_t kCapMs = 30'000;
  return timeoutMs > 0 ? std::min(timeoutMs / 10, kCapMs) : kCapMs;
}

RankWhere Communicator::whereAmI(bool ask, int64_t now) const {
  RankWhere w;
  w.ask = ask;
  w.collectives = collSeq_;
  w.seq = opSeq_;
  w.call = opName_;
  if (waitPeer_ >= 0) {
    w.waitedMs = (now - waitStartNs_) / kMs;
    w.waitingOn = waitPeer_;
    w.forData = waitForData_;
  }
  return w;
}

std::string Communicator::describeWhere(const RankWhere& w) const {
  std::string s = w.call + " #" + std::to_string(w.seq);
  if (w.waitedMs < 0) return s + ", starting it";
  const std::string on = w.waitingOn == rank_ ? "this rank" : "rank " + std::to_string(w.waitingOn);
  return s + ", waiting " + std::to_string(w.waitedMs) + " ms for " + (w.forData ? "data from " : "room at ") + on;
}

std::vector<int> Communicator::takeStallQuestions(int64_t now) {
  StallReportState& s = *stallReport_;
  std::vector<int> askers;
  for (bootstrap::Bootstrap::Status& st : bootstrap_->takeStatuses()) {
    std::optional<RankWhere> w = RankWhere::decode(st.message, nranks_);
    if (!w) {
      GYRE_INFO("rank %d: ignored a malformed status from rank %d", rank_, st.from);
      continue;
    }
    if (w->ask && std::find(askers.begin(), askers.end(), st.from) == askers.end()) askers.push_back(st.from);
    s.known[static_cast<size_t>(st.from)] = {true, std::move(*w), now};
  }
  return askers;
}

void Communicator::answerStall(const std::vector<int>& askers, int64_t now) {
  const RankWhere me = whereAmI(false, now);
  const std::string mine = me.encode();
  for (int r : askers) bootstrap_->sendStatus(r, mine);
  // This rank's own line, so that a stuck rank's log says who waits for it.
  std::string waits;
  for (int r : askers) {
    const RankWhere& w = stallReport_->known[static_cast<size_t>(r)].where;
    waits += (waits.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " in " + describeWhere(w);
  }
  GYRE_WARN("rank %d: stall: other ranks wait (%s) while this rank is in %s", rank_, waits.c_str(),
            describeWhere(me).c_str());
}

void Communicator::answerStallQuestions() {
  StallReportState& s = *stallReport_;
  s.lastPollNs = callStartNs_;
  const std::vector<int> askers = takeStallQuestions(callStartNs_);
  if (!askers.empty()) answerStall(askers, callStartNs_);
}

void Communicator::stallTick(std::span<const WaitItem> items, int64_t now) {
  StallReportState& s = *stallReport_;
  const std::vector<int> askers = takeStallQuestions(now);
  if (!askers.empty()) answerStall(askers, now);
  if (s.pending && s.askedInWaitNs != waitStartNs_) s.pending = false;  // that wait ended
  if (!s.pending && now - waitStartNs_ >= s.thresholdNs && now >= s.nextAskNs) {
    s.pending = true;
    s.askedAtNs = now;
    s.askedInWaitNs = waitStartNs_;
    s.nextAskNs = now + s.thresholdNs;
    const std::string ask = whereAmI(true, now).encode();
    for (int r = 0; r < nranks_; ++r)
      if (r != rank_) bootstrap_->sendStatus(r, ask);
    return;
  }
  if (!s.pending) return;
  bool all = true;
  for (int r = 0; r < nranks_; ++r)
    all &= r == rank_ || (s.known[static_cast<size_t>(r)].valid && s.known[static_cast<size_t>(r)].atNs >= s.askedAtNs);
  if (!all && now - s.askedAtNs < s.windowNs) return;
  s.pending = false;
  logStallReport(items, now);
}

void Communicator::logStallReport(std::span<const WaitItem> items, int64_t now) {
  StallReportState& s = *stallReport_;
  // What each rank told during this wait (answers, or its own question);
  // older news may describe another call.
  auto fresh = [&](int r) -> const RankWhere* {
    const StallReportState::Known& k = s.known[static_cast<size_t>(r)];
    return k.valid && k.atNs >= waitStartNs_ ? &k.where : nullptr;
  };
  const bool collective = std::strcmp(opName_, "send/recv") != 0;
  const std::string myCall = std::string(opName_) + " #" + std::to_string(opSeq_);
  // Who waits for whom, this rank included.
  std::vector<std::vector<int>> waitedBy(static_cast<size_t>(nranks_));
  waitedBy[static_cast<size_t>(waitPeer_)].push_back(rank_);
  for (int r = 0; r < nranks_; ++r)
    if (const RankWhere* w = r != rank_ ? fresh(r) : nullptr; w && w->waitingOn >= 0)
      waitedBy[static_cast<size_t>(w->waitingOn)].push_back(r);
  // A rank that does not answer is in no call of gyre's (every wait and
  // every call's start answers); those waiting for it have it behind them.
  auto silentState = [&](int r) {
    std::string t;
    if (bootstrap_->liveness().isStopped(r))
      t = "it is stopped (SIGSTOP or a debugger)";
    else if (bootstrap_->liveness().isDead(r))
      t = "it has exited";
    else
      t = "it is in no gyre call: busy in the application, or hung";
    const StallReportState::Known& k = s.known[static_cast<size_t>(r)];
    if (k.valid)
      t += "; last heard " + std::to_string((now - k.atNs) / kMs) + " ms ago in " + describeWhere(k.where);
    return t;
  };
  for (std::vector<int>& v : waitedBy) std::sort(v.begin(), v.end());
  auto notReached = [&](int r, bool who) {
    const std::vector<int>& by = waitedBy[static_cast<size_t>(r)];
    if (!collective || by.empty()) return std::string("did not answer");
    return "has not reached " + myCall + (who ? " (" + rankList(by) + (by.size() == 1 ? " waits" : " wait") + " for it)" : "");
  };
  std::string text = "rank " + std::to_string(rank_) + ": stall report: " + myCall + " has waited " +
                     std::to_string((now - waitStartNs_) / kMs) + " ms for " + describeWaits(items);
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    text += "; rank " + std::to_string(r) + ": ";
    const RankWhere* w = fresh(r);
    if (!w) {
      text += notReached(r, true) + ": no answer, " + silentState(r);
      continue;
    }
    if (collective && w->collectives < collSeq_) text += "has not reached " + myCall + ": ";
    if (collective && w->collectives > collSeq_) text += "is past " + myCall + ": ";
    text += "in " + describeWhere(*w);
  }
  // The chain of waits from the rank this one waits for to its end.
  std::vector<int> chain;
  int at = waitPeer_;
  for (;;) {
    const bool cycle = at == rank_ || std::find(chain.begin(), chain.end(), at) != chain.end();
    chain.push_back(at);
    if (cycle) {
      text += "; the ranks wait on each other in a cycle (" + std::to_string(rank_);
      for (int r : chain) text += " -> " + std::to_string(r);
      text += "): their calls likely differ";
      break;
    }
    const RankWhere* w = fresh(at);
    if (w && w->waitingOn >= 0) {
      at = w->waitingOn;
      continue;
    }
    text += "; the wait is stuck behind " + bootstrap_->describe(at) + ", which ";
    if (!w) {
      text += notReached(at, false) + " and did not answer: " + silentState(at);
    } else {
      text += "is in " + describeWhere(*w);
    }
    break;
  }
  GYRE_WARN("%s (GYRE_STALL_REPORT_MS=%lld; the call goes on waiting)", text.c_str(),
            static_cast<long long>(s.thresholdNs / kMs));
}

}  // namespace gyre::core
