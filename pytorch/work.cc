#include "work.h"

#include <ATen/core/jit_type.h>

namespace gyre_torch {

GyreWork::GyreWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void GyreWork::succeed() {
  // Work first, so that a callback of the future that waits on this Work
  // (or asks whether it completed) sees it done.
  finish();
  future_->markCompleted(c10::IValue(outputs_));
}

void GyreWork::fail(const std::exception_ptr& error) {
  finish(error);
  future_->setError(error);
}

}  // namespace gyre_torch
