// gyre-gpu-kernel-bench: the CUDA reduce kernel's bandwidth against the same
// GPU's device-to-device copy, measured in the same run (docs/PERFORMANCE-gpu.md).
//
//   gyre-gpu-kernel-bench [--bytes N] [--reps N]
//
// A copy moves 2x its size (read + write), a two-input reduce 3x; both rates
// count every byte, so their ratio is the kernel's share of what the memory
// gives a plain copy. Times are CUDA events around each launch; the median
// of --reps is reported. Prints a Markdown table and exits 0, or says why no
// GPU is usable and exits 2.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/launch.h"

namespace {

namespace k = gyre::kernels;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gyre-gpu-kernel-bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Median milliseconds of `reps` timed runs of f (after two untimed ones).
float medianMs(int reps, const std::function<int()>& f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int i = 0; i < reps + 2; ++i) {
    cudaEventRecord(start);
    if (int e = f(); e != 0) {
      std::fprintf(stderr, "gyre-gpu-kernel-bench: %s\n", k::cuda::errorString(e).c_str());
      std::exit(1);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (i >= 2) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{256} << 20;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bytes" && i + 1 < argc) {
      bytes = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gyre-gpu-kernel-bench [--bytes N] [--reps N]\n");
      return 2;
    }
  }
  std::string why;
  if (k::cuda::deviceCount(&why) == 0) {
    std::fprintf(stderr, "gyre-gpu-kernel-bench: no GPU: %s\n", why.c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  void *a = nullptr, *b = nullptr, *out = nullptr;
  if (!ok(cudaMalloc(&a, bytes), "cudaMalloc") || !ok(cudaMalloc(&b, bytes), "cudaMalloc") ||
      !ok(cudaMalloc(&out, bytes), "cudaMalloc"))
    return 1;
  cudaMemset(a, 0x3c, bytes);  // 0x3c3c...: finite values in every type
  cudaMemset(b, 0x3c, bytes);
  const double gb = static_cast<double>(bytes) / 1e9;
  const float copyMs = medianMs(reps, [&] {
    return static_cast<int>(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice));
  });
  const double copyGBs = 2 * gb / (copyMs / 1e3);
  std::printf("# %s, %zu MiB buffers, median of %d\n\n", prop.name, bytes >> 20, reps);
  std::printf("| kernel | ms | GB/s (all bytes moved) | vs D2D copy |\n|---|---|---|---|\n");
  std::printf("| D2D copy (cudaMemcpyAsync) | %.3f | %.0f | 1.00 |\n", copyMs, copyGBs);
  struct Case {
    const char* name;
    k::DType dt;
    k::Op op;
    bool twoInputs;
    uint32_t divisor;
  };
  const Case cases[] = {{"reduce sum fp32", k::DType::Float32, k::Op::Sum, true, 1},
                        {"reduce sum bf16", k::DType::Bfloat16, k::Op::Sum, true, 1},
                        {"reduce sum fp16", k::DType::Float16, k::Op::Sum, true, 1},
                        {"reduce max fp32", k::DType::Float32, k::Op::Max, true, 1},
                        {"reduce sum fp32, avg (/4)", k::DType::Float32, k::Op::Sum, true, 4},
                        {"copy bf16 via the kernel", k::DType::Bfloat16, k::Op::Sum, false, 1}};
  for (const Case& c : cases) {
    k::ReduceTask t;
    t.dtype = c.dt;
    t.op = c.op;
    t.a = a;
    t.b = c.twoInputs ? b : nullptr;
    t.out0 = out;
    t.count = bytes / k::dtypeSize(c.dt);
    t.divisor = c.divisor;
    const float ms = medianMs(reps, [&] { return k::cuda::reduce(t, nullptr); });
    const double gbs = (c.twoInputs ? 3 : 2) * gb / (ms / 1e3);
    std::printf("| %s | %.3f | %.0f | %.2f |\n", c.name, ms, gbs, gbs / copyGBs);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
  return 0;
}
