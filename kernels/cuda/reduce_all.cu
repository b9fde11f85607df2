// reduceAll (launch.h): one pass that reads every rank's slice and writes
// the result to every rank's output, the direct AllReduce's whole arithmetic
// on the device (collectives/direct.cc, "direct_multi"): each input byte is
// read once and each output byte written once, the HBM-traffic bound
// (docs/PERFORMANCE-gpu.md). The shape is elementwise.cu's: a head one
// element per thread up to the 16-byte boundary every pointer shares, the
// body in 16-byte vectors (two inputs' loads in flight per thread), the
// tail; pointers whose offsets within 16 bytes differ go one element at a
// time. A file of its own so that nvcc builds it beside elementwise.cu.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/formats.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch.h"

namespace gyre::kernels::cuda {

namespace {

using grid::blocksFor;
using grid::kThreads;
using grid::loadOne;
using grid::kVecBytes;

// By value: the kernel's parameters (256 bytes).
struct Pointers {
  const void* in[kMaxReduceAll];
  void* out[kMaxReduceAll];
};

// acc op x, the divisor applied in the chain's last step only (as the
// CPU's chain of run()s does: one rounding per step).
template <class S, int kOp, bool kDivide>
__device__ __forceinline__ typename S::Elem stepOf(typename S::Elem acc, typename S::Elem x, bool last,
                                                   uint32_t divisor) {
  if (last) return arith::reduceOne<S, kOp, kDivide>(acc, x, divisor);
  return arith::reduceOne<S, kOp, false>(acc, x, divisor);
}

template <class S, int kOp, bool kDivide>
__global__ void __launch_bounds__(kThreads)
    reduceAllKernel(Pointers p, int nin, int nout, size_t n, size_t head, uint32_t divisor) {
  using T = typename S::Elem;
  constexpr size_t kLanes = kVecBytes / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t vecs = (n - head) / kLanes;
  auto vec = [&](int r, size_t i) { return *reinterpret_cast<const uint4*>(static_cast<const T*>(p.in[r]) + i); };
  for (size_t v = tid; v < vecs; v += stride) {
    const size_t i = head + v * kLanes;
    uint4 acc = vec(0, i);
    T* ea = reinterpret_cast<T*>(&acc);
    if (nin == 1) {
#pragma unroll
      for (size_t k = 0; k < kLanes; ++k) ea[k] = arith::reduceOne<S, arith::kCopy, kDivide>(ea[k], ea[k], divisor);
    } else {
      uint4 x = vec(1, i);
      for (int r = 1; r < nin; ++r) {
        uint4 next{};
        if (r + 1 < nin) next = vec(r + 1, i);  // the next load in flight while this one combines
        const T* ex = reinterpret_cast<const T*>(&x);
        const bool last = r == nin - 1;
#pragma unroll
        for (size_t k = 0; k < kLanes; ++k) ea[k] = stepOf<S, kOp, kDivide>(ea[k], ex[k], last, divisor);
        x = next;
      }
    }
    for (int j = 0; j < nout; ++j) *reinterpret_cast<uint4*>(static_cast<T*>(p.out[j]) + i) = acc;
  }
  const size_t tail = head + vecs * kLanes;
  const size_t rest = head + (n - tail);
  for (size_t j = tid; j < rest; j += stride) {
    const size_t i = j < head ? j : tail + (j - head);
    T acc = static_cast<const T*>(p.in[0])[i];
    if (nin == 1) acc = arith::reduceOne<S, arith::kCopy, kDivide>(acc, acc, divisor);
    for (int r = 1; r < nin; ++r)
      acc = stepOf<S, kOp, kDivide>(acc, static_cast<const T*>(p.in[r])[i], r == nin - 1, divisor);
    for (int o = 0; o < nout; ++o) static_cast<T*>(p.out[o])[i] = acc;
  }
}



template <class S, int kOp, bool kDivide>
int launch(const ReduceAllTask& t, cudaStream_t stream) {
  using T = typename S::Elem;
  Pointers p{};
  std::copy(t.in, t.in + t.nin, p.in);
  std::copy(t.out, t.out + t.nout, p.out);
  const void* all[2 * kMaxReduceAll];  // every pointer the kernel touches
  std::copy(t.in, t.in + t.nin, all);
  std::copy(t.out, t.out + t.nout, all + t.nin);
  const size_t head = grid::headOf<T>(t.count, all, static_cast<size_t>(t.nin + t.nout));
  const size_t work = std::max((t.count - head) / (kVecBytes / sizeof(T)), head + 1);
  reduceAllKernel<S, kOp, kDivide><<<blocksFor(work), kThreads, 0, stream>>>(p, t.nin, t.nout, t.count, head,
                                                                            t.divisor);
  return static_cast<int>(cudaGetLastError());
}


}  // namespace

int reduceAll(const ReduceAllTask& t, void* stream) {
  if (t.count == 0 || t.nout == 0) return 0;
  if (t.nin < 1 || t.nin > kMaxReduceAll || t.nout < 0 || t.nout > kMaxReduceAll)
    return static_cast<int>(cudaErrorInvalidValue);
  return arith::withFormat(t.dtype, [&](auto s) {
    using S = decltype(s);
    return arith::withOp(t.op, [&](auto tag) {
      constexpr int kOp = decltype(tag)::value;
      auto* st = static_cast<cudaStream_t>(stream);
      return t.divisor > 1 ? launch<S, kOp, true>(t, st) : launch<S, kOp, false>(t, st);
    });
  });
}

int loadReduceAllKernels() {
  int first = 0;
  for (DType d : {DType::Int8, DType::Uint8, DType::Int32, DType::Uint32, DType::Int64, DType::Uint64, DType::Float16,
                  DType::Float32, DType::Float64, DType::Bfloat16}) {
    arith::withFormat(d, [&](auto s) {
      using S = decltype(s);
      for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min})
        arith::withOp(op, [&](auto tag) {
          loadOne(reduceAllKernel<S, decltype(tag)::value, false>, first);
          loadOne(reduceAllKernel<S, decltype(tag)::value, true>, first);
          return 0;
        });
      return 0;
    });
  }
  return first;
}

}  // namespace gyre::kernels::cuda
