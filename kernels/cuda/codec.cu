// The codecs' CUDA kernels (launch.h): one block of kLanes threads per chunk
// for the encoders, so that a chunk's range and mean come from one block's
// reduction, in codec.h's order (thread l is lane l; the tree halves in
// shared memory); the decoders are grid-stride loops. The arithmetic is
// kernels/common/codec.h's, as the CPU's (kernels/cpu/codec.cc): the same
// input makes the same message, byte for byte.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/codec.h"
#include "kernels/cuda/grid.cuh"
#include "kernels/cuda/launch.h"

namespace gyre::kernels::cuda {

namespace {

constexpr uint32_t kThreads = codec::kLanes;
constexpr uint32_t kPerThread = codec::kChunk / codec::kLanes;

cudaStream_t asStream(void* s) { return static_cast<cudaStream_t>(s); }

__device__ float valueAt(const void* in, codec::Input type, const float* residual, size_t i) {
  const float x = codec::load(in, type, i);
  return residual ? x + residual[i] : x;
}

__global__ void __launch_bounds__(kThreads)
    quantizeMinMaxKernel(const void* in, codec::Input type, size_t n, codec::Range* ranges, uint8_t* codes,
                         float* residual) {
  __shared__ float lo[kThreads], hi[kThreads];
  const size_t begin = static_cast<size_t>(blockIdx.x) * codec::kChunk;
  const size_t end = min(begin + codec::kChunk, n);
  float v[kPerThread];
  codec::Range r = codec::emptyRange();
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const size_t i = begin + threadIdx.x + static_cast<size_t>(k) * kThreads;
    if (i < end) {
      v[k] = valueAt(in, type, residual, i);
      codec::widen(r, v[k]);
    }
  }
  lo[threadIdx.x] = r.lo;
  hi[threadIdx.x] = r.hi;
  __syncthreads();
  for (uint32_t s = kThreads / 2; s >= 1; s /= 2) {
    if (threadIdx.x < s) {
      codec::Range a{lo[threadIdx.x], hi[threadIdx.x]};
      codec::merge(a, codec::Range{lo[threadIdx.x + s], hi[threadIdx.x + s]});
      lo[threadIdx.x] = a.lo;
      hi[threadIdx.x] = a.hi;
    }
    __syncthreads();
  }
  const codec::Range range = codec::settle(codec::Range{lo[0], hi[0]});
  if (threadIdx.x == 0) ranges[blockIdx.x] = range;
  const float inv = codec::inverseStep(range), step = codec::step(range);
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const size_t i = begin + threadIdx.x + static_cast<size_t>(k) * kThreads;
    if (i < end) {
      const uint8_t c = codec::encode(v[k], range, inv);
      codes[i] = c;
      if (residual) residual[i] = v[k] - codec::decode(c, range, step);
    }
  }
}

__global__ void dequantizeMinMaxKernel(const codec::Range* ranges, const uint8_t* codes, size_t n, float* out,
                                       bool accumulate) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const codec::Range r = ranges[i / codec::kChunk];
    const float d = codec::decode(codes[i], r, codec::step(r));
    out[i] = accumulate ? out[i] + d : d;
  }
}

