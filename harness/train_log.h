// The training log: one JSON object per line per step, so a run can be
// followed with `tail -f`, read by any JSON tool line by line, and plotted
// afterwards (harness/plot.h) or next to other runs (docs/harness.md, "The
// training log and plots").
//
//   {"run":"dp2","config":{"dp":"2","steps":"100"}}        optional, first line only
//   {"step":0,"loss":5.54,"lr":3e-04,"tokens_per_s":51234.5,"step_s":0.08,
//    "comm_s":0.01,"bubble_s":0,"grad_norm":1.25}           one line each step
//
// Doubles are written in their shortest form that reads back to the same
// bits (std::to_chars), independent of the locale; a diverged run's NaN and
// infinities are written NaN, Infinity and -Infinity, as Python's json
// module writes and reads them. Each line is flushed as it is written, so a
// crashed run leaves every step it finished.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gyre::harness {

// One optimizer step as the log records it (JSON names in the comments).
struct StepRecord {
  int64_t step = 0;            // step
  double loss = 0;             // loss: the global batch's mean loss
  double lr = 0;               // lr: the learning rate the step used
  double tokensPerSecond = 0;  // tokens_per_s: tokens trained per second
  double stepSeconds = 0;      // step_s: wall time of the whole step
  double commSeconds = 0;      // comm_s: time in communication
  double bubbleSeconds = 0;    // bubble_s: pipeline bubble, 0 when none
  double gradNorm = 0;         // grad_norm: the gradients' global norm
};

// Writes a log, truncating the file. Every failure throws std::runtime_error
// naming the file. Move-only: it owns the open file.
class TrainLog {
 public:
  // A log without the run line.
  explicit TrainLog(const std::string& path);
  // A log whose first line names the run and its configuration
  // (e.g. {"dp", "2"}); the values are written as JSON strings.
  TrainLog(const std::string& path, const std::string& runName,
           const std::map<std::string, std::string>& config = {});

  // The log of a resumed run: an existing `path` keeps its run line and the
  // steps before `firstStep` (those after it were trained again, so their
  // old lines go), rewritten under a temporary name and renamed, and new
  // steps are appended; a missing `path` starts a new log as the
  // constructor does. A file that is not a train log throws, naming it:
  // never overwritten on a guess.
  static TrainLog continued(const std::string& path, int64_t firstStep,
                            const std::string& runName,
                            const std::map<std::string, std::string>& config = {});

  // Appends the step's line and flushes it.
  void write(const StepRecord& record);

  const std::string& path() const { return path_; }

 private:
  TrainLog(const std::string& path, const char* mode);
  void writeRunLine(const std::string& runName, const std::map<std::string, std::string>& config);
  void writeLine(const std::string& line);

  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Close> file_;
};

// Reads a log back: its steps in file order, and the run line's name and
// configuration into `runName` and `config` when given (left empty when the
// file has no run line; a number in the configuration is kept as its text).
// The parser accepts exactly what TrainLog writes, in any spacing and key
// order: every step line must hold the eight fields once each and nothing
// else. A missing file, and a malformed, empty or unknown line, throw
// std::runtime_error naming the file and the line number.
std::vector<StepRecord> readTrainLog(const std::string& path, std::string* runName = nullptr,
                                     std::map<std::string, std::string>* config = nullptr);

}  // namespace gyre::harness
