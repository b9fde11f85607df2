// The simulator's clock: callbacks run in time order (ties in the order they
// were scheduled), each free to schedule more. Time is in seconds.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace gyre::sim {

using Time = double;

class EventLoop {
 public:
  Time now() const { return now_; }
  // Runs f at time t (not before now).
  void at(Time t, std::function<void()> f) { events_.push(Event{t < now_ ? now_ : t, seq_++, std::move(f)}); }
  void after(Time dt, std::function<void()> f) { at(now_ + dt, std::move(f)); }
  // Until nothing is left to run; returns how many callbacks ran.
  uint64_t run() {
    uint64_t ran = 0;
    while (!events_.empty()) {
      Event e = events_.top();
      events_.pop();
      now_ = e.t;
      e.f();
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
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  Time now_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace gyre::sim
