// The Work a ProcessGroupGyre call returns: completed by the group's worker
// thread when gyre's call returns, with its future (what DDP and comm hooks
// chain on) completed at the same moment, holding the output tensors, or
// failed with gyre's error text.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <vector>

namespace gyre_torch {

class GyreWork : public c10d::Work {
 public:
  GyreWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  // From the worker thread, once: the call succeeded or failed. Waiters
  // wake, and the future's callbacks run (on this thread).
  void succeed();
  void fail(const std::exception_ptr& error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace gyre_torch
