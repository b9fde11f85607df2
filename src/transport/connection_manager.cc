#include "transport/connection_manager.h"

#include <algorithm>
#include <map>

#include "base/error.h"

namespace gyre::transport {

namespace {
constexpr int64_t kMixedSliceNs = 1'000'000;
}

ConnectionManager::ConnectionManager(int rank, int nranks)
    : rank_(rank), chosen_(static_cast<size_t>(nranks), nullptr), connections_(static_cast<size_t>(nranks), nullptr) {}

ConnectionManager::~ConnectionManager() = default;

void ConnectionManager::add(std::unique_ptr<Transport> transport, int priority, std::string disabledBy) {
  Registered r{std::move(transport), priority, std::move(disabledBy)};
  // Stable: of equal priorities the first registered wins.
  auto at = std::find_if(transports_.begin(), transports_.end(),
                         [&](const Registered& x) { return x.priority < priority; });
  transports_.insert(at, std::move(r));
}

void ConnectionManager::choose(FunctionRef<std::string(int)> describePeer) {
  reporters_.clear();
  for (const Registered& r : transports_)
    if (r.disabledBy.empty() && (r.transport->capabilities() & kReportsFailures))
      reporters_.push_back(r.transport.get());
  for (int peer = 0; peer < static_cast<int>(chosen_.size()); ++peer) {
    if (peer == rank_) continue;
    Transport* pick = nullptr;
    std::string why;
    for (const Registered& r : transports_) {
      std::string whyNot;
      if (!r.disabledBy.empty()) {
        whyNot = "disabled by " + r.disabledBy;
      } else if (r.transport->canConnect(peer, &whyNot)) {
        pick = r.transport.get();
        break;
      }
      why += std::string(why.empty() ? "" : "; ") + r.transport->name() + ": " + whyNot;
    }
    if (!pick)
      throwError(gyreInvalidArgument, "no transport reaches " + describePeer(peer) + " from rank " +
                                          std::to_string(rank_) + " (" + why + ")");
    chosen_[static_cast<size_t>(peer)] = pick;
    if (Connection* c = pick->connection(peer)) connections_[static_cast<size_t>(peer)] = c;
  }
  listNeedProgress();
}

void ConnectionManager::listNeedProgress() {
  // In peer order, as the connections themselves are kept.
  needProgress_.clear();
  for (Connection* c : connections_)
    if (c && c->can(kNeedsProgress)) needProgress_.push_back(c);
}

void ConnectionManager::connect(std::span<const int> peers, Deadline deadline) {
  bool made = false;
  for (const Registered& r : transports_) {
    std::vector<int> mine;
    for (int p : peers)
      if (p != rank_ && !connections_[static_cast<size_t>(p)] && chosen_[static_cast<size_t>(p)] == r.transport.get())
        mine.push_back(p);
    if (mine.empty()) continue;
    r.transport->connect(mine, deadline);
    for (int p : mine) {
      Connection* c = r.transport->connection(p);
      if (!c)
        throwError(gyreInternalError, std::string(r.transport->name()) + " made no connection to rank " +
                                          std::to_string(p));
      connections_[static_cast<size_t>(p)] = c;
    }
    made = true;
  }
  if (made) listNeedProgress();
}

bool ConnectionManager::everyPeerCan(Capability c) const {
  bool any = false;
  for (size_t p = 0; p < chosen_.size(); ++p) {
    if (static_cast<int>(p) == rank_) continue;
    if (!(chosen_[p]->capabilities() & c)) return false;
    any = true;
  }
  return any;
}

bool ConnectionManager::progress(ReadAhead whenBlocked) {
  bool blocked = false, moved = false;
  for (Connection* c : needProgress_) {
    const ProgressResult r = c->progress(ReadAhead::None);
    blocked |= r.sendBlocked;
    moved |= r.moved;
  }
  if (!blocked || whenBlocked == ReadAhead::None) return moved;
  for (Connection* c : needProgress_) moved |= c->progress(whenBlocked).moved;
  return moved;
}

bool ConnectionManager::block(Transport& primary, bool spansTransports, int64_t sliceNs,
                              FunctionRef<bool()> ready) {
  bool shortSlices = spansTransports;
  for (size_t i = 0; i < transports_.size() && !shortSlices; ++i) {
    Transport* t = transports_[i].transport.get();
    shortSlices = t != &primary && (t->capabilities() & kNeedsProgress) && t->hasPendingOutput();
  }
  if (shortSlices) sliceNs = std::min(sliceNs, kMixedSliceNs);
  return primary.block(sliceNs, ready);
}

void ConnectionManager::report(int origin, const std::string& sentence) {
  for (const Registered& r : transports_) r.transport->report(origin, sentence);
}

void ConnectionManager::shutdown() {
  for (const Registered& r : transports_) r.transport->shutdown();
}

void ConnectionManager::interrupt() {
  for (const Registered& r : transports_) r.transport->interrupt();
}

std::optional<PeerReport> ConnectionManager::peerReport() const {
  for (Transport* t : reporters_)
    if (auto r = t->peerReport()) return r;
  return std::nullopt;
}

std::string ConnectionManager::describeChoices() const {
  std::string s;
  for (const Registered& r : transports_) {
    const auto n = std::count(chosen_.begin(), chosen_.end(), r.transport.get());
    if (n == 0) continue;
    s += std::string(s.empty() ? "" : ", ") + r.transport->name() + " to " + std::to_string(n) +
         (n == 1 ? " peer" : " peers");
  }
  return s.empty() ? "no peers" : s;
}

}  // namespace gyre::transport
