// gyre's compressed AllReduce for torch tensors (docs/compression.md), what
// the DDP comm hooks (python/gyre/torch/hooks.py) are built on: queued on
// the group's worker thread like every other call, so they keep their
// place among the group's calls.
#pragma once

#include <ATen/ATen.h>

#include "gyre/gyre.h"
#include "process_group.h"

namespace gyre_torch {

// In place, with a codec and no state: each call encodes afresh.
c10::intrusive_ptr<c10d::Work> allreduceCodec(ProcessGroupGyre& pg, const at::Tensor& t, gyreCodec_t codec,
                                              bool average);

// One tensor's codec and error feedback (gyreCompressor_t): every call on
// it must pass a tensor of its count and dtype.
class Compressor {
 public:
  Compressor(c10::intrusive_ptr<ProcessGroupGyre> pg, gyreCodec_t codec, int64_t count, at::ScalarType dtype,
             bool errorFeedback);
  // Queued behind the calls that use it, so it outlives them.
  ~Compressor();
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;

  c10::intrusive_ptr<c10d::Work> allreduce(const at::Tensor& t, bool average);
  int64_t count() const { return count_; }
  at::ScalarType dtype() const { return dtype_; }

 private:
  c10::intrusive_ptr<ProcessGroupGyre> pg_;
  gyreCompressor_t handle_ = nullptr;
  int64_t count_;
  at::ScalarType dtype_;
};

}  // namespace gyre_torch
