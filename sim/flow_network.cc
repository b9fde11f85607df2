#include "sim/flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace gyre::sim {

namespace {
// A flow is done when what is left is below this share of a byte: rates
// times times leave rounding dust, never whole bytes.
constexpr double kDust = 1e-6;
}  // namespace

int FlowNetwork::addLink(std::string name, double bytesPerSecond, double latency) {
  if (!(bytesPerSecond > 0) || !std::isfinite(bytesPerSecond))
    throwError(gyreInvalidArgument, "link " + name + ": bandwidth must be positive");
  if (!(latency >= 0) || !std::isfinite(latency))
    throwError(gyreInvalidArgument, "link " + name + ": latency must be zero or more");
  state_.emplace_back();
  state_.back().link = Link{std::move(name), bytesPerSecond, latency};
  return static_cast<int>(state_.size() - 1);
}

double FlowNetwork::latencyOf(const std::vector<int>& path) const {
  double t = 0;
  for (int l : path) t += state_[static_cast<size_t>(l)].link.latency;
  return t;
}

void FlowNetwork::start(const std::vector<int>& path, double bytes, Callback done,
                        const std::vector<double>& weights) {
  if (path.empty()) throwError(gyreInternalError, "simulator: a flow with no links");
  if (!weights.empty() && weights.size() != path.size())
    throwError(gyreInternalError, "simulator: a flow's weights do not match its path");
  for (int l : path)
    if (l < 0 || static_cast<size_t>(l) >= state_.size())
      throwError(gyreInternalError, "simulator: a flow over link " + std::to_string(l) + ", which does not exist");
  ++started_;
  if (bytes <= kDust) {  // nothing to carry: done now, in event order
    loop_.at(loop_.now(), std::move(done));
    return;
  }
  size_t id;
  if (freeIds_.empty()) {
    id = flows_.size();
    flows_.emplace_back();
    flowMark_.push_back(0);
    newRate_.push_back(0);
  } else {
    id = freeIds_.back();
    freeIds_.pop_back();
  }
  Flow& f = flows_[id];
  f.path = path;
  if (weights.empty()) f.weight.assign(path.size(), 1.0);
  else f.weight = weights;
  f.bound = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < path.size(); ++i)
    f.bound = std::min(f.bound, state_[static_cast<size_t>(path[i])].link.bytesPerSecond / f.weight[i]);
  f.left = bytes;
  f.rate = 0;
  f.since = loop_.now();
  f.live = true;
  f.done = std::move(done);
  ++live_;
  attach(id);
  reshareLater(path);
}

// Flows that start or end at one instant (a step's images, a pipeline's
// pieces) are reshared once, after the instant's other events: no time
// passes in between, so no byte moves at the rates skipped.
void FlowNetwork::reshareLater(const std::vector<int>& links) {
  pendingSeeds_.insert(pendingSeeds_.end(), links.begin(), links.end());
  if (reshareQueued_) return;
  reshareQueued_ = true;
  loop_.at(loop_.now(), [this] {
    reshareQueued_ = false;
    std::vector<int> seeds;
    seeds.swap(pendingSeeds_);
    reshareAround(seeds);
    seeds.clear();
    if (pendingSeeds_.empty()) pendingSeeds_.swap(seeds);  // keeps the capacity
  });
}

void FlowNetwork::attach(size_t id) {
  const Flow& f = flows_[id];
  for (size_t i = 0; i < f.path.size(); ++i) {
    const size_t l = static_cast<size_t>(f.path[i]);
    auto& on = state_[l].on;
    if (on.empty()) state_[l].busySince = loop_.now();
    on.push_back(id);
    state_[l].demand += f.bound * f.weight[i];
  }
}

void FlowNetwork::detach(size_t id) {
  for (int l : flows_[id].path) {
    auto& on = state_[static_cast<size_t>(l)].on;
    on.erase(std::find(on.begin(), on.end(), id));
    if (on.empty()) state_[static_cast<size_t>(l)].link.busy += loop_.now() - state_[static_cast<size_t>(l)].busySince;
    // Summed anew, not subtracted: no rounding left behind.
    double d = 0;
    for (size_t other : on) {
      const Flow& o = flows_[other];
      for (size_t i = 0; i < o.path.size(); ++i)
        if (o.path[i] == l) d += o.bound * o.weight[i];
    }
    state_[static_cast<size_t>(l)].demand = d;
  }
}

void FlowNetwork::settle(Flow& f) {
  const Time now = loop_.now();
  const double moved = std::min(f.left, f.rate * (now - f.since));
  f.left -= moved;
  f.since = now;
  for (size_t i = 0; i < f.path.size(); ++i) state_[static_cast<size_t>(f.path[i])].link.carried += moved * f.weight[i];
}

