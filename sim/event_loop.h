// The simulator's clock: callbacks run in time order (ties in the order they
// were scheduled), each free to schedule more. Time is in seconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <bit>
#include <deque>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/huge_pages.h"

namespace gyre::sim {

using Time = double;

// A callable with no arguments, kept in place when its captures fit in
// kInline bytes (the simulator's do: a rank, a lane, a time or two; a larger
// one is kept on the heap). A 16,384-rank simulation runs some 200 million
// callbacks, and std::function allocates for any capture above 16 bytes.
class Callback {
 public:
  static constexpr size_t kInline = 48;

  Callback() = default;
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Callback>>>
  Callback(F&& f) {  // NOLINT: converts from any callable, as std::function does
    using T = std::decay_t<F>;
    if constexpr (fitsInline<T>()) {
      new (buf_) T(std::forward<F>(f));
      ops_ = &kInlineOps<T>;
    } else {
      *reinterpret_cast<T**>(buf_) = new T(std::forward<F>(f));
      ops_ = &kBoxedOps<T>;
    }
  }
  Callback(Callback&& o) noexcept { take(o); }
  Callback& operator=(Callback&& o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  Callback(const Callback&) = delete;
  Callback& operator=(const Callback&) = delete;
  ~Callback() { reset(); }

  void operator()() { ops_->call(buf_); }
  explicit operator bool() const { return ops_ != nullptr; }

 private:
  struct Ops {
    void (*call)(void*);
    void (*move)(void* from, void* to);  // and destroys `from`
    void (*destroy)(void*);
  };
  template <class T>
  static constexpr bool fitsInline() {
    return sizeof(T) <= kInline && alignof(T) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<T>;
  }
  template <class T>
  static constexpr Ops kInlineOps = {
      [](void* p) { (*static_cast<T*>(p))(); },
      [](void* from, void* to) {
        new (to) T(std::move(*static_cast<T*>(from)));
        static_cast<T*>(from)->~T();
      },
      [](void* p) { static_cast<T*>(p)->~T(); }};
  template <class T>
  static constexpr Ops kBoxedOps = {
      [](void* p) { (**static_cast<T**>(p))(); },
      [](void* from, void* to) { *static_cast<T**>(to) = *static_cast<T**>(from); },
      [](void* p) { delete *static_cast<T**>(p); }};

  void take(Callback& o) {
    ops_ = o.ops_;
    if (ops_) ops_->move(o.buf_, buf_);
    o.ops_ = nullptr;
  }
  void reset() {
    if (ops_) ops_->destroy(buf_);
    ops_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char buf_[kInline];
  const Ops* ops_ = nullptr;
};

class EventLoop {
 public:
  Time now() const { return now_; }
  // Runs f at time t (not before now). hint: memory f reads first (or
  // nullptr), fetched while the event before it runs; only fetched, never
  // read, so one that has moved since (a vector grown) costs nothing.
  void at(Time t, Callback f, const void* hint = nullptr) {
    if (t <= now_) {
      nowEvents_.push_back(std::move(f));
      return;
    }
    uint32_t slot;
    if (freeSlots_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(std::move(f));
    } else {
      slot = freeSlots_.back();
      freeSlots_.pop_back();
      slots_[slot] = std::move(f);
    }
    push(Event{t, seq_++, slot, hint});
  }
  void after(Time dt, Callback f, const void* hint = nullptr) { at(now_ + dt, std::move(f), hint); }
  // Until nothing is left to run; returns how many callbacks ran.
  uint64_t run() {
    uint64_t ran = 0;
    for (;;) {
      Callback f;
      if (!events_.empty() && (events_.front().t == now_ || nowEvents_.empty())) {
        const Event e = pop();
        now_ = e.t;
        f = std::move(slots_[e.slot]);
        freeSlots_.push_back(e.slot);
        // The next event's callback and hint are fetched while this one
        // runs: at 16,384 ranks neither the slots nor the ranks' state fit
        // in the caches, and each event began with a stall on them.
        if (!events_.empty()) {
          prefetch(&slots_[events_.front().slot]);
          prefetch(events_.front().hint);
        }
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
  static void prefetch(const void* p) {
#if defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
  }
  // The heap orders small entries; the callbacks stay in their slots (a
  // heap of the callbacks themselves moved 48 bytes more at every level).
  struct Event {
    Time t;
    uint64_t seq;
    uint32_t slot;
    const void* hint;
    // Later than o. (t, seq) compared as integers, without branches: the
    // heap's comparisons are as good as random to a branch predictor. A
    // time in the heap is above now, so positive, and a positive double's
    // bits order as it does.
    bool operator>(const Event& o) const {
      const uint64_t a = std::bit_cast<uint64_t>(t), b = std::bit_cast<uint64_t>(o.t);
      return (a > b) | ((a == b) & (seq > o.seq));
    }
  };
  // A heap, the earliest on top, of four children a node: half the levels
  // of a binary heap, each node's children side by side (16,384 ranks'
  // events make a heap larger than the caches). (t, seq) orders every
  // event apart, so the order they run in is the same for any heap.
  static constexpr size_t kArity = 4;
  void push(Event e) {
    size_t i = events_.size();
    events_.push_back(e);
    for (; i > 0; i = (i - 1) / kArity) {
      const Event& parent = events_[(i - 1) / kArity];
      if (!(parent > e)) break;
      events_[i] = parent;
    }
    events_[i] = e;
  }
  Event pop() {
    const Event top = events_.front();
    const Event last = events_.back();
    events_.pop_back();
    const size_t n = events_.size();
    if (n == 0) return top;
    size_t i = 0;
    for (;;) {  // the hole at i sinks to where `last` belongs
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t least = first;
      for (size_t c = first + 1; c < std::min(first + kArity, n); ++c)
        least = events_[least] > events_[c] ? c : least;
      if (!(last > events_[least])) break;
      events_[i] = events_[least];
      i = least;
    }
    events_[i] = last;
    return top;
  }
  HugeVector<Event> events_;
  HugeVector<Callback> slots_;
  std::vector<uint32_t> freeSlots_;  // the last freed reused first: it is in cache
  // What is scheduled for now while now runs, in order: after every event
  // the heap holds for now (scheduled before now came, so earlier), and
  // without the heap's cost (most events are a step's next look, now).
  std::deque<Callback> nowEvents_;
  Time now_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace gyre::sim
