#include "tensors.h"

#include <c10/util/Exception.h>

namespace gyre_torch {

gyreDataType_t dataTypeOf(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kChar: return gyreInt8;
    case at::kByte: return gyreUint8;
    case at::kInt: return gyreInt32;
    case at::kLong: return gyreInt64;
    case at::kHalf: return gyreFloat16;
    case at::kBFloat16: return gyreBfloat16;
    case at::kFloat: return gyreFloat32;
    case at::kDouble: return gyreFloat64;
    default: break;
  }
  TORCH_CHECK(false, "gyre ", call, ": tensors of dtype ", t.scalar_type(),
              " are not supported (float16, bfloat16, float32, float64, int8, uint8, int32 and int64 are)");
}

namespace {

// The premultiplier of a PREMUL_SUM, as the value gyre reads: the tensor's
// own type.
at::Tensor premultiplier(const c10d::ReduceOp& op, const at::Tensor& t, const char* call) {
  auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(s != nullptr, "gyre ", call, ": PREMUL_SUM without its factor");
  at::Tensor factor;
  if (!s->tensor_factors.empty()) {
    TORCH_CHECK(s->tensor_factors.size() == 1, "gyre ", call, ": PREMUL_SUM takes one factor, not ",
                s->tensor_factors.size());
    factor = s->tensor_factors[0].to(at::kCPU, t.scalar_type()).reshape({-1});
    TORCH_CHECK(factor.numel() == 1, "gyre ", call, ": PREMUL_SUM's factor must hold one value, not ",
                factor.numel());
  } else {
    factor = at::full({1}, s->double_factor, at::TensorOptions().dtype(t.scalar_type()));
  }
  return factor.contiguous();
}

}  // namespace

CallOp::CallOp(const c10d::ReduceOp& op, const at::Tensor& t, gyreDataType_t type, gyreComm_t comm,
               const char* call)
    : comm_(comm) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: op_ = gyreSum; return;
    case c10d::ReduceOp::AVG: op_ = gyreAvg; return;
    case c10d::ReduceOp::PRODUCT: op_ = gyreProd; return;
    case c10d::ReduceOp::MIN: op_ = gyreMin; return;
    case c10d::ReduceOp::MAX: op_ = gyreMax; return;
    case c10d::ReduceOp::PREMUL_SUM: {
      at::Tensor factor = premultiplier(op, t, call);
      const gyreResult_t r =
          gyreRedOpCreatePreMulSum(&op_, factor.data_ptr(), type, gyreScalarHostImmediate, comm);
      TORCH_CHECK(r == gyreSuccess, "gyre ", call, ": PREMUL_SUM: ", gyreGetErrorString(r), ": ",
                  gyreGetLastError(comm));
      made_ = true;
      return;
    }
    default: break;
  }
  TORCH_CHECK(false, "gyre ", call, ": reduce op ", static_cast<int>(op.op_),
              " (BAND, BOR, BXOR) is not supported: SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM are");
}

void CallOp::release() {
  if (made_) gyreRedOpDestroy(op_, comm_);
  made_ = false;
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "gyre ", call, ": takes one tensor per process, not ", tensors.size());
  checkDevice(tensors[0], call);
  return tensors[0];
}

void checkDevice(const at::Tensor& t, const char* call) {
  TORCH_CHECK(t.device().is_cpu(), "gyre ", call, ": tensors on ", t.device(),
              " are not supported by this build (CPU tensors are)");
  TORCH_CHECK(!t.is_sparse(), "gyre ", call, ": sparse tensors are not supported");
}

void checkSameAs(const at::Tensor& like, const std::vector<at::Tensor>& list, const char* call, const char* what) {
  for (size_t i = 0; i < list.size(); ++i) {
    checkDevice(list[i], call);
    TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "gyre ", call, ": ", what, "[", i, "] is ",
                list[i].scalar_type(), " where the input is ", like.scalar_type());
    TORCH_CHECK(list[i].numel() == like.numel(), "gyre ", call, ": ", what, "[", i, "] has ", list[i].numel(),
                " elements where the input has ", like.numel());
  }
}

void checkOnePerRank(const at::Tensor& like, const std::vector<at::Tensor>& list, int size, const char* call,
                     const char* what) {
  TORCH_CHECK(static_cast<int>(list.size()) == size, "gyre ", call, ": the ", what, " list has ", list.size(),
              " tensors for a group of ", size);
  checkSameAs(like, list, call, what);
}

int checkRank(int64_t rank, int size, const char* call, const char* what) {
  TORCH_CHECK(rank >= 0 && rank < size, "gyre ", call, ": ", what, " ", rank, " is not a rank of this group (0 to ",
              size - 1, ")");
  return static_cast<int>(rank);
}

Buffer contiguousOf(const at::Tensor& t) {
  if (t.is_contiguous()) return {t, false};
  return {t.contiguous(), true};
}

at::Tensor flatten(const std::vector<at::Tensor>& list, const at::Tensor& like, bool fill) {
  int64_t total = 0;
  for (const auto& t : list) total += t.numel();
  at::Tensor flat = at::empty({total}, like.options().memory_format(at::MemoryFormat::Contiguous));
  if (fill) {
    int64_t offset = 0;
    for (const auto& t : list) {
      flat.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
      offset += t.numel();
    }
  }
  return flat;
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (const auto& t : list) {
    const_cast<at::Tensor&>(t).copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace gyre_torch