__global__ void __launch_bounds__(kThreads)
    packSignsKernel(const void* in, codec::Input type, size_t n, float* scales, uint32_t* words, float* residual) {
  __shared__ float lane[kThreads];
  const size_t begin = static_cast<size_t>(blockIdx.x) * codec::kChunk;
  const size_t end = min(begin + codec::kChunk, n);
  float v[kPerThread];
  float sum = 0.0f;  // this lane's: its elements in turn
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const size_t i = begin + threadIdx.x + static_cast<size_t>(k) * kThreads;
    v[k] = i < end ? valueAt(in, type, residual, i) : 0.0f;
    if (i < end) sum += codec::magnitude(v[k]);
  }
  lane[threadIdx.x] = sum;
  __syncthreads();
  for (uint32_t s = kThreads / 2; s >= 1; s /= 2) {
    if (threadIdx.x < s) lane[threadIdx.x] += lane[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = codec::meanOf(lane[0], static_cast<uint32_t>(end - begin));
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  // A warp's 32 threads hold 32 consecutive elements for each k: one word.
  for (uint32_t k = 0; k < kPerThread; ++k) {
    const size_t i = begin + threadIdx.x + static_cast<size_t>(k) * kThreads;
    const uint32_t bit = i < end ? codec::signBit(v[k]) : 0u;
    const uint32_t word = __ballot_sync(0xffffffffu, bit != 0);
    if (i < end && (threadIdx.x % 32) == 0) words[i / 32] = word;
    if (i < end && residual) residual[i] = v[k] - codec::unsign(bit, scale);
  }
}

__global__ void unpackSignsKernel(const float* scales, const uint32_t* words, size_t n, float* out, bool accumulate) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float d = codec::unsign((words[i / 32] >> (i % 32)) & 1u, scales[i / codec::kChunk]);
    out[i] = accumulate ? out[i] + d : d;
  }
}

int inputOf(DType t, codec::Input& in) {
  switch (t) {
    case DType::Float32: in = codec::kF32; return 0;
    case DType::Float16: in = codec::kF16; return 0;
    case DType::Bfloat16: in = codec::kBf16; return 0;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

int decodeBlocks(size_t n) { return static_cast<int>(std::max<size_t>(1, std::min<size_t>((n + 255) / 256, 4096))); }

}  // namespace

int loadCodecKernels() {
  int first = 0;
  grid::loadOne(quantizeMinMaxKernel, first);
  grid::loadOne(dequantizeMinMaxKernel, first);
  grid::loadOne(packSignsKernel, first);
  grid::loadOne(unpackSignsKernel, first);
  return first;
}

int quantizeMinMax(DType dtype, const void* in, size_t n, void* message, float* residual, void* stream) {
  codec::Input type;
  if (int e = inputOf(dtype, type)) return e;
  if (n == 0) return 0;
  auto* ranges = static_cast<codec::Range*>(message);
  auto* codes = static_cast<uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  quantizeMinMaxKernel<<<static_cast<unsigned>(codec::chunks(n)), kThreads, 0, asStream(stream)>>>(
      in, type, n, ranges, codes, residual);
  return static_cast<int>(cudaGetLastError());
}

int dequantizeMinMax(const void* message, size_t n, float* out, bool accumulate, void* stream) {
  if (n == 0) return 0;
  const auto* ranges = static_cast<const codec::Range*>(message);
  const auto* codes = static_cast<const uint8_t*>(message) + codec::chunks(n) * sizeof(codec::Range);
  dequantizeMinMaxKernel<<<decodeBlocks(n), 256, 0, asStream(stream)>>>(ranges, codes, n, out, accumulate);
  return static_cast<int>(cudaGetLastError());
}

int packSigns(DType dtype, const void* in, size_t n, void* message, float* residual, void* stream) {
  codec::Input type;
  if (int e = inputOf(dtype, type)) return e;
  if (n == 0) return 0;
  auto* scales = static_cast<float*>(message);
  auto* words = reinterpret_cast<uint32_t*>(static_cast<unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  packSignsKernel<<<static_cast<unsigned>(codec::chunks(n)), kThreads, 0, asStream(stream)>>>(in, type, n, scales,
                                                                                               words, residual);
  return static_cast<int>(cudaGetLastError());
}

int unpackSigns(const void* message, size_t n, float* out, bool accumulate, void* stream) {
  if (n == 0) return 0;
  const auto* scales = static_cast<const float*>(message);
  const auto* words =
      reinterpret_cast<const uint32_t*>(static_cast<const unsigned char*>(message) + codec::chunks(n) * sizeof(float));
  unpackSignsKernel<<<decodeBlocks(n), 256, 0, asStream(stream)>>>(scales, words, n, out, accumulate);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gyre::kernels::cuda
