#include "bench/gyre_bench/progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace gyre::bench {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
void put(const std::string& s) {
  // write(2), not stdio: stderr must not reorder with the rows on stdout.
  for (size_t at = 0; at < s.size();) {
    const ssize_t n = write(2, s.data() + at, s.size() - at);
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}
}  // namespace

Progress::Progress(bool on) : on_(on), start_(now()) {}

void Progress::setStage(const std::string& stage) { stage_ = stage; }

void Progress::iteration(const char* phase, int i, int n) {
  if (!on_) return;
  const double t = now();
  if (last_ >= 0 && t - last_ < 0.1) return;
  last_ = t;
  char tail[96];
  std::snprintf(tail, sizeof(tail), " %s %d/%d  elapsed %.1f s", phase, i, n, t - start_);
  put("\r\033[K[gyre-bench] " + stage_ + tail);
  shown_ = true;
}

void Progress::clear() {
  if (!on_ || !shown_) return;
  put("\r\033[K");
  shown_ = false;
}

}  // namespace gyre::bench
