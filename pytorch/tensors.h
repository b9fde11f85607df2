// What the backend checks and converts before a tensor reaches gyre's C ABI:
// torch's dtypes and reduce ops as gyre's, and the shape rules each
// collective has. Every refusal is a c10::Error (a RuntimeError in Python)
// that names the call, the argument and what would be accepted.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include "gyre/gyre.h"

namespace gyre_torch {

// gyre's type for a tensor's dtype; refuses bool, complex and the rest.
gyreDataType_t dataTypeOf(const at::Tensor& t, const char* call);

// A reduction for one call. PREMUL_SUM makes a gyre op for the call
// (gyreRedOpCreatePreMulSum), which release() destroys: the job that runs
// the call owns it.
class CallOp {
 public:
  CallOp(const c10d::ReduceOp& op, const at::Tensor& t, gyreDataType_t type, gyreComm_t comm, const char* call);
  CallOp(CallOp&& other) noexcept : op_(other.op_), comm_(other.comm_), made_(other.made_) { other.made_ = false; }
  CallOp(const CallOp&) = delete;
  CallOp& operator=(const CallOp&) = delete;
  ~CallOp() { release(); }
  gyreRedOp_t get() const { return op_; }
  void release();

 private:
  gyreRedOp_t op_ = gyreSum;
  gyreComm_t comm_ = nullptr;
  bool made_ = false;
};

// Exactly one tensor in a list (torch passes lists for its old one-tensor-
// per-GPU API); CPU tensors only until the device path exists.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* call);
void checkDevice(const at::Tensor& t, const char* call);
// Every tensor of a list has this dtype and element count.
void checkSameAs(const at::Tensor& like, const std::vector<at::Tensor>& list, const char* call, const char* what);
// A list of one tensor per rank of a group of `size`, each like `like`.
void checkOnePerRank(const at::Tensor& like, const std::vector<at::Tensor>& list, int size, const char* call,
                     const char* what);
// A rank argument within [0, size).
int checkRank(int64_t rank, int size, const char* call, const char* what);

// A contiguous tensor to hand to gyre in place of t, and whether results
// must be copied back into t afterwards (t was not contiguous).
struct Buffer {
  at::Tensor data;
  bool copyBack;
};
Buffer contiguousOf(const at::Tensor& t);

// A flat tensor holding a list's tensors one after another (copied in
// when `fill`), and the copy of its parts back into the list.
at::Tensor flatten(const std::vector<at::Tensor>& list, const at::Tensor& like, bool fill);
void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& list);

}  // namespace gyre_torch
