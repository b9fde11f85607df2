// Cross-process futex on a 32-bit word in shared memory (no PRIVATE flag:
// the word is mapped by several processes).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace gyre::transport {

inline void futexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeoutNs) {
  timespec ts{static_cast<time_t>(timeoutNs / 1'000'000'000),
              static_cast<long>(timeoutNs % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace gyre::transport
