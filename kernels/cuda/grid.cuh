// What the CUDA kernels' launches share (elementwise.cu, reduce_all.cu): the
// block size, how many blocks a launch takes, and the eager load of a
// kernel (launch.h's loadKernels says why). For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gyre::kernels::cuda::grid {

inline constexpr int kThreads = 256;

// Blocks for `work` items: enough to fill every SM several times over, no
// more (the grid strides over the rest).
inline int blocksFor(size_t work) {
  static thread_local int device = -1, sms = 0;
  int d = 0;
  if (cudaGetDevice(&d) == cudaSuccess && d != device) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d) != cudaSuccess) sms = 0;
    device = d;
  }
  const size_t cap = static_cast<size_t>(sms > 0 ? sms : 16) * 8;
  const size_t want = (work + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<size_t>(1, std::min(want, cap)));
}

inline constexpr size_t kVecBytes = 16;

// Where a kernel's 16-byte vector body starts: the head's length in
// elements T over pointers ptrs[0, count) (nulls ignored; the first is
// never null), or n when their offsets within 16 bytes differ (or are not
// whole elements).
template <class T>
size_t headOf(size_t n, const void* const* ptrs, size_t count) {
  const uintptr_t mis = reinterpret_cast<uintptr_t>(ptrs[0]) % kVecBytes;
  for (size_t i = 0; i < count; ++i)
    if (ptrs[i] != nullptr && reinterpret_cast<uintptr_t>(ptrs[i]) % kVecBytes != mis) return n;
  if (mis % sizeof(T) != 0) return n;
  return std::min(n, mis == 0 ? size_t{0} : (kVecBytes - mis) / sizeof(T));
}

// Loads kernel k now; keeps the first error in `first`.
template <class Kernel>
void loadOne(Kernel* k, int& first) {
  cudaFuncAttributes a;
  if (const cudaError_t e = cudaFuncGetAttributes(&a, k); e != cudaSuccess && first == 0) first = static_cast<int>(e);
}

}  // namespace gyre::kernels::cuda::grid
