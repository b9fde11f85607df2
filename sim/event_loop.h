// The simulator's clock: callbacks run in time order (ties in the order they
// were scheduled), each free to schedule more. Time is in seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <algorithm>
#include <deque>
#include <vector>

namespace gyre::sim {

using Time = double;

class EventLoop {
 public:
  Time now() const { return now_; }
  // Runs f at time t (not before now).
  void at(Time t, std::function<void()> f) {
    if (t <= now_) {
      nowEvents_.push_back(std::move(f));
      return;
    }
    events_.push_back(Event{t, seq_++, std::move(f)});
    std::push_heap(events_.begin(), events_.end(), std::greater<Event>());
  }
  void after(Time dt, std::function<void()> f) { at(now_ + dt, std::move(f)); }
  // Until nothing is left to run; returns how many callbacks ran.
  uint64_t run() {
    uint64_t ran = 0;
    for (;;) {
      std::function<void()> f;
      if (!events_.empty() && (events_.front().t == now_ || nowEvents_.empty())) {
        // Moved out, not copied: a callback's captures are on the heap.
        std::pop_heap(events_.begin(), events_.end(), std::greater<Event>());
        now_ = events_.back().t;
        f = std::move(events_.back().f);
        events_.pop_back();
      } else if (!nowEvents_.empty()) {
        f = std::move(nowEvents_.front());
        nowEvents_.pop_front();
      } else {
        break;
      }
      f();
      ++ran;
    }
    return ran;
  }

 private:
  struct Event {
    Time t;
    uint64_t seq;
    std::function<void()> f;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::vector<Event> events_;  // a heap, the earliest on top
  // What is scheduled for now while now runs, in order: after every event
  // the heap holds for now (scheduled before now came, so earlier), and
  // without the heap's cost (most events are a step's next look, now).
  std::deque<std::function<void()>> nowEvents_;
  Time now_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace gyre::sim
