// Links and the flows that share them. A flow is a message's bytes crossing
// a path of links at once (a fluid model: every link of the path carries the
// flow at the same rate); flows that share a link share its bandwidth
// max-min fairly (each gets an equal share of its tightest link, and what a
// flow limited elsewhere leaves is shared by the rest). Rates are recomputed
// whenever a flow starts or ends, so a flow's time is exact for piecewise
// constant sharing, not an average.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/event_loop.h"

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
  // latencyOf).
  void start(const std::vector<int>& path, double bytes, std::function<void()> done);
  double latencyOf(const std::vector<int>& path) const;
  const Link& link(int i) const { return links_[static_cast<size_t>(i)]; }
  size_t links() const { return links_.size(); }
  size_t active() const { return flows_.size(); }
  uint64_t flowsStarted() const { return started_; }

 private:
  struct Flow {
    std::vector<int> path;
    double left = 0;
    double rate = 0;
    std::function<void()> done;
  };
  void advance();       // every flow's bytes and every link's counters to now
  void reshare();       // max-min fair rates; schedules the next completion
  void completeDue();   // ends the flows with nothing left

  EventLoop& loop_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  Time last_ = 0;
  uint64_t generation_ = 0;  // a scheduled completion of an older sharing is stale
  uint64_t started_ = 0;
};

}  // namespace gyre::sim
