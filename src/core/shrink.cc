// gyreCommShrink: a communicator of the survivors, without a new
// rendezvous and without the parent's transports (after a failure they are
// shut down, and a dead rank's are broken). The survivors talk over fresh,
// verified connections to each other's bootstrap listeners, which live as
// long as their communicators do: a dead rank's refuses at once.
//
// The agreement (docs/reliability.md, "Shrink"): every caller starts from
// its own view (the ranks it was asked to exclude, and none dead), and in
// rounds sends its view to every rank it holds alive and receives theirs,
// marking dead whoever refuses, drops a connection or stays silent past
// the deadline, and taking in the deaths the others saw. The round in which
// no view changed and every view received equals its own ends the rounds
// for everyone: in it every survivor sent the same view, so every survivor
// saw the same. The members then confirm that view to each other, with their
// child's listener; a rank that dies during the rounds or the confirmation
// makes the others' views or confirmations disagree, so every survivor
// fails with a named error instead of forming a communicator some do not
// share. Rounds only add deaths, so there are at most nranks of them.
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "base/log.h"
#include "bootstrap/unique_id.h"
#include "core/communicator.h"

namespace gyre::core {

namespace {

constexpr uint32_t kShrinkMagic = 0x4b524853;  // "SHRK"
enum : uint8_t { kMember = 0, kExcluded = 1, kDead = 2 };
enum : uint32_t { kRound = 0, kConfirm = 1 };

struct ShrinkHeader {
  uint32_t magic;
  uint32_t phase;  // kRound or kConfirm
  uint32_t round;
  int32_t nranks;
};

std::string listOf(const std::vector<uint8_t>& view, uint8_t what) {
  std::string out;
  for (size_t r = 0; r < view.size(); ++r)
    if (view[r] == what) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

// The connections of one shrink: to each peer this rank holds alive, one
// it made (its messages go there) and one the peer made (theirs come back).
struct Links {
  std::map<int, bootstrap::Socket> out, in;
};

}  // namespace

std::unique_ptr<Communicator> Communicator::shrink(std::span<const int> exclude, bool afterFailure,
                                                   const gyreConfig_t* userConfig) {
  // After a failure: whatever was in flight stops now (the peers hear of
  // it, and take it as what it is, a survivor's shrink).
  if (afterFailure) {
    revoke();
  } else {
    checkUsable();
  }
  ActiveScope active(activeCalls_);
  waitForTurn();
  Turn turn{*this};
  const Deadline deadline = Deadline::afterMs(config_.timeoutMs);
  const uint64_t shrinkNo = ++shrinks_;
  const uint32_t tag = static_cast<uint32_t>(shrinkNo);

  std::vector<uint8_t> view(static_cast<size_t>(nranks_), kMember);
  for (int r : exclude) view[r] = kExcluded;
  const std::vector<uint8_t> asked = view;
  auto gone = [&](int peer, const std::string& how) {
    if (!afterFailure)
      throwError(gyreRemoteError, bootstrap_->describe(peer) + " " + how +
                                      " during the shrink; a shrink after failures takes "
                                      "GYRE_SHRINK_ABORT");
    GYRE_INFO("rank %d: shrink %llu: %s %s", rank_, static_cast<unsigned long long>(shrinkNo),
              bootstrap_->describe(peer).c_str(), how.c_str());
    view[peer] = kDead;
  };

  // The connections, both ways to every rank held alive.
  Links links;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_ || view[p] != kMember) continue;
    std::optional<bootstrap::Socket> s =
        bootstrap_->connectToSurvivor(p, bootstrap::ConnKind::Shrink, tag, deadline);
    if (s) {
      links.out[p] = std::move(*s);
    } else {
      gone(p, "refuses connections (its process or communicator is gone)");
    }
  }
  for (;;) {
    bool waiting = false;
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_ || view[p] != kMember || links.in.count(p)) continue;
      if (auto s = bootstrap_->takeArrived(p, bootstrap::ConnKind::Shrink, tag)) {
        links.in[p] = std::move(*s);
      } else if (bootstrap_->knownDead(p)) {
        gone(p, "exited");
      } else {
        waiting = true;
      }
    }
    if (!waiting) break;
    if (deadline.expired()) {
      for (int p = 0; p < nranks_; ++p)
        if (p != rank_ && view[p] == kMember && !links.in.count(p))
          gone(p, "did not connect within GYRE_TIMEOUT_MS");
      break;
    }
    bootstrap_->waitForArrivals({}, deadline, 50);
  }

  const size_t viewBytes = view.size();
  // Sends `extra` after the header and view to every member; receives the
  // same from each into got. A peer whose connection fails is reported
  // through `failed` (it is not marked here).
  auto exchange = [&](uint32_t phase, uint32_t round, const void* extra, size_t extraBytes,
                      std::map<int, std::vector<uint8_t>>& got, std::vector<int>& failed) {
    const ShrinkHeader h{kShrinkMagic, phase, round, nranks_};
    std::vector<uint8_t> msg(sizeof h + viewBytes + extraBytes);
    std::memcpy(msg.data(), &h, sizeof h);
    std::memcpy(msg.data() + sizeof h, view.data(), viewBytes);
    if (extraBytes) std::memcpy(msg.data() + sizeof h + viewBytes, extra, extraBytes);
    std::vector<int> peers;
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && view[p] == kMember) peers.push_back(p);
    std::map<int, size_t> sent, received;
    for (int p : peers) {
      sent[p] = 0;
      received[p] = 0;
      got[p].assign(msg.size(), 0);
    }
    auto drop = [&](int p) {
      failed.push_back(p);
      sent.erase(p);
      received.erase(p);
      got.erase(p);
    };
    while (!sent.empty() || !received.empty()) {
      std::vector<pollfd> fds;
      for (auto it = sent.begin(); it != sent.end();) {
        const int p = it->first;
        try {
          it->second += links.out[p].sendSome(msg.data() + it->second, msg.size() - it->second,
                                              bootstrap_->describe(p));
        } catch (const Error&) {
          ++it;
          drop(p);
          continue;
        }
        if (it->second == msg.size()) {
          it = sent.erase(it);
        } else {
          fds.push_back({links.out[p].fd(), POLLOUT, 0});
          ++it;
        }
      }
      for (auto it = received.begin(); it != received.end();) {
        const int p = it->first;
        try {
          it->second += links.in[p].recvSome(got[p].data() + it->second,
                                             got[p].size() - it->second, bootstrap_->describe(p));
        } catch (const Error&) {
          ++it;
          drop(p);
          continue;
        }
        if (it->second == got[p].size()) {
          it = received.erase(it);
        } else {
          fds.push_back({links.in[p].fd(), POLLIN, 0});
          ++it;
        }
      }
      if (sent.empty() && received.empty()) break;
      if (deadline.expired()) {
        std::vector<int> late;
        for (auto& [p, n] : received) late.push_back(p);
        for (auto& [p, n] : sent)
          if (!received.count(p)) late.push_back(p);
        for (int p : late) drop(p);
        break;
      }
      bootstrap_->waitForArrivals(std::move(fds), deadline, 50);
    }
    // What arrived must be a shrink message of this phase and round.
    for (auto it = got.begin(); it != got.end();) {
      ShrinkHeader r{};
      std::memcpy(&r, it->second.data(), sizeof r);
      if (r.magic != kShrinkMagic || r.nranks != nranks_ || r.phase != phase || r.round != round) {
        throwError(gyreRemoteError,
                   bootstrap_->describe(it->first) + " was at another step of the shrink (" +
                       (r.phase == kConfirm ? "confirming" : "round " + std::to_string(r.round)) +
                       ") than this rank (" +
                       (phase == kConfirm ? "confirming" : "round " + std::to_string(round)) +
                       "): a rank failed while the survivors agreed, so they do not agree on who "
                       "survived; shrink again");
      }
      ++it;
    }
  };

  // The rounds.
  uint32_t round = 0;
  for (;; ++round) {
    if (round > static_cast<uint32_t>(nranks_) + 1)
      throwError(gyreInternalError, "the shrink's agreement did not settle");
    std::map<int, std::vector<uint8_t>> got;
    std::vector<int> failed;
    exchange(kRound, round, nullptr, 0, got, failed);
    bool settled = failed.empty();
    for (int p : failed) gone(p, "dropped out of the shrink");
    for (const auto& [p, msg] : got) {
      const uint8_t* theirs = msg.data() + sizeof(ShrinkHeader);
      if (round == 0) {
        for (int r = 0; r < nranks_; ++r) {
          if ((theirs[r] == kExcluded) != (asked[r] == kExcluded)) {
            std::vector<uint8_t> other(theirs, theirs + nranks_);
            throwError(gyreInvalidUsage,
                       "the survivors were asked to exclude different ranks: " +
                           bootstrap_->describe(p) + " excludes " + listOf(other, kExcluded) +
                           ", this rank excludes " + listOf(asked, kExcluded) +
                           " (every caller of a shrink passes the same list)");
          }
        }
      }
      for (int r = 0; r < nranks_; ++r) {
        if (theirs[r] == kDead && view[r] == kMember) {
          view[r] = kDead;
          settled = false;
        }
        if (theirs[r] != view[r]) settled = false;
      }
    }
    if (view[rank_] != kMember) {
      throwError(gyreRemoteError,
                 "the other survivors found rank " + std::to_string(rank_) +
                     " unresponsive and shrink without it");
    }
    if (settled) break;
  }

  // The members, in the parent's order, and this rank's place among them.
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (view[r] == kMember) members.push_back(r);
  const int childRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  // A secret only these members, agreeing on this view, can compute.
  std::unique_ptr<Communicator> child =
      prepareChild(childRank, static_cast<int>(members.size()), userConfig, deadline,
                   "/shrink/" + std::to_string(shrinkNo) + "/" + listOf(view, kMember));

  // The confirmation: the same view from every member, with its listener.
  std::map<int, std::vector<uint8_t>> got;
  std::vector<int> failed;
  const bootstrap::PeerInfo mine = child->bootstrap_->self();
  exchange(kConfirm, round, &mine, sizeof mine, got, failed);
  if (!failed.empty()) {
    throwError(gyreRemoteError, bootstrap_->describe(failed.front()) +
                                    " failed while the survivors confirmed the shrink; shrink again");
  }
  std::vector<bootstrap::PeerInfo> table(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const int p = members[i];
    if (p == rank_) {
      table[i] = mine;
      continue;
    }
    const std::vector<uint8_t>& msg = got.at(p);
    if (std::memcmp(msg.data() + sizeof(ShrinkHeader), view.data(), viewBytes) != 0) {
      std::vector<uint8_t> other(msg.data() + sizeof(ShrinkHeader),
                                 msg.data() + sizeof(ShrinkHeader) + viewBytes);
      throwError(gyreRemoteError, bootstrap_->describe(p) + " confirmed survivors " +
                                      listOf(other, kMember) + ", this rank " +
                                      listOf(view, kMember) +
                                      ": a rank failed while they agreed; shrink again");
    }
    std::memcpy(&table[i], msg.data() + sizeof(ShrinkHeader) + viewBytes, sizeof(bootstrap::PeerInfo));
  }
  links = Links{};  // the agreement's connections are done with
  connectChild(*child, std::move(table), deadline);
  log::setThreadRank(rank_);
  GYRE_INFO("rank %d: shrink %llu: rank %d of %d (excluded %s, dead %s)", rank_,
            static_cast<unsigned long long>(shrinkNo), childRank, child->nranks_,
            listOf(view, kExcluded).c_str(), listOf(view, kDead).c_str());
  return child;
}

}  // namespace gyre::core
