// Links and the flows that share them. A flow is a message's bytes crossing
// a path of links at once (a fluid model: every link of the path carries the
// flow at the same rate); flows that share a link share its bandwidth
// max-min fairly (each gets an equal share of its tightest link, and what a
// flow limited elsewhere leaves is shared by the rest). Rates are recomputed
// whenever a flow starts or ends, so a flow's time is exact for piecewise
// constant sharing, not an average; only among the flows that share links
// with it, directly or through others (a ring's flows share none, so each
// start and end costs the same at 16 ranks or 16,384).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/event_loop.h"
#include "sim/huge_pages.h"

namespace gyre::sim {

struct Link {
  std::string name;
  double bytesPerSecond = 0;
  double latency = 0;   // seconds, paid once per message that crosses it
  double carried = 0;   // bytes that have crossed it so far
  double busy = 0;      // seconds it carried anything
};

class FlowNetwork {
 public:
  explicit FlowNetwork(EventLoop& loop) : loop_(loop) {}
  // A link; its index is what paths name. Throws Error (gyreInvalidArgument)
  // for a bandwidth that is not positive or a negative latency.
  int addLink(std::string name, double bytesPerSecond, double latency);
  // Starts `bytes` over `path` (link indices, at least one); done() runs once
  // the last byte has crossed (the path's latency is the caller's to add:
  // latencyOf). weights (one per link of the path, or empty: 1 each): how
  // many flows like this one cross that link, all at the rate this one gets
  // (the images of a representative's flow, sim/symmetry.h); they share
  // the link as that many flows would, and its counters count them all.
  void start(const std::vector<int>& path, double bytes, Callback done,
             const std::vector<double>& weights = {});
  double latencyOf(const std::vector<int>& path) const;
  const Link& link(int i) const { return state_[static_cast<size_t>(i)].link; }
  size_t links() const { return state_.size(); }
  size_t active() const { return live_; }
  uint64_t flowsStarted() const { return started_; }

 private:
  struct Flow {
    std::vector<int> path;
    std::vector<double> weight;  // per link of the path
    double bound = 0;            // the most it can get: its path's narrowest link alone
    double left = 0;   // bytes still to cross, as of `since`
    double rate = 0;   // bytes per second since `since`
    Time since = 0;
    uint64_t version = 0;  // a completion scheduled at an older rate is stale
    bool live = false;
    Callback done;
  };
  // Brings one flow's bytes (and its links' counters) to now.
  void settle(Flow& f);
  // Shares bandwidth anew among the flows that the links in `seeds` connect
  // to, transitively (flows elsewhere keep their rates: no link of theirs
  // changed hands), and schedules their completions.
  void reshareAround(const std::vector<int>& seeds);
  // The same once this instant's other events have run.
  void reshareLater(const std::vector<int>& links);
  void completion(size_t id, uint64_t version);
  void attach(size_t id);
  void detach(size_t id);

  EventLoop& loop_;
  // A link and what the network keeps of it, side by side: a flow's start,
  // end and resharing touch each link of its path, and the same in six
  // arrays was six cache and TLB misses a link at 16,384 ranks.
  struct LinkState {
    Link link;
    std::vector<size_t> on;  // live flows crossing it
    // Its flows' bounds (times their weights), summed: a link whose flows
    // could not fill it even at their bounds never limits them (slack), and
    // resharing neither stops at it nor spreads through it.
    double demand = 0;
    Time busySince = 0;
    uint64_t mark = 0;  // reshareAround's, kept between calls
    size_t slot = 0;    // the same
  };
  HugeVector<LinkState> state_;
  bool slack(size_t l) const { return state_[l].demand <= state_[l].link.bytesPerSecond; }
  HugeVector<Flow> flows_;
  std::vector<size_t> freeIds_;
  size_t live_ = 0;
  uint64_t started_ = 0;
  // Scratch for reshareAround, kept between calls.
  std::vector<uint64_t> flowMark_;
  uint64_t mark_ = 0;
  std::vector<double> room_, count_, newRate_;  // by component link; newRate_ by flow
  std::vector<std::pair<double, size_t>> heap_;
  std::vector<size_t> touched_, compLinks_, compFlows_;
  std::vector<int> pendingSeeds_;
  bool reshareQueued_ = false;
};

}  // namespace gyre::sim
