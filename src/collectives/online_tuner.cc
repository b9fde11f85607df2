#include "collectives/online_tuner.h"

#include <algorithm>
#include <cstdio>

namespace gyre::collectives {

uint64_t OnlineTuner::keyOf(const CallRequest& req) {
  const uint64_t sizeClass = static_cast<uint64_t>(sizeClassOf(req.bytes()));
  return (static_cast<uint64_t>(req.desc.kind) * 128 + sizeClass) * 2 + (req.inPlace ? 1 : 0);
}

void OnlineTuner::startMeasuring(SizeClass& c) {
  c.chosen = nullptr;
  c.calls = 0;
  c.batchUs = 0;
  c.samples.assign(c.candidates.size(), {});
  c.callsSinceSettled = 0;
}

OnlineTuner::Pick OnlineTuner::pick(const CallRequest& req, PlanEnv& env) {
  // AllToAllv's size is this rank's own (ranks may send different totals):
  // not a key every rank shares. Its choice stays the model's, which for
  // that reason does not depend on the counts.
  if (env.nranks() < 2 || req.sendCounts) return {};
  const size_t small = env.tuning().smallMessageBytes;  // GYRE_SMALL_MSG_BYTES still forces
  if (req.desc.kind == OpKind::AllReduce && small && req.bytes() <= small) return {};
  const uint64_t key = keyOf(req);
  if (key != lastKey_) {  // map nodes stay where they are: the pointer stays valid
    last_ = &classes_[key];
    lastKey_ = key;
  }
  SizeClass& c = *last_;
  if (c.candidates.empty()) {
    const std::vector<Candidate> all = rankedCandidates(req, env);
    if (all.empty()) return {};
    for (const Candidate& x : all)
      if (c.candidates.size() < kMaxCandidates && x.us <= all.front().us * kCandidateFactor) c.candidates.push_back(x);
    c.batch = static_cast<uint64_t>(std::clamp(kTrialUs / std::max(c.candidates.front().us, 1e-3), 1.0, double(kMaxBatch)));
    if (c.candidates.size() == 1) {
      c.chosen = c.candidates.front().algo;
    } else {
      startMeasuring(c);
    }
  }
  if (c.chosen) {
    // Saturating: GYRE_TUNER_RETUNE accepts up to 2^63-1 trials, whose
    // product with a batch would wrap round to a small number of calls.
    uint64_t due = 0;
    if (__builtin_mul_overflow(retuneBatches_, uint64_t(c.batch), &due)) due = UINT64_MAX;
    if (c.candidates.size() > 1 && retuneBatches_ && ++c.callsSinceSettled > due) {
      startMeasuring(c);
    } else {
      return Pick{c.chosen, key, -1};
    }
  }
  const uint64_t trial = c.calls / c.batch, inBatch = c.calls % c.batch;
  const int candidate = static_cast<int>(trial % c.candidates.size());
  return Pick{c.candidates[static_cast<size_t>(candidate)].algo, key, candidate, c.batch == 1 || inBatch > 0};
}

bool OnlineTuner::record(const Pick& p, double us) {
  if (p.candidate < 0) return false;
  SizeClass& c = classes_.at(p.key);
  if (p.timed) c.batchUs += us;
  ++c.calls;
  if (c.calls % c.batch) return false;
  const uint64_t timedCalls = c.batch == 1 ? 1 : c.batch - 1;
  c.samples[static_cast<size_t>(p.candidate)].push_back(c.batchUs / double(timedCalls));
  c.batchUs = 0;
  return c.calls == c.candidates.size() * kTrials * c.batch;
}

std::vector<double> OnlineTuner::localMedians(const Pick& p) const {
  const SizeClass& c = classes_.at(p.key);
  std::vector<double> out;
  for (std::vector<double> s : c.samples) {
    std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
    out.push_back(s[s.size() / 2]);
  }
  return out;
}

std::string OnlineTuner::settle(const Pick& p, std::span<const double> agreedUs) {
  SizeClass& c = classes_.at(p.key);
  size_t best = 0;
  for (size_t i = 1; i < c.candidates.size() && i < agreedUs.size(); ++i)
    if (agreedUs[i] < agreedUs[best]) best = i;
  if (agreedUs[0] <= agreedUs[best] * kMargin) best = 0;
  c.chosen = c.candidates[best].algo;
  c.callsSinceSettled = 0;
  std::string line;
  for (size_t i = 0; i < c.candidates.size() && i < agreedUs.size(); ++i) {
    char item[96];
    std::snprintf(item, sizeof item, "%s%s %.3gus", line.empty() ? "" : ", ", c.candidates[i].algo->name, agreedUs[i]);
    line += item;
  }
  return std::string(c.chosen->name) + " (measured, slowest rank's median of " + std::to_string(kTrials) +
         ": " + line + "; the model's pick: " + c.candidates.front().algo->name + ")";
}

const Algorithm* OnlineTuner::settled(const CallRequest& req) const {
  const auto it = classes_.find(keyOf(req));
  return it == classes_.end() ? nullptr : it->second.chosen;
}

}  // namespace gyre::collectives
