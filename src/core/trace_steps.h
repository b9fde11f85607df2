// GYRE_TRACE_STEPS=1: the executor's steps of a call, gathered while it runs
// (a collectives::StepObserver) and written under the call in the trace
// (trace.h) once it is recorded.
#pragma once

#include <cstddef>
#include <vector>

#include "collectives/plan.h"
#include "core/trace.h"

namespace gyre::core {

class TraceSteps final : public collectives::StepObserver {
 public:
  // The next plan's element size (a step's bytes are its count times it).
  void beginPlan(size_t elemSize) { elemSize_ = elemSize; }
  void stepDone(const collectives::Step& s, uint32_t index, size_t lane, int64_t startNs, int64_t endNs) override;
  // Writes the steps gathered so far on `row` and forgets them.
  void flush(int row);

 private:
  size_t elemSize_ = 1;
  std::vector<trace::Step> steps_;
};

}  // namespace gyre::core
