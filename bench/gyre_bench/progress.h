// The progress line on long sweeps: which row, which iteration, time since
// the start, rewritten in place on standard error. Only when standard error
// is a terminal (a log file or pipe gets nothing) and only on rank 0; it is
// cleared before each table row so rows never share a line with it.
#pragma once

#include <string>

namespace gyre::bench {

class Progress {
 public:
  // on: whether to draw at all (rank 0 and isatty(2)).
  explicit Progress(bool on);
  // What is being measured now, e.g. "allreduce float sum 4096 B (3/10) out-of-place".
  void setStage(const std::string& stage);
  // Called every iteration; redraws at most ten times a second (and at the
  // first call) so drawing costs nothing measurable.
  void iteration(const char* phase, int i, int n);
  // Erases the line (before a table row or message is printed).
  void clear();

 private:
  bool on_;
  bool shown_ = false;
  double start_, last_ = -1;
  std::string stage_;
};

}  // namespace gyre::bench
