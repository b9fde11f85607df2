// GYRE_TUNER_ONLINE: the cost model proposes, the calls decide.
//
// Why: on a host whose speed changes mode (this project's 2-core machine
// flips between modes in which the FIFO algorithms run 2.7-3.6x slower
// while kernel reads do not), the best algorithm for a size changes with
// it, and no fixed model is right in both modes
// (docs/PERFORMANCE-collectives.md). Timing the candidates while the job
// runs follows the host.
//
// How: for each (operation, power-of-two size class, in place or not) the
// first calls try the model's best candidates in turn, kTrials times each.
// A trial is a batch of consecutive calls of one candidate, as many as fill
// about kTrialUs by the model's estimate (at most kMaxBatch); a batch of
// more than one call leaves its first untimed, which absorbs what switching
// algorithms costs once (another plan, cold lines) and a steady loop of
// calls does not pay.
// Then the ranks agree on each candidate's time, the slowest rank's median
// (the communicator runs that exchange: this class only keeps the books),
// and the fastest candidate is kept for the class, measured again after
// `retuneCalls` more of its calls. Every rank makes the same calls in the
// same order, so every rank is at the same point of the same schedule and
// runs the same algorithm; the agreed times make the final pick the same.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "collectives/tuner.h"

namespace gyre::collectives {

class OnlineTuner {
 public:
  static constexpr int kTrials = 5;         // per candidate: the median drops two preempted runs
  static constexpr int kMaxCandidates = 4;  // the model's best few
  // A trial's length, by the model: long enough that sub-microsecond calls
  // are told apart (a batch of 8 such calls measured candidates 25% apart
  // in either order, run to run; 3 trials of 200 us still left 4-20% wrong
  // picks in a sweep).
  static constexpr double kTrialUs = 500;
  static constexpr int kMaxBatch = 1024;
  // The model's pick stays unless another candidate is this much faster:
  // near-equal candidates would otherwise swap on noise.
  static constexpr double kMargin = 1.05;
  // Candidates: estimates within this factor of the model's best. The model
  // missed by up to 1.7x in the sweeps; 4x leaves room without trying
  // algorithms it knows are hopeless.
  static constexpr double kCandidateFactor = 4.0;

  // retuneBatches: a settled class is measured again after this many
  // batches of its calls (0: never).
  explicit OnlineTuner(uint64_t retuneBatches) : retuneBatches_(retuneBatches) {}

  struct Pick {
    const Algorithm* algo = nullptr;  // nullptr: not measured here, the model chooses
    uint64_t key = 0;
    int candidate = -1;  // >= 0: this call is part of a trial of that candidate
    bool timed = false;  // and its time counts
  };
  // The algorithm for this call.
  Pick pick(const CallRequest& req, PlanEnv& env);
  // A trial call's time on this rank; true when it ended the class's last
  // trial: then agree localMedians() across ranks (maximum) and settle()
  // with them.
  bool record(const Pick& p, double us);
  std::vector<double> localMedians(const Pick& p) const;
  // Keeps the fastest candidate, unless the model's pick is within kMargin
  // of it; returns a line for the log: every candidate's agreed time and
  // the pick.
  std::string settle(const Pick& p, std::span<const double> agreedUs);
  // The algorithm a class has settled on, or nullptr (for tests and logs).
  const Algorithm* settled(const CallRequest& req) const;

 private:
  struct SizeClass {
    std::vector<Candidate> candidates;         // the model's order
    uint64_t batch = 1;                        // calls per trial
    std::vector<std::vector<double>> samples;  // per candidate, this rank's trial times (us per call)
    uint64_t calls = 0;                        // made in the current measurement
    double batchUs = 0;                        // the timed calls of the trial under way
    const Algorithm* chosen = nullptr;         // null while measuring
    uint64_t callsSinceSettled = 0;
  };
  static uint64_t keyOf(const CallRequest& req);
  void startMeasuring(SizeClass& c);

  uint64_t retuneBatches_;
  std::unordered_map<uint64_t, SizeClass> classes_;
  // The last class used (a loop of calls stays in one): its entry without
  // a hash lookup, which costs a sizeable part of a sub-microsecond call.
  uint64_t lastKey_ = UINT64_MAX;
  SizeClass* last_ = nullptr;
};

}  // namespace gyre::collectives