void FlowNetwork::reshareAround(const std::vector<int>& seeds) {
  // The component: links and flows reachable from the seeds through shared
  // links.
  ++mark_;
  std::vector<size_t>& links = compLinks_;
  std::vector<size_t>& flows = compFlows_;
  links.clear();
  flows.clear();
  // A seed's flows are reshared even when the seed is slack (it may just
  // have become so); beyond the seeds, only links that can limit spread it.
  for (int l : seeds)
    if (state_[static_cast<size_t>(l)].mark != mark_) {
      state_[static_cast<size_t>(l)].mark = mark_;
      links.push_back(static_cast<size_t>(l));
    }
  for (size_t i = 0; i < links.size(); ++i)
    for (size_t id : state_[links[i]].on) {
      if (flowMark_[id] == mark_) continue;
      flowMark_[id] = mark_;
      flows.push_back(id);
      for (int l : flows_[id].path)
        if (state_[static_cast<size_t>(l)].mark != mark_ && !slack(static_cast<size_t>(l))) {
          state_[static_cast<size_t>(l)].mark = mark_;
          links.push_back(static_cast<size_t>(l));
        }
    }
  if (flows.empty()) return;
  for (size_t id : flows) settle(flows_[id]);
  // Water-filling within it: the link with the smallest equal share fixes
  // its flows' rates at that share; their bandwidth leaves every link they
  // cross; repeat. (Every flow on its links that can limit is in the
  // component.) Slack links are left out; each flow's bound is a link of its
  // own instead, so that a flow no link limits gets its bound (what its
  // narrowest link alone gives it, as it would with the slack links in).
  // The links and bounds wait in a heap by share, ties to the first found;
  // an entry whose link changed since it was pushed is passed over.
  std::vector<double>& room = room_;
  std::vector<double>& count = count_;  // the weights of the flows not yet fixed
  room.assign(links.size(), 0);
  count.assign(links.size(), 0);
  constexpr size_t kNone = ~size_t{0};
  // A link's slot: its index in `links` (kNone: slack).
  auto slot = [this](size_t l) -> size_t& { return state_[l].slot; };
  for (size_t i = 0; i < links.size(); ++i) {
    slot(links[i]) = slack(links[i]) ? kNone : i;
    room[i] = state_[links[i]].link.bytesPerSecond;
  }
  for (size_t id : flows) {
    const Flow& f = flows_[id];
    newRate_[id] = -1;
    for (size_t i = 0; i < f.path.size(); ++i) {
      const size_t l = static_cast<size_t>(f.path[i]);
      if (state_[l].mark != mark_ || slot(l) == kNone) continue;  // slack
      count[slot(l)] += f.weight[i];
    }
  }
  using Entry = std::pair<double, size_t>;  // (room / count, slot; links.size() + k: flows[k]'s bound)
  std::vector<Entry>& heap = heap_;
  heap.clear();
  auto push = [&](size_t i) {
    if (count[i] > 0) {
      heap.emplace_back(room[i] / count[i], i);
      std::push_heap(heap.begin(), heap.end(), std::greater<Entry>());
    }
  };
  for (size_t i = 0; i < links.size(); ++i) push(i);
  for (size_t k = 0; k < flows.size(); ++k) heap.emplace_back(flows_[flows[k]].bound, links.size() + k);
  std::make_heap(heap.begin(), heap.end(), std::greater<Entry>());
  auto fix = [&](size_t id, double share) {
    const Flow& f = flows_[id];
    newRate_[id] = share;
    for (size_t i = 0; i < f.path.size(); ++i) {
      const size_t l = static_cast<size_t>(f.path[i]);
      if (state_[l].mark != mark_ || slot(l) == kNone) continue;
      const size_t at = slot(l);
      room[at] -= share * f.weight[i];
      // Weights are whole numbers: the sums are exact, and a link whose
      // flows are all fixed has exactly none left.
      count[at] -= f.weight[i];
      touched_.push_back(at);
    }
  };
  for (size_t left = flows.size(); left > 0 && !heap.empty();) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Entry>());
    const Entry top = heap.back();
    heap.pop_back();
    touched_.clear();
    if (top.second >= links.size()) {  // a flow's bound
      const size_t id = flows[top.second - links.size()];
      if (newRate_[id] >= 0) continue;
      fix(id, top.first);
      --left;
    } else {
      const size_t tight = top.second;
      if (!(count[tight] > 0) || room[tight] / count[tight] != top.first) continue;  // changed since
      const double share = std::max(0.0, top.first);
      for (size_t id : state_[links[tight]].on) {
        if (newRate_[id] >= 0) continue;
        fix(id, share);
        --left;
      }
    }
    for (size_t at : touched_)
      if (count[at] > 0) push(at);
  }
  for (size_t id : flows) {
    Flow& f = flows_[id];
    if (newRate_[id] == f.rate && f.version != 0) continue;  // its completion stands
    f.rate = newRate_[id];
    const uint64_t v = ++f.version;
    loop_.after(f.left / f.rate, [this, id, v] { completion(id, v); }, &f);
  }
}

void FlowNetwork::completion(size_t id, uint64_t version) {
  Flow& f = flows_[id];
  if (!f.live || f.version != version) return;  // ended, or its rate changed since
  settle(f);
  // Relative dust too: a flow of terabytes rounds in its last bytes.
  if (f.left > kDust && f.left > f.rate * 1e-15) {
    const uint64_t v = ++f.version;
    loop_.after(f.left / f.rate, [this, id, v] { completion(id, v); }, &f);
    return;
  }
  for (size_t i = 0; i < f.path.size(); ++i) state_[static_cast<size_t>(f.path[i])].link.carried += f.left * f.weight[i];
  f.left = 0;
  f.live = false;
  --live_;
  detach(id);
  Callback done = std::move(f.done);
  const std::vector<int> path = std::move(f.path);
  f.version = 0;
  freeIds_.push_back(id);
  reshareLater(path);
  done();
}

}  // namespace gyre::sim
