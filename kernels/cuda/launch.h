// The CUDA kernels (reduce, scale, cast, the codecs), enqueued on a stream. Built where
// the toolkit is (GYRE_CUDA, GYRE_HAVE_CUDA); this header needs no CUDA
// headers, so the layers above include it on every build.
//
// Each call checks nothing the caller has not (the device backend classifies
// buffers and streams first), enqueues one kernel on `stream` (a
// cudaStream_t; null is the legacy default stream) and returns at once:
// 0 (cudaSuccess) or the CUDA runtime's error code, which errorString()
// names. The arithmetic per element is kernels/common/arith.h's, the CPU
// kernels' own, so a device result equals the host's bit for bit except for
// the payload of a NaN that a sum, product or divide makes (the GPU's is
// canonical; reduce.h leaves it open on the CPU too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu/reduce.h"

namespace gyre::kernels::cuda {

// The task's pointers are device-accessible (device, managed or mapped
// pinned memory); any alignment and count. As the CPU's run(), out0/out1
// may be a or b, never a partial overlap.
int reduce(const ReduceTask& task, void* stream);

// kernels::runAll (reduce.h) on the device: every input read once, the
// result written to every output; pointers device-accessible (a peer's
// through CUDA IPC), an output either one of the inputs or apart from all.
int reduceAll(const ReduceAllTask& task, void* stream);

// out[i] = in[i] * scalar (PreMulSum); scalar points to one host value of
// the dtype, read before the call returns.
int scale(DType dtype, void* out, const void* in, size_t count, const void* scalar, void* stream);

// Conversion between float32 and float16/bfloat16 (either way; the same
// type is a copy): rounds to nearest even as the CPU's conversions do.
int cast(DType from, DType to, void* out, const void* in, size_t count, void* stream);

// The codecs (kernels/common/codec.h's messages, kernels/cpu/codec.h's
// meaning; the same bytes as the CPU's): dtype float32, float16 or
// bfloat16; residual (n float32, or null) for error feedback; out float32.
int quantizeMinMax(DType dtype, const void* in, size_t n, void* message, float* residual, void* stream);
int dequantizeMinMax(const void* message, size_t n, float* out, bool accumulate, void* stream);
int packSigns(DType dtype, const void* in, size_t n, void* message, float* residual, void* stream);
int unpackSigns(const void* message, size_t n, float* out, bool accumulate, void* stream);

// Loads every kernel here on the current device now (0, or the first
// error). CUDA loads a kernel lazily, at its first launch, and that load may
// wait for the whole device to be idle: a caller's stream held by gyre's
// stream gate until gyre's own stream has run the call would then never
// drain. The device backend calls this before it first gates a stream.
int loadKernels();
// The codecs' and reduceAll's parts of loadKernels() (codec.cu, reduce_all.cu).
int loadCodecKernels();
int loadReduceAllKernels();

// The runtime's words for an error code.
std::string errorString(int code);

// How many devices the runtime sees; 0 with *why filled when there is no
// driver, no device, or a driver too old for this build.
int deviceCount(std::string* why);

}  // namespace gyre::kernels::cuda
