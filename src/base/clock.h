// Monotonic time and deadlines. A deadline of "never" is the zero value.
#pragma once

#include <time.h>

#include <cstdint>
#include <limits>

namespace gyre {

inline int64_t clockNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t nowNs() { return clockNs(CLOCK_MONOTONIC); }

// The same clock to the kernel's last tick (1-4 ms), read without the time
// stamp counter: for rate limits of a millisecond or more polled in a hot
// loop, where a full read (~50 ns in a VM) is a cost of its own.
inline int64_t coarseNowNs() { return clockNs(CLOCK_MONOTONIC_COARSE); }

// A count for lengths of time that are only summed (statistics): the time
// stamp counter where there is one (~11 ns a read in a VM, a full clock
// read ~28), the clock's nanoseconds elsewhere. CycleRate turns it into
// nanoseconds.
inline uint64_t cycleCount() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();  // (the builtin: x86intrin.h is a heavy include for every file that has clocks)
#else
  return static_cast<uint64_t>(nowNs());
#endif
}

// Nanoseconds per cycleCount() unit, measured over the time since this was
// made (the longer ago, the closer).
class CycleRate {
 public:
  CycleRate() : ns_(nowNs()), cycles_(cycleCount()) {}
  double nsPerCycle() const {
    const int64_t ns = nowNs() - ns_;
    const uint64_t cycles = cycleCount() - cycles_;
    return ns > 0 && cycles > 0 && cycles < (uint64_t{1} << 63) ? static_cast<double>(ns) / static_cast<double>(cycles)
                                                               : 1.0;
  }

 private:
  int64_t ns_;
  uint64_t cycles_;
};

class Deadline {
 public:
  Deadline() = default;  // never expires
  // Saturates: a timeout too long to represent (GYRE_TIMEOUT_MS accepts up
  // to 292 years) is a deadline at the end of time, never an overflow into
  // the past.
  static Deadline afterMs(int64_t ms) {
    Deadline d;
    if (ms <= 0) return d;
    const int64_t now = nowNs();
    constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
    d.at_ = ms > (kEnd - now) / 1'000'000 ? kEnd : now + ms * 1'000'000;
    return d;
  }
  static Deadline never() { return Deadline(); }
  bool isNever() const { return at_ == 0; }
  bool expired() const { return at_ != 0 && nowNs() >= at_; }
  // Nanoseconds left (max int64 when never; 0 when expired).
  int64_t remainingNs() const {
    if (at_ == 0) return std::numeric_limits<int64_t>::max();
    int64_t left = at_ - nowNs();
    return left > 0 ? left : 0;
  }
  // A poll() timeout in ms, capped at capMs, rounded up so we never spin.
  int pollMs(int capMs) const {
    int64_t left = remainingNs();
    if (left == std::numeric_limits<int64_t>::max()) return capMs;
    int64_t ms = (left + 999'999) / 1'000'000;
    return static_cast<int>(ms < capMs ? ms : capMs);
  }

 private:
  int64_t at_ = 0;
};

}  // namespace gyre
