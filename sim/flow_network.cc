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
  links_.push_back(Link{std::move(name), bytesPerSecond, latency});
  return static_cast<int>(links_.size() - 1);
}

double FlowNetwork::latencyOf(const std::vector<int>& path) const {
  double t = 0;
  for (int l : path) t += links_[static_cast<size_t>(l)].latency;
  return t;
}

void FlowNetwork::start(const std::vector<int>& path, double bytes, std::function<void()> done) {
  if (path.empty()) throwError(gyreInternalError, "simulator: a flow with no links");
  for (int l : path)
    if (l < 0 || static_cast<size_t>(l) >= links_.size())
      throwError(gyreInternalError, "simulator: a flow over link " + std::to_string(l) + ", which does not exist");
  ++started_;
  if (bytes <= kDust) {  // nothing to carry: done now, in event order
    loop_.at(loop_.now(), std::move(done));
    return;
  }
  advance();
  flows_.push_back(Flow{path, bytes, 0, std::move(done)});
  reshare();
}

void FlowNetwork::advance() {
  const Time now = loop_.now();
  const double dt = now - last_;
  last_ = now;
  if (dt <= 0) return;
  std::vector<char> used(links_.size(), 0);
  for (Flow& f : flows_) {
    const double moved = std::min(f.left, f.rate * dt);
    f.left -= moved;
    for (int l : f.path) {
      links_[static_cast<size_t>(l)].carried += moved;
      used[static_cast<size_t>(l)] = 1;
    }
  }
  for (size_t l = 0; l < links_.size(); ++l)
    if (used[l]) links_[l].busy += dt;
}

void FlowNetwork::reshare() {
  ++generation_;
  if (flows_.empty()) return;
  // Water-filling: the link with the smallest equal share fixes its flows'
  // rates at that share; their bandwidth leaves every link they cross; repeat.
  std::vector<double> room(links_.size());
  std::vector<int> count(links_.size(), 0);
  for (size_t l = 0; l < links_.size(); ++l) room[l] = links_[l].bytesPerSecond;
  std::vector<char> fixed(flows_.size(), 0);
  for (const Flow& f : flows_)
    for (int l : f.path) ++count[static_cast<size_t>(l)];
  for (size_t left = flows_.size(); left > 0;) {
    size_t tight = 0;
    double share = std::numeric_limits<double>::infinity();
    for (size_t l = 0; l < links_.size(); ++l)
      if (count[l] > 0 && room[l] / count[l] < share) {
        share = std::max(0.0, room[l] / count[l]);
        tight = l;
      }
    for (size_t i = 0; i < flows_.size(); ++i) {
      if (fixed[i]) continue;
      const Flow& f = flows_[i];
      if (std::find(f.path.begin(), f.path.end(), static_cast<int>(tight)) == f.path.end()) continue;
      fixed[i] = 1;
      --left;
      flows_[i].rate = share;
      for (int l : f.path) {
        room[static_cast<size_t>(l)] -= share;
        --count[static_cast<size_t>(l)];
      }
    }
  }
  Time soonest = std::numeric_limits<double>::infinity();
  for (const Flow& f : flows_) soonest = std::min(soonest, f.left / f.rate);
  const uint64_t gen = generation_;
  loop_.after(soonest, [this, gen] {
    if (gen != generation_) return;  // the sharing changed since: a newer event stands
    completeDue();
  });
}

void FlowNetwork::completeDue() {
  advance();
  std::vector<std::function<void()>> done;
  for (size_t i = 0; i < flows_.size();) {
    // Relative dust too: a flow of terabytes rounds in its last bytes.
    Flow& f = flows_[i];
    if (f.left <= kDust || f.left <= f.rate * 1e-15) {
      for (int l : f.path) links_[static_cast<size_t>(l)].carried += f.left;
      done.push_back(std::move(f.done));
      flows_[i] = std::move(flows_.back());
      flows_.pop_back();
    } else {
      ++i;
    }
  }
  reshare();
  for (auto& d : done) d();
}

}  // namespace gyre::sim
