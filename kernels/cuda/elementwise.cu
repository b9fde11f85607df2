// The CUDA kernels of launch.h. One grid-stride kernel shape serves them all:
// the elements before the first 16-byte boundary that every pointer shares
// (the head), then the body in 16-byte vectors, then the tail, one element
// per thread. Pointers that can never align together (their addresses
// differ modulo 16) go one element at a time throughout: correct at any
// alignment, and fast at the alignment allocators give.
//
// The arithmetic is kernels/common/arith.h's (the CPU kernels' own); the
// kernels here only move bytes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/common/formats.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch.h"

namespace gyre::kernels::cuda {

namespace {

using grid::blocksFor;
using grid::kThreads;
using grid::loadOne;
using grid::kVecBytes;

template <class T>
size_t headOf(size_t n, std::initializer_list<const void*> ptrs) {
  return grid::headOf<T>(n, ptrs.begin(), ptrs.size());
}

// a op b (or a alone) into out0 and, when set, out1.
template <class S, int kOp, bool kDivide>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(const typename S::Elem* a, const typename S::Elem* b, typename S::Elem* out0,
                 typename S::Elem* out1, size_t n, size_t head, uint32_t divisor) {
  using T = typename S::Elem;
  constexpr size_t kLanes = kVecBytes / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t vecs = (n - head) / kLanes;
  for (size_t v = tid; v < vecs; v += stride) {
    const size_t i = head + v * kLanes;
    uint4 ra = *reinterpret_cast<const uint4*>(a + i);
    uint4 rb{};
    if constexpr (kOp != arith::kCopy) rb = *reinterpret_cast<const uint4*>(b + i);
    T* ea = reinterpret_cast<T*>(&ra);
    const T* eb = reinterpret_cast<const T*>(&rb);
#pragma unroll
    for (size_t k = 0; k < kLanes; ++k) ea[k] = arith::reduceOne<S, kOp, kDivide>(ea[k], eb[k], divisor);
    *reinterpret_cast<uint4*>(out0 + i) = ra;
    if (out1 != nullptr) *reinterpret_cast<uint4*>(out1 + i) = ra;
  }
  // The head and the tail, one element per thread.
  const size_t tail = head + vecs * kLanes;
  const size_t rest = head + (n - tail);
  for (size_t j = tid; j < rest; j += stride) {
    const size_t i = j < head ? j : tail + (j - head);
    T y{};
    if constexpr (kOp != arith::kCopy) y = b[i];
    const T r = arith::reduceOne<S, kOp, kDivide>(a[i], y, divisor);
    out0[i] = r;
    if (out1 != nullptr) out1[i] = r;
  }
}

template <class S>
__global__ void __launch_bounds__(kThreads)
    scaleKernel(typename S::Elem* out, const typename S::Elem* in, size_t n, size_t head, typename S::Elem s) {
  using T = typename S::Elem;
  constexpr size_t kLanes = kVecBytes / sizeof(T);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t vecs = (n - head) / kLanes;
  for (size_t v = tid; v < vecs; v += stride) {
    const size_t i = head + v * kLanes;
    uint4 r = *reinterpret_cast<const uint4*>(in + i);
    T* e = reinterpret_cast<T*>(&r);
#pragma unroll
    for (size_t k = 0; k < kLanes; ++k) e[k] = arith::scaleOne<S>(e[k], s);
    *reinterpret_cast<uint4*>(out + i) = r;
  }
  const size_t tail = head + vecs * kLanes;
  const size_t rest = head + (n - tail);
  for (size_t j = tid; j < rest; j += stride) {
    const size_t i = j < head ? j : tail + (j - head);
    out[i] = arith::scaleOne<S>(in[i], s);
  }
}

// Between formats: widen from From, round to To. Memory-bound and off the
// hot path (wire formats and the compression issue's codecs use it), so one
// element per thread and step.
template <class From, class To>
__global__ void __launch_bounds__(kThreads)
    castKernel(typename To::Elem* out, const typename From::Elem* in, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = To::store(static_cast<typename To::C>(From::load(in[i])));
}

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

template <class S, int kOp, bool kDivide>
int launchReduce(const ReduceTask& t, cudaStream_t stream) {
  using T = typename S::Elem;
  const auto* a = static_cast<const T*>(t.a);
  const auto* b = static_cast<const T*>(t.b);
  auto* o0 = static_cast<T*>(t.out0);
  auto* o1 = static_cast<T*>(t.out1);
  const size_t head = headOf<T>(t.count, {t.a, kOp == arith::kCopy ? nullptr : t.b, t.out0, t.out1});
  const size_t work = std::max((t.count - head) / (kVecBytes / sizeof(T)), head + 1);
  reduceKernel<S, kOp, kDivide><<<blocksFor(work), kThreads, 0, stream>>>(a, b, o0, o1, t.count, head, t.divisor);
  return launched();
}

template <class S, int kOp>
int launchReduceOp(const ReduceTask& t, cudaStream_t stream) {
  if (t.divisor > 1) return launchReduce<S, kOp, true>(t, stream);
  return launchReduce<S, kOp, false>(t, stream);
}

}  // namespace

int reduce(const ReduceTask& t, void* stream) {
  if (t.count == 0) return 0;
  return arith::withFormat(t.dtype, [&](auto s) {
    using S = decltype(s);
    if (t.b == nullptr) return launchReduceOp<S, arith::kCopy>(t, asStream(stream));
    return arith::withOp(t.op, [&](auto tag) {
      return launchReduceOp<S, decltype(tag)::value>(t, asStream(stream));
    });
  });
}

int scale(DType dtype, void* out, const void* in, size_t count, const void* scalar, void* stream) {
  if (count == 0) return 0;
  return arith::withFormat(dtype, [&](auto f) {
    using S = decltype(f);
    using T = typename S::Elem;
    T s;
    std::memcpy(&s, scalar, sizeof(T));
    const size_t head = headOf<T>(count, {out, in});
    const size_t work = std::max((count - head) / (kVecBytes / sizeof(T)), head + 1);
    scaleKernel<S><<<blocksFor(work), kThreads, 0, asStream(stream)>>>(static_cast<T*>(out), static_cast<const T*>(in),
                                                                      count, head, s);
    return launched();
  });
}

int cast(DType from, DType to, void* out, const void* in, size_t count, void* stream) {
  auto floating = [](DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::Bfloat16; };
  if (!floating(from) || !floating(to) || (from != DType::Float32 && to != DType::Float32 && from != to))
    return static_cast<int>(cudaErrorInvalidValue);
  if (count == 0) return 0;
  if (from == to) {
    return static_cast<int>(
        cudaMemcpyAsync(out, in, count * dtypeSize(from), cudaMemcpyDefault, asStream(stream)));
  }
  return arith::withFormat(from, [&](auto f) {
    using From = decltype(f);
    return arith::withFormat(to, [&](auto g) {
      using To = decltype(g);
      // Only float32 <-> 16-bit reaches here; the rest are never launched.
      if constexpr (sizeof(typename From::C) == 4 && sizeof(typename To::C) == 4 &&
                    !(std::is_integral_v<typename From::C> || std::is_integral_v<typename To::C>)) {
        castKernel<From, To><<<blocksFor(count), kThreads, 0, asStream(stream)>>>(
            static_cast<typename To::Elem*>(out), static_cast<const typename From::Elem*>(in), count);
        return launched();
      }
      return static_cast<int>(cudaErrorInvalidValue);
    });
  });
}


int loadKernels() {
  int first = 0;
  for (DType d : {DType::Int8, DType::Uint8, DType::Int32, DType::Uint32, DType::Int64, DType::Uint64, DType::Float16,
                  DType::Float32, DType::Float64, DType::Bfloat16}) {
    arith::withFormat(d, [&](auto s) {
      using S = decltype(s);
      loadOne(reduceKernel<S, arith::kCopy, false>, first);
      loadOne(reduceKernel<S, arith::kCopy, true>, first);
      for (Op op : {Op::Sum, Op::Prod, Op::Max, Op::Min})
        arith::withOp(op, [&](auto tag) {
          loadOne(reduceKernel<S, decltype(tag)::value, false>, first);
          loadOne(reduceKernel<S, decltype(tag)::value, true>, first);
          return 0;
        });
      loadOne(scaleKernel<S>, first);
      return 0;
    });
  }
  loadOne(castKernel<arith::Plain<float>, arith::Half>, first);
  loadOne(castKernel<arith::Half, arith::Plain<float>>, first);
  loadOne(castKernel<arith::Plain<float>, arith::Bfloat16>, first);
  loadOne(castKernel<arith::Bfloat16, arith::Plain<float>>, first);
  const int codecs = loadCodecKernels();
  const int all = loadReduceAllKernels();
  return first != 0 ? first : codecs != 0 ? codecs : all;
}

std::string errorString(int code) {
  return std::string(cudaGetErrorName(static_cast<cudaError_t>(code))) + ": " +
         cudaGetErrorString(static_cast<cudaError_t>(code));
}

int deviceCount(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = errorString(static_cast<int>(e));
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime sees no device";
  return n;
}

}  // namespace gyre::kernels::cuda
